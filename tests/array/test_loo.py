"""Array-level pieces of PSIS-LOO checked against their direct definitions."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesij.array.loo import _BLOM, loo_pointwise, mcse_elpd


def test_mcse_series_equals_the_direct_blom_formula():
    # R loo: variance of log(E + sd q) over 1000 Blom quantiles q, i.e. of log1p(c q).
    c = np.r_[np.linspace(0.0, 0.3, 301), [0.31, 0.5, 1.0, 3.0]]
    expected = []
    for value in c:
        z = 1 + value * _BLOM
        logs = np.log(z[z > 0])
        expected.append(np.sqrt(logs.var(ddof=1)))
    np.testing.assert_allclose(mcse_elpd(c, np.ones_like(c)), expected, rtol=1e-12, atol=1e-300)


def test_lppd_of_columns_with_a_huge_log_likelihood_range():
    # A range of 1000 makes exp(min - l) underflow: lppd must come from a log-sum-exp.
    rng = np.random.default_rng(3)
    log_lik = rng.normal(size=(400, 3))
    log_lik[:, 1] *= 400.0
    log_lik[0, 2] = -1000.0
    result = loo_pointwise(log_lik, r_eff=1.0)
    np.testing.assert_allclose(result.lppd, logsumexp(log_lik, axis=0) - np.log(400), rtol=1e-13)


@pytest.mark.parametrize("options", [{}, {"save_log_weights": True}, {"r_eff": 1.0}])
@pytest.mark.parametrize("methods", [("psis",), ("is",), ("psis", "ij")])
def test_leave_one_out_means_from_the_same_pass(options, methods):
    """expectation_draws: the LOO means of quantities under the base method's normalised
    weights, whichever path computed them (compiled kernel, general path for tied draws,
    saved weights, plain IS), equal the means under the saved log-weights."""
    from bayesij.array.loo import loo_methods

    rng = np.random.default_rng(4)
    f = rng.normal(size=(4, 500, 3))
    y = rng.standard_t(3, size=300)
    log_lik = -0.5 * (y - 0.3 * f[..., :1]) ** 2 / (1 + 0.1 * f[..., 1:2] ** 2)
    log_lik[:, :3, 7] = log_lik[:, 3:6, 7]  # repeated draws in one column
    flat = f.reshape(-1, 3)
    if "r_eff" in options:
        options = {"r_eff": np.ones(300)}
    got = loo_methods(log_lik, methods, expectation_draws=flat, **options)
    plain = {k: v for k, v in options.items() if k != "save_log_weights"}
    saved = loo_methods(log_lik, methods, save_log_weights=True, **plain)
    base = "is" if methods == ("is",) else "psis"
    expected = flat.T @ np.exp(saved[base].log_weights)
    np.testing.assert_allclose(got[base].expectations, expected, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got[base].elpd, saved[base].elpd, rtol=0, atol=1e-12)
    assert all(got[m].expectations is None for m in methods if m != base)


def test_truncated_importance_sampling_by_hand():
    """TIS cuts each ratio 1 / p_s at sqrt(S) times the ratios' mean, then self-normalises:
    with no ratio above the cut it is plain IS; with one far above, that ratio is replaced
    by the cut (Ionides 2008)."""
    calm = np.log(np.array([[0.5, 0.6, 0.7, 0.8]] * 3)).T  # (S = 4, one column each)
    tis = loo_pointwise(calm[:, :1], method="tis", r_eff=1.0)
    plain = loo_pointwise(calm[:, :1], method="is", r_eff=1.0)
    assert tis.elpd[0] == pytest.approx(plain.elpd[0], rel=1e-12)
    p = np.array([1e-6, 0.5, 0.6, 0.7])  # one draw under which the point is nearly impossible
    ratios = 1 / p
    cut = ratios.mean() * np.sqrt(p.size)
    weights = np.minimum(ratios, cut)
    expected = np.log(np.sum(weights * p) / weights.sum())
    result = loo_pointwise(np.log(p)[:, None], method="tis", r_eff=1.0)
    assert result.elpd[0] == pytest.approx(expected, rel=1e-12)
    assert result.elpd[0] != pytest.approx(
        loo_pointwise(np.log(p)[:, None], method="is", r_eff=1.0).elpd[0], rel=1e-3
    )


def test_each_chunk_sees_every_observation_once_as_rows():
    """``each_chunk`` gets each chunk of observations once, with the columns' values as
    rows, before PSIS may overwrite them (here: an impossible observation, whose ``-inf``
    the PSIS rows replace), and the results do not change."""
    from bayesij.array.loo import loo_methods

    rng = np.random.default_rng(2)
    matrix = rng.normal(-1.0, 0.5, size=(1200, 700))
    matrix[:3, 40] = -np.inf
    seen = np.zeros(700, dtype=int)

    def each_chunk(values, chunk, rows):
        assert values is not None and rows.shape == (chunk.stop - chunk.start, 1200)
        np.testing.assert_array_equal(rows, matrix[:, chunk].T)
        seen[chunk] += 1

    with_hook = loo_methods(matrix, ("psis",), each_chunk=each_chunk)["psis"]
    plain = loo_methods(matrix, ("psis",))["psis"]
    np.testing.assert_array_equal(seen, 1)
    np.testing.assert_array_equal(with_hook.elpd, plain.elpd)
    np.testing.assert_array_equal(with_hook.pareto_k, plain.pareto_k)


def test_a_chunk_s_r_eff_by_the_split_rule_is_the_split_chain_r_eff_given():
    """``r_eff_rule="split"``: each chunk's r_eff from its rows by R loo's rule from 2.9 on,
    the same as giving that r_eff (computed apart, ArviZ's split-chain ESS); an unknown rule
    is refused by name."""
    from bayesij.array.ess import log_lik_relative_eff
    from bayesij.array.loo import loo_methods

    rng = np.random.default_rng(8)
    log_lik = rng.normal(-1.0, 0.4, size=(4, 300, 50))
    log_lik += 0.3 * np.cumsum(rng.normal(size=(4, 300, 1)), axis=1) / 10  # some mixing
    split = loo_methods(log_lik, ("psis",), r_eff_rule="split")["psis"]
    given = loo_methods(log_lik, ("psis",), r_eff=log_lik_relative_eff(log_lik, split=True))["psis"]
    np.testing.assert_array_equal(split.r_eff, given.r_eff)
    np.testing.assert_allclose(split.elpd, given.elpd, rtol=1e-14)
    chains = loo_methods(log_lik, ("psis",))["psis"]
    assert not np.allclose(chains.r_eff, split.r_eff, rtol=1e-6)  # the rules differ
    with pytest.raises(ValueError, match=r"^r_eff_rule: found 'posterior'; expected one of"):
        loo_methods(log_lik, ("psis",), r_eff_rule="posterior")
