"""loo_i: one unit's PSIS-LOO from its column alone, equal to its row of loo() for every
input kind, by id or position, under a peer's convention; arviz-stats' loo_i in 3.12."""

import warnings

import numpy as np
import pytest

import bayesij
from peers import ARVIZ_1, from_dict

COLUMNS = ["elpd_loo", "p_loo", "pareto_k", "mcse_elpd_loo", "ess", "r_eff", "lppd"]


@pytest.fixture(scope="module")
def fit():
    rng = np.random.default_rng(11)
    y = rng.standard_t(3, size=40)
    mu = y.mean() + rng.normal(size=(4, 400, 1)) / np.sqrt(40)
    log_lik = -0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi)
    return y, mu, log_lik


def _same_row(one, full, label):
    assert list(one.pointwise.index) == [label]
    np.testing.assert_allclose(
        one.pointwise[COLUMNS].to_numpy()[0],
        full.pointwise.loc[label, COLUMNS].to_numpy(),
        rtol=1e-12,
    )
    assert one.elpd == pytest.approx(full.pointwise.loc[label, "elpd_loo"], rel=1e-12)


def test_one_unit_equals_its_row_of_loo(fit):
    y, mu, log_lik = fit
    full = bayesij.loo(log_lik)
    worst = int(np.argmax(full.pointwise["pareto_k"]))  # the outlier's heavy tail
    for unit in (0, worst, 39, -1):
        one = bayesij.loo_i(log_lik, unit)
        _same_row(one, full, unit % 40)
    r = bayesij.loo(log_lik, convention="R loo")
    _same_row(bayesij.loo_i(log_lik, worst, convention="R loo"), r, worst)


def test_a_lazy_log_likelihood_is_called_for_that_unit_only(fit):
    y, mu, log_lik = fit
    asked = []

    def log_lik_fn(block, draws):
        asked.append(block.size)
        return -0.5 * (block[None, :] - draws[:, :1]) ** 2 - 0.5 * np.log(2 * np.pi)

    lazy = bayesij.loglik_function(log_lik_fn, y, mu.reshape(-1, 1), n_chains=4)
    one = bayesij.loo_i(lazy, 5)
    assert asked in ([1], [1, 1])  # the unit (after one probe of a column's shape)
    _same_row(one, bayesij.loo(log_lik), 5)


def test_units_are_found_by_id_and_by_position(fit):
    y, mu, log_lik = fit
    names = [f"school {k}" for k in range(40)]
    post = bayesij.from_arrays(mu, log_lik, quantity_names=["mu"], obs_names=names)
    full = bayesij.loo(post)
    _same_row(bayesij.loo_i(post, "school 7"), full, "school 7")
    _same_row(bayesij.loo_i(post, 7), full, "school 7")  # no such id: the position
    with pytest.raises(ValueError, match=r"unit: found 'school 40'; expected a unit's id"):
        bayesij.loo_i(post, "school 40")
    with pytest.raises(ValueError, match=r"unit: found 40; expected .* position in 0\.\.39"):
        bayesij.loo_i(post, 40)


def test_a_fit_s_posterior_r_eff_is_the_whole_posterior_s(fit):
    y, mu, log_lik = fit
    data = from_dict(posterior={"mu": mu[..., 0]}, log_likelihood={"obs": log_lik})
    for convention in ("arviz-stats", "ArviZ 0.23"):
        full = bayesij.loo(data, convention=convention)
        _same_row(bayesij.loo_i(data, 3, convention=convention), full, full.pointwise.index[3])


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' loo_i (Python >= 3.12)")
def test_loo_i_equals_arviz_stats(fit):
    from arviz_stats import loo_i

    y, mu, log_lik = fit
    data = from_dict(posterior={"mu": mu[..., 0]}, log_likelihood={"obs": log_lik})
    for i in (0, 17):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = loo_i(i, data)
        ours = bayesij.loo_i(data, i, convention="arviz-stats")
        assert ours.elpd == pytest.approx(float(theirs.elpd), rel=1e-12)
        assert ours.pointwise["pareto_k"].iloc[0] == pytest.approx(
            float(np.asarray(theirs.pareto_k).ravel()[0]), rel=1e-10
        )
