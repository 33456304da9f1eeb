"""The compiled PSIS-LOO kernel against the general NumPy path (itself equal to ArviZ and R loo,
tests/stats/test_loo.py), its vectorised pieces against NumPy's exp and log, and the value
check against a direct count."""

import numpy as np
import pytest
from numba import njit

from bayesij.array.kernels import _exp, _log_positive, count_outside, log_variances
from bayesij.array.loo import _BLOM, _psis_elpd, loo_pointwise, mcse_elpd
from bayesij.array.psis import tail_length
from bayesij.array.psis_kernel import _largest_sorted, fused_psis_loo


def _general(rows, tails, r_eff):
    scratch = tuple(np.empty(rows.shape) for _ in range(3))
    with np.errstate(all="ignore"):
        return _psis_elpd(rows, rows.min(axis=1), tails, r_eff, True, "above", scratch)


def _normal_rows(seed, n_rows=300, n_draws=2000):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(n_draws, 1)) * np.linspace(0.1, 2.0, n_rows)
    y = rng.normal(size=n_rows) * 2
    return np.ascontiguousarray((-0.5 * (y - mu) ** 2).T)


def _heavy_rows(seed, n_rows=300, n_draws=2000):
    rng = np.random.default_rng(seed)
    mu = rng.standard_t(3, size=(n_draws, 1)) * np.linspace(0.05, 3, n_rows)
    y = rng.standard_t(2, size=n_rows) * 3
    return np.ascontiguousarray((-0.5 * (y - mu) ** 2).T)


@pytest.mark.parametrize("make", [_normal_rows, _heavy_rows])
@pytest.mark.parametrize("seed", [0, 1])
def test_fused_equals_the_general_path(make, seed):
    rows = make(seed)
    r_eff = np.random.default_rng(seed).uniform(0.3, 1.2, len(rows))
    tails = tail_length(rows.shape[1], r_eff)
    fused = fused_psis_loo(rows, tails)
    lppd, elpd, k, mcse, ess = _general(rows, tails, r_eff)
    done = fused.done
    assert done.sum() >= 90  # the heavy rows with k-hat far above 1 are left (wide ranges)
    np.testing.assert_allclose(fused.elpd[done], elpd[done], rtol=0, atol=1e-12)
    np.testing.assert_allclose(fused.lppd[done], lppd[done], rtol=0, atol=1e-12)
    np.testing.assert_allclose(fused.pareto_k[done], k[done], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r_eff[done] / fused.sum_w2[done], ess[done], rtol=1e-12)
    ours = mcse_elpd(fused.relative_error[done], r_eff[done])
    np.testing.assert_allclose(ours, mcse[done], rtol=1e-10)
    np.testing.assert_array_equal(fused.minimum, rows.min(axis=1))


def test_rows_that_need_the_general_path_are_left():
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(6, 1000))
    rows[0, :] = 2.0  # constant
    rows[1, 0] = -np.inf  # impossible observation
    rows[2, 0] = -800.0  # a range beyond 700
    order = np.argsort(rows[3])
    rows[3, order[:80]] = rows[3, order[0]]  # the smallest values tied: the cutoff with them
    tails = np.array([40, 40, 40, 40, 3, 40])  # row 4: too short a tail to fit
    fused = fused_psis_loo(rows, tails)
    np.testing.assert_array_equal(fused.done, [False, False, False, False, False, True])


def test_loo_with_left_rows_equals_the_general_path_everywhere():
    rows = _heavy_rows(0, n_rows=120).T  # draws x observations
    rows[0, 5] = -np.inf
    fast = loo_pointwise(rows, r_eff=0.8)
    general = loo_pointwise(rows, r_eff=0.8, save_log_weights=True)  # no fused kernel
    np.testing.assert_allclose(fast.elpd, general.elpd, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.pareto_k, general.pareto_k, rtol=1e-12)
    np.testing.assert_allclose(fast.mcse[6:], general.mcse[6:], rtol=1e-10)
    assert fast.elpd[5] == -np.inf


@pytest.mark.parametrize("seed", range(4))
def test_largest_sorted_equals_a_full_sort(seed):
    rng = np.random.default_rng(seed)
    w = np.exp(-rng.exponential(size=4000) * rng.uniform(0.1, 50))
    w[rng.integers(0, 4000, 300)] = w[7]  # ties
    if seed == 3:  # the sampled draws are the largest: the threshold misleads
        w[::16] = 1.0 + np.arange(250) * 1e-3
    for count in (6, 201, 801):
        out, spare = np.empty(4000), np.empty(4000)
        _largest_sorted(w, count, out, spare, np.empty(2048, dtype=np.int64))
        np.testing.assert_array_equal(out[:count], np.sort(w)[-count:])


@njit
def _exp_loop(x):
    """The kernels' exp in a loop the compiler vectorises, as the kernels use it."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = _exp(x[i])
    return out


def test_vectorised_exp_is_within_two_ulp():
    x = np.r_[np.linspace(-708, 0, 200001), -np.logspace(-300, 2.8, 5000), 0.0]
    ours = _exp_loop(x)
    np.testing.assert_array_max_ulp(ours, np.exp(x), maxulp=2)


def test_vectorised_log_is_within_three_ulp():
    rng = np.random.default_rng(2)
    z = np.r_[np.exp(rng.uniform(-700, 700, 100000)), rng.uniform(0.5, 2, 100000), 1.0, 2.0]
    out = np.empty_like(z)
    _log_positive(z, out)
    near_one = np.abs(np.log(z)) < 1e-3  # ulps of a tiny log: compare absolutely there
    np.testing.assert_array_max_ulp(out[~near_one], np.log(z[~near_one]), maxulp=3)
    np.testing.assert_allclose(out[near_one], np.log(z[near_one]), rtol=0, atol=2.3e-16)


def test_log_variances_equal_the_direct_formula():
    c = np.r_[np.linspace(0.05, 0.31, 60), [0.5, 1.0, 3.0, 30.0]]
    expected = []
    for value in c:
        z = 1 + value * _BLOM
        expected.append(np.log(z[z > 0]).var(ddof=1))
    np.testing.assert_allclose(log_variances(c, _BLOM), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("minus_inf", [True, False])
def test_count_outside_equals_a_direct_count(dtype, minus_inf):
    rng = np.random.default_rng(3)
    values = rng.normal(size=(50, 40)).astype(dtype)
    values.flat[rng.choice(values.size, 12, replace=False)] = rng.choice(
        [np.nan, np.inf, -np.inf, 1e31, -1e31, 1e29, -1e29], 12
    )
    magnitude_ok = np.abs(values.astype(float)) < 1e30
    allowed = magnitude_ok | (np.isneginf(values) if minus_inf else False)
    assert count_outside(values, 1e30, minus_inf) == int((~allowed).sum())
    assert count_outside(values[:0], 1e30, minus_inf) == 0
