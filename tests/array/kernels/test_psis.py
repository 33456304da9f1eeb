"""The compiled PSIS-LOO kernel against the general NumPy path (elpd, lppd, k-hat, MCSE,
ESS), its partial sort against a full sort, and the generalized Pareto fit of both against
a direct transcription of Zhang & Stephens (2009) with the weakly informative prior of
Vehtari et al. (2024) (R loo's ``gpdfit``), written here with plain loops."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesij.array.kernels.psis import _largest_sorted, fused_psis_loo, psis_weight_rows
from bayesij.array.loo import _psis_elpd, loo_pointwise, mcse_elpd
from bayesij.array.psis import gpd_fit, psis_chunk, tail_length


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


@pytest.mark.parametrize("make", [_normal_rows, _heavy_rows])
def test_fused_expectations_are_the_general_paths_weighted_means(make):
    """The leave-one-out means of quantities from the kernel's own smoothed weights (the
    linearity check's importance-sampling changes) equal the means under the general
    path's normalised log-weights; a tail with tied values (repeated draws) too, its tied
    draws taking their places in draw order under "above" and "position", and is left to
    the general path under "quicksort" (NumPy's unstable sort decides there)."""
    rows = make(3, n_rows=200)
    draws = np.random.default_rng(9).normal(size=(3, rows.shape[1])) + rows[:3]
    tails = tail_length(rows.shape[1], np.ones(len(rows)))
    fused = fused_psis_loo(rows, tails, draws)
    weights = np.empty(rows.shape)
    scratch = tuple(np.empty(rows.shape) for _ in range(3))
    _psis_elpd(rows, rows.min(axis=1), tails, np.ones(len(rows)), True, "above", scratch, weights)
    expected = draws @ np.exp(weights).T  # (3, rows)
    ok = fused.expected
    assert ok.sum() >= 50 and np.array_equal(ok, fused.done)  # continuous draws: no ties
    np.testing.assert_allclose(fused.expectations[ok].T, expected[:, ok], rtol=1e-12, atol=1e-13)
    tied = rows[:2].copy()
    order = np.argsort(tied[0])  # ascending log-likelihood: descending ratios
    tied[0, order[1]] = tied[0, order[0]]  # the two largest ratios
    tied[0, order[5:9]] = tied[0, order[4]]  # five repeats inside the tail
    for rule in ("above", "position"):
        again = fused_psis_loo(tied, tails[:2], draws, rule)
        assert again.done.all() and again.expected.all()
        weights = np.empty(tied.shape)
        _psis_elpd(tied, tied.min(axis=1), tails[:2], np.ones(2), True, rule, scratch, weights)
        np.testing.assert_allclose(
            again.expectations.T, draws @ np.exp(weights).T, rtol=1e-12, atol=1e-13
        )
    again = fused_psis_loo(tied, tails[:2], draws, "quicksort")
    assert again.done[0] and not again.expected[0] and again.expected[1]


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


def _zhang_stephens(x: np.ndarray) -> tuple[float, float]:
    """k and sigma of sorted exceedances ``x``, term by term as the paper writes them."""
    n = x.size
    m = 30 + int(np.floor(np.sqrt(n)))
    quartile = x[int(np.floor(n / 4 + 0.5)) - 1]
    theta = [1 / x[-1] + (1 - np.sqrt(m / (j - 0.5))) / 3 / quartile for j in range(1, m + 1)]
    profile = []
    for t in theta:
        k = np.mean([np.log1p(-t * xi) for xi in x])
        profile.append(n * (np.log(-t / k) - k - 1))
    weights = np.exp(np.array(profile) - logsumexp(profile))
    theta_hat = float(np.sum(np.array(theta) * weights))
    k = float(np.mean(np.log1p(-theta_hat * x)))
    sigma = -k / theta_hat
    return (k * n + 0.5 * 10) / (n + 10), sigma


@pytest.mark.parametrize("shape", [0.1, 0.5, 0.9])
def test_the_pareto_fit_equals_zhang_and_stephens(shape):
    rng = np.random.default_rng(7)
    tails = []
    for n in (20, 61, 200):
        u = rng.uniform(size=n)
        tails.append(np.sort(1.3 * (u**-shape - 1) / shape))  # GPD(k = shape, sigma = 1.3)
    for x in tails:
        expected_k, expected_sigma = _zhang_stephens(x)
        fit = gpd_fit(x[:, None], np.array([x.size]))
        assert fit.k[0] == pytest.approx(expected_k, rel=1e-11)
        assert fit.sigma[0] == pytest.approx(expected_sigma, rel=1e-11)


def test_the_kernels_k_hat_equals_the_reference_fit():
    rows = _heavy_rows(3, n_rows=40)
    tails = tail_length(rows.shape[1], np.ones(len(rows)))
    fused = fused_psis_loo(rows, tails)
    for r in np.flatnonzero(fused.done)[:10]:
        w = np.exp(rows[r].min() - rows[r])  # the raw ratios, as the kernel forms them
        top = np.sort(w)[-(tails[r] + 1) :]
        k, _ = _zhang_stephens(top[1:] - top[0])
        assert fused.pareto_k[r] == pytest.approx(k, rel=1e-9)


def _repeating_rows(seed, n_rows=200, n_draws=2000):
    """Heavy-tailed rows whose draws repeat as a Metropolis chain's (about 1 in 3 repeated)."""
    rows = _heavy_rows(seed, n_rows, n_draws)
    repeat = np.random.default_rng(seed).uniform(size=n_draws) < 0.35
    repeat[0] = False
    source = np.maximum.accumulate(np.where(repeat, 0, np.arange(n_draws)))
    return np.ascontiguousarray(rows[:, source])


@pytest.mark.parametrize("ties", ["above", "position", "quicksort"])
@pytest.mark.parametrize("make", [_normal_rows, _heavy_rows, _repeating_rows])
def test_the_compiled_weights_are_the_general_paths(make, ties):
    """Normalised weights and k-hat as :func:`psis_chunk` smooths ``-rows.T``, repeated
    draws taking the tail's places in draw order; the rows whose tie order NumPy's sort
    decides (or whose cutoff is tied, under "position") are left to it."""
    rows = make(3)
    tails = tail_length(rows.shape[1], np.full(len(rows), 0.7))
    weights, k, done = psis_weight_rows(rows, tails, ties)
    with np.errstate(all="ignore"):
        smoothed = psis_chunk(-rows.T, tails, ties)
    expected = np.exp(smoothed.log_weights - logsumexp(smoothed.log_weights, axis=0)).T
    np.testing.assert_allclose(weights[done], expected[done], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(k[done], smoothed.pareto_k[done], rtol=1e-12)
    in_range = rows.max(axis=1) - rows.min(axis=1) <= 700  # ratios within the float range
    assert in_range.mean() > 0.4
    tail_tied = [
        np.unique(r[np.argsort(r)[: t + 1]]).size <= t for r, t in zip(rows, tails, strict=True)
    ]
    if make is not _repeating_rows or ties == "above":
        np.testing.assert_array_equal(done, in_range)
    elif ties == "position":  # a cutoff tied with the tail is left
        assert 0.5 < done[in_range].mean() < 0.95
    else:
        np.testing.assert_array_equal(done, in_range & ~np.array(tail_tied))


def test_fused_does_rows_whose_cutoff_repeats_under_the_above_rule():
    """Draws that repeat as a Metropolis chain's: under "above" the draws tied with the
    cutoff stay out of the tail (done here, equal to the general path); under "position"
    such rows are left to it."""
    rows = _repeating_rows(4)
    r_eff = np.full(len(rows), 0.7)
    tails = tail_length(rows.shape[1], r_eff)
    in_range = rows.max(axis=1) - rows.min(axis=1) <= 700
    cutoff_tied = np.array(
        [np.sort(-r)[-t - 1] == np.sort(-r)[-t] for r, t in zip(rows, tails, strict=True)]
    )
    assert cutoff_tied[in_range].mean() > 0.1
    above = fused_psis_loo(rows, tails, ties="above")
    position = fused_psis_loo(rows, tails, ties="position")
    assert not (position.done & cutoff_tied).any()
    assert (above.done <= in_range).all() and (above.done >= position.done).all()
    assert above.done[in_range & cutoff_tied].mean() > 0.7  # left: k-hat far above 1
    lppd, elpd, k, mcse, ess = _general(rows, tails, r_eff)
    done = above.done
    np.testing.assert_allclose(above.elpd[done], elpd[done], rtol=0, atol=1e-12)
    np.testing.assert_allclose(above.pareto_k[done], k[done], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r_eff[done] / above.sum_w2[done], ess[done], rtol=1e-12)
    np.testing.assert_allclose(mcse_elpd(above.relative_error[done], r_eff[done]), mcse[done])
