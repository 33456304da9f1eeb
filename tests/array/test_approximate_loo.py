"""The array kernels of approximate-posterior and mixture LOO: with no correction the former
is PSIS-LOO with r_eff = 1; the latter is its defining formula, written out draw by draw."""

import warnings

import numpy as np

import bayesij
from bayesij.array.approximate_loo import approximate_posterior_loo, mixture_loo


def test_no_correction_is_psis_loo_with_unit_r_eff():
    rng = np.random.default_rng(0)
    log_lik = rng.normal(-1, 0.5, size=(1000, 12)) + rng.standard_t(3, size=(1000, 1))
    arrays = approximate_posterior_loo(log_lik, np.zeros(1000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = bayesij.loo(log_lik, convention=bayesij.PsisOptions(r_eff=1.0)).pointwise
    np.testing.assert_allclose(arrays.elpd, plain["elpd_loo"], rtol=1e-12)
    np.testing.assert_allclose(arrays.pareto_k, plain["pareto_k"], rtol=1e-12)
    np.testing.assert_allclose(arrays.mcse, plain["mcse_elpd_loo"], rtol=1e-10)
    np.testing.assert_allclose(arrays.lppd, plain["lppd"], rtol=1e-12)
    shifted = approximate_posterior_loo(log_lik, np.full(1000, 40.0))  # a constant: no change
    np.testing.assert_allclose(shifted.elpd, arrays.elpd, rtol=1e-12)


def test_mixture_estimator_is_its_formula():
    rng = np.random.default_rng(1)
    log_lik = rng.normal(-1, 1, size=(50, 4))
    arrays = mixture_loo(log_lik)
    for n in range(4):
        inverse_sum = [1 / np.sum(np.exp(-log_lik[s])) for s in range(50)]
        numerator = np.sum(inverse_sum)
        denominator = np.sum([np.exp(-log_lik[s, n]) * inverse_sum[s] for s in range(50)])
        assert abs(arrays.elpd[n] - np.log(numerator / denominator)) < 1e-12
        weights = np.array(inverse_sum) / numerator
        lppd = np.log(np.sum(weights * np.exp(log_lik[:, n])))
        assert abs(arrays.lppd[n] - lppd) < 1e-12


def test_mixture_khat_is_that_of_each_observations_mixture_weights():
    from bayesij.array.psis import khat_tail_length, pareto_khat_columns

    rng = np.random.default_rng(2)
    log_lik = rng.normal(-1, 1, size=(400, 5)) + rng.standard_t(2, size=(400, 1))
    arrays = mixture_loo(log_lik)
    for n in range(5):
        weights = np.array(
            [np.exp(-log_lik[s, n]) / np.sum(np.exp(-log_lik[s])) for s in range(400)]
        )
        expected = pareto_khat_columns(weights[:, None], khat_tail_length(400, np.ones(1)))[0]
        assert abs(arrays.pareto_k[n] - expected) < 1e-10
