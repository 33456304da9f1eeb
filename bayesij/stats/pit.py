"""The ECDF of PIT values with simultaneous confidence bands and a test of uniformity."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesij.array.checks import (
    as_float_array,
    check_real,
    check_replicates,
    check_seed,
    fail,
)
from bayesij.array.ecdf_bands import simultaneous_band, uniformity_gamma
from bayesij.array.uniformity import (
    UNIFORMITY_METHODS,
    cauchy_combination,
    chain_rank_p_values,
    pointwise_p_values,
    shapley_of_mean,
)

__all__ = [
    "PitEcdf",
    "pit_ecdf",
    "PitDensity",
    "pit_density",
    "UniformityTest",
    "uniformity_test",
    "ChainUniformityTest",
    "mchain_uniformity_test",
]


class PitEcdf(NamedTuple):
    """ECDF of PIT values against the uniform, with its simultaneous band.

    Attributes
    ----------
    grid : ndarray of shape (n + 1,)
        0, 1/n, ..., 1.
    ecdf : ndarray of shape (n + 1,)
        The ECDF of the values at ``grid``.
    lower, upper : ndarray of shape (n + 1,)
        The simultaneous ``prob`` band of the ECDF of ``n`` uniform values.
    prob : float
    pointwise_prob : float
        The pointwise level of that band.
    p_value : float
        Of the test of uniformity: the share of simulated uniform samples whose ECDF
        strays at least as far (in the band's binomial metric) as these values'.
    """

    grid: np.ndarray
    ecdf: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    prob: float
    pointwise_prob: float
    p_value: float

    @property
    def outside(self) -> bool:
        """Whether the ECDF leaves the band somewhere (uniformity rejected at 1 - prob)."""
        return bool(np.any((self.ecdf < self.lower) | (self.ecdf > self.upper)))


def pit_ecdf(pit, *, prob: float = 0.95, n_simulations: int = 1000, seed: int = 214) -> PitEcdf:
    """The ECDF of PIT values (e.g. :func:`bayesij.loo_pit`) with simultaneous confidence
    bands and a graphical test of uniformity (Säilynoja, Bürkner & Vehtari 2022), as
    arviz-plots' ``plot_loo_pit`` and bayesplot's ``ppc_loo_pit_ecdf`` draw.

    Parameters
    ----------
    pit : array_like, shape (n,)
        Values in [0, 1] that are uniform under a calibrated model.
    prob : float, default 0.95
        Simultaneous coverage of the band.
    n_simulations : int, default 1000
        Simulated uniform samples that calibrate the band and the test.
    seed : int, default 214
        Seed of the simulation (arviz-stats' default).

    Returns
    -------
    PitEcdf

    Notes
    -----
    arviz-stats 1.3 (with SciPy >= 1.17) drops a simulated sample's upper-tail term when its
    ECDF is 0 at the first evaluation point (``bdtr(-1, ...)`` is NaN there), which narrows
    its band slightly for larger ``n``; here that term is ``P(count >= 0) = 1``, as the
    method defines it.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> pit = np.random.default_rng(0).uniform(size=200)  # LOO-PIT values of a calibrated model
    >>> result = bayesij.pit_ecdf(pit, n_simulations=200)
    >>> bool(result.p_value > 0.05)
    True

    References
    ----------
    .. [1] Säilynoja, T., Bürkner, P.-C. and Vehtari, A. (2022). Graphical test for
       discrete uniformity and its applications in goodness-of-fit evaluation and multiple
       sample comparison. Statistics and Computing 32, 32.
    """
    values = _checked_pit(pit)
    prob = check_real(prob, "prob", 0.0, 1.0, low_open=True, high_open=True)
    n_simulations = check_replicates(n_simulations, "n_simulations")
    rng = np.random.default_rng(check_seed(seed))
    band = simultaneous_band(values.size, prob, n_simulations, rng)
    ecdf = np.searchsorted(np.sort(values), band.grid, side="right") / values.size
    observed = uniformity_gamma(values[None], band.grid[1:-1])[0]
    p_value = float(np.mean(band.gammas >= observed))
    return PitEcdf(band.grid, ecdf, band.lower, band.upper, prob, band.pointwise_prob, p_value)


def _checked_pit(pit) -> np.ndarray:
    """``pit`` as a flat float array of at least 2 values in [0, 1]."""
    values = as_float_array(pit, "pit").reshape(-1)
    if values.size < 2 or np.any(~np.isfinite(values) | (values < 0) | (values > 1)):
        raise fail(
            "pit",
            f"{values.size} value(s), some outside [0, 1]"
            if values.size >= 2
            else f"{values.size} value(s)",
            "at least 2 values in [0, 1]",
        )
    return values


class PitDensity(NamedTuple):
    """Density of PIT values beside the densities of uniform samples of the same size.

    Attributes
    ----------
    grid : ndarray of shape (points,)
        Evaluation points, the centres of ``points`` equal bins of [0, 1].
    density : ndarray of shape (points,)
        The PIT values' density (a Gaussian kernel reflected at 0 and 1).
    uniform : ndarray of shape (n_uniform, points)
        The same estimate for ``n_uniform`` samples of as many uniform values.
    bandwidth : float
        The kernel's standard deviation, one for all (the PIT values' Silverman's rule).
    """

    grid: np.ndarray
    density: np.ndarray
    uniform: np.ndarray
    bandwidth: float


def pit_density(pit, *, n_uniform: int = 100, points: int = 512, seed: int = 214) -> PitDensity:
    """The density of PIT values beside those of uniform samples of the same size: the
    overlay that bayesplot's ``ppc_loo_pit_overlay`` and ArviZ 0.x's ``plot_loo_pit``
    draw. Where the PIT density leaves the uniform samples' spread the predictive
    distributions are miscalibrated: a hump in the middle, too wide; a U, too narrow.

    Parameters
    ----------
    pit : array_like, shape (n,)
        Values in [0, 1] (e.g. :func:`bayesij.loo_pit`).
    n_uniform : int, default 100
        Uniform samples drawn for comparison.
    points : int, default 512
        Bins of [0, 1] the densities are estimated on (values binned to their bin
        centre, so the estimate's cost does not grow with ``n``).
    seed : int, default 214

    Returns
    -------
    PitDensity

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> pit = np.random.default_rng(0).uniform(size=500)
    >>> result = bayesij.pit_density(pit)
    >>> result.uniform.shape, bool(abs(result.density.mean() - 1) < 1e-9)
    ((100, 512), True)

    References
    ----------
    .. [1] Gabry, J., Simpson, D., Vehtari, A., Betancourt, M. and Gelman, A. (2019).
       Visualization in Bayesian workflow. JRSS A 182(2), 389-402 (the LOO-PIT overlay).
    """
    values = _checked_pit(pit)
    n_uniform = check_replicates(n_uniform, "n_uniform")
    points = check_replicates(points, "points")
    rng = np.random.default_rng(check_seed(seed))
    spread = min(values.std(ddof=1), np.subtract(*np.percentile(values, [75, 25])) / 1.34)
    bandwidth = float(0.9 * (spread if spread > 0 else values.std(ddof=1) or 1.0))
    bandwidth *= values.size**-0.2
    # One uniform sample at a time, binned as it is drawn (the same stream as drawing them
    # all at once): memory stays one sample, not n_uniform of them (937 MiB at n = 400,000).
    counts = np.vstack(
        [_bin_counts(values, points)]
        + [_bin_counts(rng.uniform(size=values.size), points) for _ in range(n_uniform)]
    )
    densities = _reflected_densities(counts, points, bandwidth)
    grid = (np.arange(points) + 0.5) / points
    return PitDensity(grid, densities[0], densities[1:], bandwidth)


def _bin_counts(sample: np.ndarray, points: int) -> np.ndarray:
    """Counts of a sample of [0, 1] in ``points`` equal bins (points,)."""
    bins = np.minimum((sample * points).astype(int), points - 1)
    return np.bincount(bins, minlength=points).astype(float)


def _reflected_densities(counts: np.ndarray, points: int, bandwidth: float) -> np.ndarray:
    """Gaussian kernel densities on [0, 1] of each row of bin ``counts`` (n_rows,
    points), reflected at both ends: mirrored beyond 0 and 1, smoothed by the kernel
    sampled at the bin width; each integrates to 1 over [0, 1]. Shape (n_rows, points)."""
    width = 1.0 / points
    padded = np.hstack([counts[:, ::-1], counts, counts[:, ::-1]])
    reach = min(int(np.ceil(4 * bandwidth / width)), points)
    offsets = np.arange(-reach, reach + 1) * width
    kernel = np.exp(-0.5 * (offsets / bandwidth) ** 2)
    kernel /= kernel.sum()
    smoothed = np.array([np.convolve(row, kernel, mode="same") for row in padded])
    middle = smoothed[:, points : 2 * points]
    return middle / (middle.sum(axis=1, keepdims=True) * width)


class UniformityTest(NamedTuple):
    """A pointwise test of uniformity with the Cauchy combination.

    Attributes
    ----------
    p_value : float
        Of the combined test: small when the values are not uniform.
    method : str
    p_values : ndarray of shape (n,)
        Each value's pointwise p-value, in the input's order.
    shapley : ndarray of shape (n,)
        Each value's Shapley contribution to the combined statistic (the mean of the
        Cauchy variables), in the input's order: the values with the largest drive a
        small p-value.
    """

    p_value: float
    method: str
    p_values: np.ndarray
    shapley: np.ndarray


def uniformity_test(pit, *, method: str = "pot_c") -> UniformityTest:
    """Test of uniformity of PIT values that stays valid when they are dependent (as LOO-PIT
    values are, each computed from the same posterior): pointwise tests combined by the
    Cauchy combination, with each value's Shapley contribution (arviz-stats'
    ``uniformity_test``; Tesso & Vehtari 2026).

    Parameters
    ----------
    pit : array_like
        Values in [0, 1] (e.g. :func:`bayesij.loo_pit`), flattened; a value that is not
        finite is refused, not dropped.
    method : {"pot_c", "prit_c", "piet_c"}, default "pot_c"
        The pointwise tests: "pot_c" each order statistic against its Beta law (sensitive
        to shifts and to too wide or too narrow predictive distributions), "prit_c" each
        value's rank count against its binomial law, "piet_c" each value against the
        uniform. The first two combine truncated (p-values of 0.5 or more count as 0).

    Returns
    -------
    UniformityTest

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> bool(bayesij.uniformity_test(rng.uniform(size=200)).p_value > 0.05)
    True
    >>> too_narrow = rng.beta(0.6, 0.6, size=200)  # a U: predictive intervals too narrow
    >>> bool(bayesij.uniformity_test(too_narrow).p_value < 0.05)
    True

    References
    ----------
    .. [1] Tesso, T. and Vehtari, A. (2026). Pointwise tests of uniformity for dependent
       PIT values with the Cauchy combination. arXiv:2603.02928.
    .. [2] Liu, Y. and Xie, J. (2020). Cauchy combination test: a powerful test with
       analytic p-value calculation under arbitrary dependency structures. JASA 115(529),
       393-402.
    """
    values = _unit_interval(pit, "pit")
    if method not in UNIFORMITY_METHODS:
        raise fail("method", repr(method), f"one of {UNIFORMITY_METHODS}")
    order = np.argsort(values, kind="stable")
    p_sorted = pointwise_p_values(values[order], method)
    p_value, cauchy = cauchy_combination(p_sorted, truncate=method != "piet_c")
    shapley, p_values = np.empty(values.size), np.empty(values.size)
    shapley[order], p_values[order] = shapley_of_mean(cauchy), p_sorted
    return UniformityTest(p_value, method, p_values, shapley)


class ChainUniformityTest(NamedTuple):
    """A test that chains' draws are exchangeable (the same rank distribution).

    Attributes
    ----------
    p_value : float
    between : ndarray of shape (n_draws, n_chains)
        Each chain's Shapley contribution at each point ``j / (n_draws + 1)`` of the rank
        scale.
    within : ndarray of shape (n_draws,)
        Each point's Shapley contribution to the combined statistic.
    """

    p_value: float
    between: np.ndarray
    within: np.ndarray


def mchain_uniformity_test(ranks) -> ChainUniformityTest:
    """Test that several chains sample the same distribution, from the fractional ranks of
    their pooled draws: at each point ``z`` of the rank scale, each chain's count of ranks
    below ``z`` is tested against its hypergeometric law (mid-p), the chains' tests are
    Cauchy-combined into one p-value per point, and the points' into one
    (arviz-stats' ``mchain_uniformity_test``; Tesso & Vehtari 2026).

    Parameters
    ----------
    ranks : array_like of shape (n_chains, n_draws)
        Fractional ranks in [0, 1] of the pooled draws of one quantity, by chain (e.g.
        ``scipy.stats.rankdata(draws, axis=None).reshape(draws.shape) / draws.size``);
        at least 2 chains.

    Returns
    -------
    ChainUniformityTest

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from scipy.stats import rankdata
    >>> rng = np.random.default_rng(0)
    >>> mixed = rng.normal(size=(4, 300))
    >>> stuck = mixed + np.array([[0.0], [0.0], [0.0], [0.8]])  # one chain elsewhere
    >>> ranks = lambda d: rankdata(d, axis=None).reshape(d.shape) / d.size
    >>> bool(bayesij.mchain_uniformity_test(ranks(mixed)).p_value > 0.05)
    True
    >>> bool(bayesij.mchain_uniformity_test(ranks(stuck)).p_value < 0.01)
    True

    References
    ----------
    .. [1] Tesso, T. and Vehtari, A. (2026). Pointwise tests of uniformity for dependent
       PIT values with the Cauchy combination. arXiv:2603.02928.
    """
    values = _unit_interval(ranks, "ranks", flatten=False)
    if values.ndim != 2 or values.shape[0] < 2 or values.shape[1] < 1:
        raise fail("ranks", f"shape {values.shape}", "(n_chains, n_draws) with at least 2 chains")
    p_values = chain_rank_p_values(values)
    cauchy = np.tan((0.5 - p_values) * np.pi)
    point_p = 0.5 - np.arctan(cauchy.mean(axis=1)) / np.pi
    p_value, point_cauchy = cauchy_combination(point_p, truncate=False)
    between = np.apply_along_axis(shapley_of_mean, 1, cauchy)
    return ChainUniformityTest(p_value, between, shapley_of_mean(point_cauchy))


def _unit_interval(values, argument: str, flatten: bool = True) -> np.ndarray:
    array = as_float_array(values, argument)
    array = array.reshape(-1) if flatten else array
    if array.size == 0 or np.any(~np.isfinite(array) | (array < 0) | (array > 1)):
        bad = "no values" if array.size == 0 else "values outside [0, 1] or not finite"
        raise fail(argument, bad, "values in [0, 1] (PIT values or fractional ranks)")
    return array
