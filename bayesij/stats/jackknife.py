"""The infinitesimal-jackknife bootstrap covariance of posterior means, labelled."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import xarray as xr

from bayesij.array.checks import (
    as_float_array,
    check_flag,
    check_positive_int,
    check_replicates,
    constant_columns,
    fail,
)
from bayesij.array.jackknife import ij_join, ij_part, ij_setup
from bayesij.data.arrays import from_arrays
from bayesij.data.fit import read
from bayesij.data.source import map_blocks
from bayesij.stats.elpd import Summary
from bayesij.stats.influence import scores_dataset
from bayesij.stats.linearity import LinearityResult, linearity

__all__ = ["ij_covariance", "IJCovariance"]


@dataclass(frozen=True)
class IJCovariance(Summary):
    """Infinitesimal-jackknife bootstrap covariance of posterior means, beside the posterior.

    Attributes
    ----------
    covariance : pandas.DataFrame
        Raw IJ covariance ``sum_u (psi_u - psi_bar)(psi_u - psi_bar)^T``, quantity x quantity.
    covariance_corrected : pandas.DataFrame
        ``covariance`` less the estimated contribution of Monte Carlo noise in ``psi``.
    variance, variance_corrected : pandas.Series
        Their diagonals, per quantity.
    mcse : pandas.Series
        Monte Carlo standard error of ``variance`` (block bootstrap over draws).
    posterior_variance : pandas.Series
        Posterior variance of each quantity.
    ratio : pandas.Series
        ``variance_corrected / posterior_variance``: near 1 when the posterior's uncertainty
        agrees with the frequentist sampling variability; far from 1 points to
        misspecification or a posterior that does not concentrate.
    n_units : int
        Number of exchangeable units (observations or groups).
    unit : str
        ``'obs'`` or ``'group'``.
    n_draws, n_chains : int
    linearity : LinearityResult or None
        The linearity diagnostic (``check_linearity=True``): whether the linear
        approximation behind the IJ can be trusted for each quantity.
    influence : xarray.Dataset
        The influence scores ``psi`` and their MCSE (as :func:`bayesij.influence`), from
        the same pass over the draws.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> table = bayesij.ij_covariance(post).table()
    >>> list(table.columns)[:3]  # the posterior sd against the bootstrap's (IJ)
    ['posterior_sd', 'ij_sd', 'posterior_variance']
    """

    covariance: pd.DataFrame
    covariance_corrected: pd.DataFrame
    mcse_covariance: pd.DataFrame
    posterior_covariance: pd.DataFrame
    n_units: int
    unit: str
    n_draws: int
    n_chains: int
    linearity: LinearityResult | None = None
    influence: xr.Dataset | None = None
    constant: tuple = ()

    @property
    def variance(self) -> pd.Series:
        return _diagonal(self.covariance, "ij_variance")

    @property
    def variance_corrected(self) -> pd.Series:
        return _diagonal(self.covariance_corrected, "ij_variance_corrected")

    @property
    def mcse(self) -> pd.Series:
        return _diagonal(self.mcse_covariance, "mcse_ij_variance")

    @property
    def posterior_variance(self) -> pd.Series:
        return _diagonal(self.posterior_covariance, "posterior_variance")

    @property
    def ratio(self) -> pd.Series:
        return (self.variance_corrected / self.posterior_variance).rename("ratio")

    @property
    def draws_needed(self) -> pd.Series:
        """Draws (in all) at which the corrected IJ variance would pass 2 MCSE, per quantity,
        taking the MCSE to fall as ``1 / sqrt(S)`` and the variance to be measured at least
        the larger of the corrected IJ variance and the posterior variance (what a
        well-specified model's IJ variance is): ``S (2 MCSE / V)^2``, at least ``S``."""
        scale = np.maximum(self.variance_corrected, self.posterior_variance)
        with np.errstate(divide="ignore", invalid="ignore"):
            needed = self.n_draws * np.maximum(1.0, (2 * self.mcse / scale) ** 2)
        return np.ceil(needed).rename("draws_needed")

    def table(self) -> pd.DataFrame:
        """One row per quantity: posterior and IJ standard deviations and variances, the
        ``variance_ratio`` (corrected IJ variance / posterior variance, :attr:`ratio`) and
        the ``sd_ratio`` (its square root, IJ sd / posterior sd)."""
        corrected = self.variance_corrected
        table = pd.DataFrame(
            {
                "posterior_sd": np.sqrt(self.posterior_variance),
                "ij_sd": np.sqrt(corrected.where(corrected > 0)).where(
                    ~corrected.index.isin(self.constant), 0.0
                ),
                "posterior_variance": self.posterior_variance,
                "ij_variance": self.variance,
                "ij_variance_corrected": corrected,
                "mcse_ij_variance": self.mcse,
                "variance_ratio": self.ratio,
                "sd_ratio": np.sqrt(self.ratio.where(self.ratio > 0)),
            }
        )
        table.index.name = "quantity"
        return table

    def __str__(self) -> str:
        table = self.table()[
            ["posterior_sd", "ij_sd", "sd_ratio", "ij_variance_corrected", "mcse_ij_variance"]
        ]
        lines = [
            f"IJ bootstrap covariance over {self.n_units} {_plural(self.unit)} "
            f"({self.n_draws} draws, {self.n_chains} chain(s))",
            table.to_string(float_format=lambda v: f"{v:.4g}"),
        ]
        noisy = table.index[~(table["ij_variance_corrected"] > 2 * table["mcse_ij_variance"])]
        noisy = noisy.difference(list(self.constant), sort=False)
        if self.constant:
            lines.append(
                f"{', '.join(map(str, self.constant))}: constant over the draws, so the IJ "
                "variance is 0 (nothing to estimate)."
            )
        needed = self.draws_needed
        for quantity in noisy:
            if needed[quantity] > self.n_draws:
                lines.append(
                    f"Monte Carlo noise dominates the IJ variance of {quantity} (corrected "
                    f"variance below 2 MCSE): undetermined; about {needed[quantity]:.3g} "
                    f"draws (now {self.n_draws}) would measure it."
                )
            else:
                lines.append(
                    f"Monte Carlo noise dominates the IJ variance of {quantity} (corrected "
                    f"variance below 2 MCSE = {2 * self.mcse[quantity]:.3g}), far below its "
                    f"posterior variance {self.posterior_variance[quantity]:.3g}: the data "
                    "barely move it, so the IJ has no sampling variability to measure."
                )
        if self.linearity is not None:
            verdicts = self.linearity.verdict
            for quantity in verdicts.index[verdicts != "reliable"]:
                lines.append(
                    f"Do not trust the IJ for {quantity}: the linear approximation is "
                    f"{verdicts[quantity]} (nonlinearity index "
                    f"{self.linearity.index[quantity]:.2g}); refit without units "
                    f"{self.linearity.refit_first(quantity, 3)} first."
                )
        return "\n".join(lines)


def _diagonal(frame: pd.DataFrame, name: str) -> pd.Series:
    return pd.Series(np.diag(frame.values), index=frame.index, name=name)


def _plural(unit: str) -> str:
    return {"obs": "observations", "group": "groups"}.get(unit, unit)


def ij_covariance(
    data,
    *,
    groups=None,
    quantities=None,
    var_name=None,
    n_blocks: int = 50,
    n_boot: int = 200,
    seed: int = 0,
    check_linearity: bool = False,
) -> IJCovariance:
    """Infinitesimal-jackknife estimate of the bootstrap covariance of posterior means.

    Approximates the covariance of the posterior means over bootstrap resamples of the
    exchangeable units, ``sum_u (psi_u - psi_bar)(psi_u - psi_bar)^T``, from the draws of
    one fit. Monte Carlo noise in ``psi`` inflates it; ``variance_corrected`` removes a
    batch-means estimate of that inflation, and ``mcse`` gives its Monte Carlo standard
    error from a block bootstrap over draws.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree or xarray
        Draws of the quantities and the pointwise log-likelihood.
    groups : array_like of shape (n_obs,) or mapping, optional
        Resample groups rather than observations. Defaults to the container's groups.
    quantities : str or list of str, optional
        Restrict to these quantities.
    var_name : str or list of str, optional
        Log-likelihood variable of an InferenceData or DataTree.
    n_blocks : int, default 50
        Contiguous blocks of draws (within chains) for the noise estimate and the block
        bootstrap.
    n_boot : int, default 200
        Block-bootstrap replicates.
    seed : int, default 0
    check_linearity : bool, default False
        Also run :func:`bayesij.linearity` on the same units and attach its verdicts; the
        result's text then says which quantities' IJ variances should not be trusted.

    Returns
    -------
    IJCovariance

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=100)
    >>> mu = y.mean() + rng.normal(size=(4, 500, 1)) / 10
    >>> result = bayesij.ij_covariance(bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2))
    >>> list(result.table().columns)[:2]
    ['posterior_sd', 'ij_sd']
    """
    check_linearity = check_flag(check_linearity, "check_linearity")
    n_blocks = check_positive_int(n_blocks, "n_blocks", minimum=2)
    n_boot = check_replicates(n_boot, "n_boot", minimum=2)
    fit = read(data, groups=groups, var_name=var_name)
    source = fit.source(
        quantities=quantities,
        need_quantities=True,
        whole_matrix={"check_linearity": check_linearity},
    )
    setup = source_setup(source, n_blocks=n_blocks, n_boot=n_boot, seed=seed)
    draws = source.quantity_draws
    positions = np.arange(source.n_units)
    kernel = partial(ij_part, setup=setup)
    parts = map_blocks(source, kernel, per_unit={"positions": positions}, join=False)
    result = ij_join(parts, setup)
    checked = None
    if check_linearity:
        checked = linearity(fit, quantities=quantities, scores=result.scores)
    names = list(source.quantity_names)
    return ij_result(result, names, source.units, draws, n_blocks, checked)


def integrated_ij(quantities, names: list, marginal_log_lik, n_units: int) -> IJCovariance:
    """The IJ over units whose log-likelihoods integrate their own effects out.

    Over a hierarchy's groups, the IJ of the conditional group terms (each group keeps its
    one effect) approximates reweighting the groups; over the groups' *integrated* terms
    ``log p(y_g | theta) = log E_{a_g} p(y_g | theta, a_g)`` it approximates the bootstrap
    that draws new groups (the cluster bootstrap, :func:`bayesij.refit.cluster_bootstrap`),
    as Merkle, Furr & Rabe-Hesketh (2019) distinguish "a new observation of the same group"
    from "a new group".

    Parameters
    ----------
    quantities : ndarray of shape (n_chains, n_draws, Q)
        Draws of the global quantities.
    names : list of str
        Their names (Q).
    marginal_log_lik : array_like of shape (n_chains, n_draws, n_units)
        The units' integrated log-likelihoods at each draw
        (:func:`bayesij.array.hierarchy.normal_group_log_lik`, or
        :func:`~bayesij.array.hierarchy.intercept_group_log_lik` for any likelihood).
    n_units : int

    Returns
    -------
    IJCovariance

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.
    .. [2] Merkle, E. C., Furr, D. and Rabe-Hesketh, S. (2019). Bayesian comparison of
       latent variable models: conditional versus marginal likelihoods. Psychometrika 84.
    """
    return ij_covariance(integrated_posterior(quantities, names, marginal_log_lik, n_units))


def integrated_posterior(quantities, names: list, marginal_log_lik, n_units: int, units=None):
    """The global quantities' draws beside the units' integrated log-likelihoods, checked:
    a Posterior whose "observations" are the units (named ``units``), for
    :func:`integrated_ij` and leave-one-group-out PSIS over the integrated terms (the same
    elpd as over the conditional ones, ``log p(y_g | y_-g)``, with the group's own effect
    drawn from its population instead of reweighted: Merkle, Furr & Rabe-Hesketh 2019)."""
    values = as_float_array(marginal_log_lik, "marginal_log_lik")
    expected = (*np.shape(quantities)[:2], n_units)
    if values.shape != expected:
        raise fail(
            "marginal_log_lik",
            f"shape {values.shape}",
            f"one value per draw and unit, {expected}",
        )
    if not np.isfinite(values).all():
        raise fail("marginal_log_lik", "a value that is not finite", "finite values")
    return from_arrays(np.asarray(quantities), values, quantity_names=list(names), obs_names=units)


def source_setup(source, *, n_blocks: int = 50, n_boot: int = 200, seed: int = 0):
    """The IJ's shared setup (:func:`bayesij.array.jackknife.ij_setup`) of a source's
    quantity draws and chains, after :func:`check_units`."""
    check_units(source)
    chains = np.repeat(np.arange(source.n_chains), source.shape[1])
    draws = source.quantity_draws.reshape(source.n_draws, -1)
    return ij_setup(draws, chains, n_blocks=n_blocks, n_boot=n_boot, seed=seed)


def check_units(source) -> None:
    """Refuse a source with fewer than 2 units: the IJ variance is a bootstrap's over them."""
    if source.n_units < 2:
        raise fail(
            "groups" if source.units.dims[0] == "group" else "log_lik",
            f"{source.n_units} {source.units.dims[0]}",
            "at least 2 units: the IJ variance is that of a bootstrap over units",
        )


def ij_result(result, names, units, draws, n_blocks, checked=None) -> IJCovariance:
    """The labelled result from the arrays: covariances by quantity, the unit's name, the
    constant quantities of ``draws`` (n_chains, n_draws, K) and the influence scores."""
    index = pd.Index(names, name="quantity")

    def frame(values):
        return pd.DataFrame(values, index=index, columns=index)

    n_chains, n_draws = draws.shape[0], draws.shape[0] * draws.shape[1]
    return IJCovariance(
        covariance=frame(result.covariance),
        covariance_corrected=frame(result.covariance_corrected),
        mcse_covariance=frame(result.mcse),
        posterior_covariance=frame(result.posterior_covariance),
        n_units=result.n_obs,
        unit=units.dims[0],
        n_draws=n_draws,
        n_chains=n_chains,
        constant=tuple(np.asarray(names)[constant_columns(draws)]),
        linearity=checked,
        influence=scores_dataset(result.scores, names, units, n_chains, n_draws, n_blocks),
    )
