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

__all__ = ["PitEcdf", "pit_ecdf"]


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
    values = as_float_array(pit, "pit").reshape(-1)
    if values.size < 2 or np.any(~np.isfinite(values) | (values < 0) | (values > 1)):
        raise fail(
            "pit",
            f"{values.size} value(s), some outside [0, 1]"
            if values.size >= 2
            else f"{values.size} value(s)",
            "at least 2 values in [0, 1]",
        )
    prob = check_real(prob, "prob", 0.0, 1.0, low_open=True, high_open=True)
    n_simulations = check_replicates(n_simulations, "n_simulations")
    rng = np.random.default_rng(check_seed(seed))
    band = simultaneous_band(values.size, prob, n_simulations, rng)
    ecdf = np.searchsorted(np.sort(values), band.grid, side="right") / values.size
    observed = uniformity_gamma(values[None], band.grid[1:-1])[0]
    p_value = float(np.mean(band.gammas >= observed))
    return PitEcdf(band.grid, ecdf, band.lower, band.upper, prob, band.pointwise_prob, p_value)
