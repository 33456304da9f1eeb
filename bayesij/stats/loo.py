"""Approximate leave-one-out cross-validation, labelled: loo, LOO expectations, LOO-PIT."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from typing import ClassVar, NamedTuple

import numpy as np
import pandas as pd

from bayesij.array import loo as loo_arrays
from bayesij.array.checks import (
    as_draws_matrix,
    as_float_array,
    check_finite,
    check_flag,
    check_seed,
    checked_r_eff,
    fail,
)
from bayesij.array.ess import log_lik_relative_eff
from bayesij.array.loo_expectation import KINDS, loo_column_weights, loo_expectations
from bayesij.array.numeric import (
    elpd_standard_error,
    logsumexp_columns,
    obs_chunks,
)
from bayesij.array.pareto_pit import pareto_pit_columns
from bayesij.array.psis import (
    pareto_k_threshold,
    psis_chunk,
    tail_length,
)
from bayesij.array.scores import checked_censoring
from bayesij.data.arrays import from_arrays
from bayesij.data.convert import unit_index
from bayesij.data.fit import as_log_lik_source, observed_or_fit, predictions_or_fit
from bayesij.data.source import map_blocks, unit_members
from bayesij.stats.elpd import ElpdResult
from bayesij.stats.peers import CONVENTIONS, psis_options, psis_rules, psis_settings

__all__ = [
    "loo",
    "loo_i",
    "loo_methods",
    "LooResult",
    "loo_expectation",
    "loo_pit",
    "saved_log_weights",
]

#: Fewer draws than this and LOO estimates are too noisy to trust (a warning says so).
MIN_DRAWS = 100


@dataclass(frozen=True)
class LooResult(ElpdResult):
    """Approximate leave-one-out cross-validation: estimates, pointwise values, diagnostics.

    Attributes
    ----------
    pointwise : pandas.DataFrame
        One row per unit: ``elpd_loo``, ``p_loo``, ``pareto_k``, ``mcse_elpd_loo``,
        ``ess`` (PSIS effective sample size), ``r_eff``, ``lppd``.
    method : str
        ``"psis"``, ``"is"``, ``"ij"`` or ``"cumulant"``.
    n_draws : int
    tail_rule : str
    ddof : int
        SE convention: 0 as ArviZ (``sqrt(N var_n)``), 1 as R loo (``sqrt(N) sd_n``).
    log_weights : ndarray of shape (n_draws, n_units) or None
        Normalised smoothed importance log-weights, kept only with ``save_psis=True`` (as
        R loo's ``save_psis``); :func:`loo_expectation`, :func:`loo_pit` and
        :func:`bayesij.linearity` reuse them through their ``psis=`` argument.
        Otherwise the result holds no draws x units array.
    constant : ndarray of bool, shape (n_units,), optional
        Units whose log-likelihood is the same at every draw. Their k-hat is inf (no Pareto
        fit, as R loo and ArviZ report it), yet their LOO estimate is exact: leaving such a
        unit out multiplies every draw's weight by the same number, so the posterior, and
        ``elpd_loo`` = that log-likelihood, are unchanged. :meth:`unreliable_ids` leaves
        them out.
    grouping : str, optional
        Set when these are per-observation values of a fit whose structure names a
        grouping (as ``az.loo``): the grouping and how to ask for it (``groups=``).
    integrated : str, optional
        Set by :func:`~bayesij.loo_integrated`: the group-effect variable integrated out of each
        group's term (the pointwise table then adds ``pareto_k_conditional``).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> log_lik = np.random.default_rng(0).normal(-1.0, 0.1, size=(4, 500, 20))
    >>> result = bayesij.loo(log_lik)
    >>> result.n_units, list(result.estimates().index)
    (20, ['elpd_loo', 'p_loo', 'looic'])
    >>> list(result.pointwise.columns)[:3]
    ['elpd_loo', 'p_loo', 'pareto_k']
    """

    pointwise: pd.DataFrame
    method: str
    n_draws: int
    tail_rule: str
    ddof: int
    log_weights: np.ndarray | None = field(default=None, repr=False, compare=False)
    constant: np.ndarray | None = field(default=None, repr=False, compare=False)
    grouping: str | None = field(default=None, repr=False, compare=False)
    members: pd.Series | None = field(default=None, repr=False, compare=False)
    integrated: str | None = field(default=None, repr=False, compare=False)

    criterion: ClassVar[str] = "loo"
    elpd_column: ClassVar[str] = "elpd_loo"
    p_column: ClassVar[str | None] = "p_loo"
    in_arviz: ClassVar[bool] = True

    @property
    def elpd(self) -> float:
        return float(self.pointwise["elpd_loo"].sum())

    @property
    def se(self) -> float:
        return elpd_standard_error(self.pointwise["elpd_loo"].to_numpy(), self.ddof)

    @property
    def p_loo(self) -> float:
        return float(self.pointwise["p_loo"].sum())

    @property
    def looic(self) -> float:
        return -2 * self.elpd

    @property
    def mcse(self) -> float:
        """Monte Carlo SE of the total elpd, ``sqrt(sum_n mcse_n^2)``."""
        return float(np.sqrt((self.pointwise["mcse_elpd_loo"] ** 2).sum()))

    @property
    def k_threshold(self) -> float:
        """``min(1 - 1/log10(S), 0.7)``: above it the PSIS estimate is unreliable."""
        return pareto_k_threshold(self.n_draws)

    def bad_k_ids(self, threshold: float | None = None) -> list:
        """Units whose k-hat exceeds ``threshold`` (default: the sample-size threshold)."""
        limit = self.k_threshold if threshold is None else threshold
        return self.pointwise.index[self.pointwise["pareto_k"] > limit].tolist()

    def exact_ids(self) -> list:
        """Units whose log-likelihood is constant over the draws: k-hat inf, LOO exact."""
        if self.constant is None:
            return []
        return self.pointwise.index[np.asarray(self.constant, dtype=bool)].tolist()

    def unreliable_ids(self) -> list:
        """Units whose PSIS estimate is unreliable: k-hat above the threshold, except those
        whose estimate is exact (:meth:`exact_ids`). These are the ones to refit."""
        exact = set(self.exact_ids())
        return [i for i in self.bad_k_ids() if i not in exact]

    def pareto_k_table(self) -> pd.DataFrame:
        """Counts of k-hat in (-inf, threshold], (threshold, 1], (1, inf) and their min ESS."""
        k = self.pointwise["pareto_k"].to_numpy()
        ess = self.pointwise["ess"].to_numpy()
        good = self.k_threshold
        bins = [
            (-np.inf, good, f"(-Inf, {good:.2g}]", "good"),
            (good, 1.0, f"({good:.2g}, 1]", "bad"),
            (1.0, np.inf, "(1, Inf)", "very bad"),
        ]
        rows = []
        for low, high, label, word in bins:
            inside = (k > low) & (k <= high)
            rows.append(
                {
                    "interval": label,
                    "label": word,
                    "count": int(inside.sum()),
                    "proportion": inside.mean(),
                    "min_ess": np.min(ess[inside]) if inside.any() else np.nan,
                }
            )
        return pd.DataFrame(rows).set_index("interval")

    def _title(self) -> str:
        title = {
            "psis": "PSIS-LOO",
            "is": "IS-LOO",
            "ij": "IJ-LOO",
            "cumulant": "cumulant LOO",
            "psis-approximate": "PSIS-LOO of an approximate posterior",
            "mixture": "mixture IS-LOO",
        }
        return (
            f"Computed from {self.n_draws} by {self.n_units} log-likelihood matrix "
            f"({title[self.method]}, SE with ddof={self.ddof})"
        )

    def _details(self) -> list[str]:
        lines = []
        if self.method in ("psis", "is", "psis-approximate", "mixture"):
            lines += ["------", f"Monte Carlo SE of elpd_loo is {self.mcse:.1f}."]
        table = self.pareto_k_table()
        table["proportion"] = (100 * table["proportion"]).map(lambda v: f"{v:.1f}%")
        lines += ["", "Pareto k diagnostic values:", table.to_string()]
        bad = self.bad_k_ids()
        if bad:
            lines.append(
                f"{len(bad)} unit(s) above k-hat {self.k_threshold:.2g}: "
                f"{bad[:10]}{' ...' if len(bad) > 10 else ''}"
            )
        if self.integrated is not None:
            before = int((self.pointwise["pareto_k_conditional"] > self.k_threshold).sum())
            lines.append(
                f"Each unit's {self.integrated} integrated out (the model's density); over "
                f"the conditional terms {before} unit(s) were above k-hat {self.k_threshold:.2g}."
            )
        return lines


def loo(
    data,
    *,
    groups=None,
    var_name=None,
    method: str = "psis",
    convention=None,
    save_psis: bool = False,
    log_jacobian=None,
    client=None,
) -> LooResult:
    """Approximate leave-one-out cross-validation from posterior draws.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        The pointwise log-likelihood: a container, an ``InferenceData`` or ``DataTree``
        (its ``log_likelihood`` group), or an array of shape (n_draws, n_obs) (one chain)
        or (n_chains, n_draws, n_obs).
    method : {"psis", "is", "tis", "ij", "cumulant"}, default "psis"
        Pareto-smoothed importance sampling; plain importance sampling (harmonic mean);
        truncated importance sampling (the ratios cut at their mean times ``sqrt(S)``,
        Ionides 2008; R loo's ``is_method = "tis"``, equal to it to 1e-9); first-order
        infinitesimal jackknife ``log(E[p_n] - Cov(p_n, l_n))``; or the cumulant expansion
        ``k1 - k2/2 + k3/6 - k4/24``. All report PSIS k-hat (R loo reports 0 for TIS).
    convention : str or PsisOptions, optional
        How to smooth and report, set together: a peer's name ("bayesij", "R loo",
        "arviz-stats", "ArviZ 0.23"; tail rule, tie rule, default ``r_eff`` and SE divisor
        as in :mod:`bayesij.stats.peers`), so that the answer is that peer's
        (``"arviz-stats"``: ``arviz_stats.loo`` pointwise to 1e-12), or
        :class:`bayesij.PsisOptions` to override any of them (``r_eff``, ``tail_rule``,
        ``ties``, ``ddof``). None is "bayesij": ``tail_rule="ceil"``, ``ties="above"``,
        ``r_eff`` per unit from the chains, ``ddof=0``.
    groups : array_like or mapping, optional
        Leave-group-out: units are groups, with summed log-likelihoods (the conditional
        terms: new observations of the same groups; for a new group, each group's effect
        integrated out, :func:`~bayesij.loo_integrated`).
    var_name : str or list of str, optional
        Log-likelihood variable of an ``InferenceData``.
    save_psis : bool, default False
        Keep the smoothed log-weights in the result (an array as large as the
        log-likelihood) for :func:`loo_expectation`, :func:`loo_pit` and
        :func:`bayesij.linearity` to reuse.
    log_jacobian : array_like of shape (n_units,), optional
        For a model fitted to a transformed response ``z = g(y)`` (e.g. ``log y``):
        ``log |dz_n / dy_n|`` per unit (summed over a group's observations), added to each
        ``elpd_loo`` and ``lppd`` so that the elpd is of ``y`` and comparable with models
        of ``y`` itself (``-log y`` for ``z = log y``). ``p_loo`` and k-hat are unchanged.
    client : dask.distributed.Client, optional
        For a lazy log-likelihood: run its blocks as tasks on this cluster.

    Returns
    -------
    LooResult

    Warns
    -----
    UserWarning
        k-hat above ``min(1 - 1/log10 S, 0.7)``; constant log-likelihood columns (k-hat =
        inf); fewer than 100 draws; an IJ estimate that is not a density (NaN).

    Notes
    -----
    A lazy log-likelihood — :func:`bayesij.loglik_function` (R loo's ``loo.function``), a
    dask array, or a dask-backed xarray DataArray / Dataset / ``log_likelihood`` group
    (e.g. opened with ``xr.open_dataset(path, chunks=...)``) — is read one block of
    observations at a time: peak memory is one block, never the draws x observations
    matrix. Blocks follow the dask chunks along the observations.

    An observation with ``-inf`` log-likelihood at some draw (impossible there) has an
    infinite importance ratio at that draw: its LOO predictive density is estimated as 0,
    so ``elpd_loo = -inf``, ``p_loo = inf`` and ``pareto_k = inf``, with a warning.

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    .. [2] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27.
    .. [3] Ionides, E. L. (2008). Truncated importance sampling. Journal of Computational
       and Graphical Statistics 17(2), 295-311.
    .. [4] Merkle, E. C., Furr, D. and Rabe-Hesketh, S. (2019). Bayesian comparison of
       latent variable models: conditional versus marginal likelihoods. Psychometrika
       84(3), 802-829.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=50)
    >>> mu = y.mean() + rng.normal(size=(4, 500, 1)) / np.sqrt(50)
    >>> result = bayesij.loo(-0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi))
    >>> result.bad_k_ids()
    []
    """
    options = dict(groups=groups, var_name=var_name, convention=convention)
    result = loo_methods(data, (method,), save_psis=save_psis, client=client, **options)
    return with_log_jacobian(result[method], log_jacobian)


def loo_i(
    data,
    unit,
    *,
    groups=None,
    var_name=None,
    convention=None,
    log_jacobian=None,
) -> LooResult:
    """PSIS-LOO of one unit, reading only its log-likelihood (R loo's and arviz-stats'
    ``loo_i``): for a lazy log-likelihood (a function, a dask array) one column is
    computed, never the matrix.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray, array_like or LogLikFunction
        As :func:`loo`.
    unit : int or label
        The unit's id (a label of ``loo(data).pointwise``'s index), or, when it is not one,
        its position among the units (as arviz-stats' flattened ``i``).
    groups, var_name, log_jacobian
        As :func:`loo` (``log_jacobian`` the unit's one value).
    convention : str or PsisOptions, optional
        As :func:`loo`; a convention whose ``r_eff`` is one number for the whole posterior
        (arviz-stats, ArviZ 0.23) computes it from every posterior draw as :func:`loo`
        does, so the unit's values equal its row of ``loo(data)``.

    Returns
    -------
    LooResult
        One row; ``elpd`` is the unit's ``elpd_loo`` (``se`` is 0).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=50)
    >>> mu = y.mean() + rng.normal(size=(4, 500, 1)) / np.sqrt(50)
    >>> log_lik = -0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi)
    >>> one = bayesij.loo_i(log_lik, 7)
    >>> bool(np.isclose(one.elpd, bayesij.loo(log_lik).pointwise["elpd_loo"][7]))
    True

    References
    ----------
    .. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27.
    """
    source = as_log_lik_source(data, groups=groups, var_name=var_name)
    position = _unit_position(source, unit)
    options = psis_options(convention)
    if options.r_eff is None and CONVENTIONS[options.convention or "bayesij"][2] == "posterior":
        # the posterior's one number; a per-unit rule is the unit's own, from its column
        options = replace(options, r_eff=psis_settings(options, source).r_eff)
    column = np.asarray(source.rows([position]), dtype=float)
    one = from_arrays(
        np.zeros((*column.shape[:2], 0)), column, obs_names=[str(source.units[position])]
    )
    result = loo(one, groups=False, convention=options, log_jacobian=log_jacobian)
    pointwise = result.pointwise.set_axis(source.index[position : position + 1])
    return replace(result, pointwise=pointwise)


def _unit_position(source, unit) -> int:
    """The position of ``unit`` among ``source``'s units: its label, else an int position."""
    labels = list(source.index)
    if not isinstance(unit, (bool, np.bool_)) and unit in labels:  # True == 1 in a list
        return labels.index(unit)
    if isinstance(unit, (int, np.integer)) and not isinstance(unit, (bool, np.bool_)):
        if -len(labels) <= int(unit) < len(labels):
            return int(unit) % len(labels)
    shown = labels[:3] + (["..."] if len(labels) > 3 else [])
    raise fail(
        "unit",
        repr(unit),
        f"a unit's id ({', '.join(map(str, shown))}) or a position in 0..{len(labels) - 1}",
    )


def with_log_jacobian(result: LooResult, log_jacobian) -> LooResult:
    """``result`` on the scale of the untransformed response: ``log |dz/dy|`` per unit
    added to ``elpd_loo`` and ``lppd`` (None: ``result`` itself)."""
    if log_jacobian is None:
        return result
    values = as_float_array(log_jacobian, "log_jacobian")
    if values.shape != (result.n_units,):
        raise fail(
            "log_jacobian",
            f"shape {values.shape}",
            f"one value per unit, shape ({result.n_units},)",
        )
    check_finite(values, "log_jacobian")
    pointwise = result.pointwise.copy()
    pointwise["elpd_loo"] += values
    pointwise["lppd"] += values
    return replace(result, pointwise=pointwise)


def loo_methods(
    data,
    methods=("psis", "ij", "cumulant"),
    *,
    groups=None,
    var_name=None,
    convention=None,
    save_psis: bool = False,
    client=None,
) -> dict[str, LooResult]:
    """:func:`loo` by several methods from one pass over the draws (shared smoothing).

    Returns a dict from method name to :class:`LooResult`; arguments as :func:`loo`.
    """
    save_psis = check_flag(save_psis, "save_psis")
    methods = (methods,) if isinstance(methods, str) else tuple(methods)
    unknown = [m for m in methods if m not in loo_arrays.METHODS]
    if unknown or not methods:
        raise fail(
            "method", repr(unknown[0] if unknown else methods), f"one of {loo_arrays.METHODS}"
        )
    settings = psis_rules(convention)
    per_chunk = settings.r_eff is None and settings.r_eff_rule in loo_arrays.R_EFF_RULES
    kernel = partial(
        loo_arrays.loo_methods,
        methods=methods,
        tail_rule=settings.tail_rule,
        ties=settings.ties,
        check=False,
        save_log_weights=save_psis,
        r_eff_rule=settings.r_eff_rule if per_chunk else "chains",
    )
    source = as_log_lik_source(
        data, groups=groups, var_name=var_name, whole_matrix={"save_psis": save_psis}
    )
    members = unit_members(source)
    # A per-unit rule is computed by the kernel from each chunk's rows (no pass of its own).
    r_eff = None
    if not per_chunk:
        r_eff = source.relative_eff(settings.r_eff_rule, settings.convention, settings.r_eff)
    results = map_blocks(source, kernel, per_unit={"r_eff": r_eff}, client=client)
    found = loo_results(results, source.index, source.n_draws, settings.tail_rule, settings.ddof)
    return {m: replace(r, grouping=source.grouping, members=members) for m, r in found.items()}


def loo_results(results: dict, index: pd.Index, n_draws: int, tail_rule: str, ddof: int) -> dict:
    """LooResults (with their warnings) from :func:`bayesij.array.loo.loo_methods`'
    arrays by method."""
    out = {}
    for method, arrays in results.items():
        pointwise = pd.DataFrame(
            {
                "elpd_loo": arrays.elpd,
                "p_loo": arrays.p_loo,
                "pareto_k": arrays.pareto_k,
                "mcse_elpd_loo": arrays.mcse,
                "ess": arrays.ess,
                "r_eff": arrays.r_eff,
                "lppd": arrays.lppd,
            },
            index=index,
        )
        out[method] = LooResult(
            pointwise, method, n_draws, tail_rule, ddof, arrays.log_weights, arrays.constant
        )
        _warn_about(out[method], arrays.constant)
    return out


def _warn_about(result: LooResult, constant_units: np.ndarray) -> None:
    constant = np.flatnonzero(constant_units)
    if constant.size:
        _warn(
            f"{constant.size} unit(s) have a log-likelihood constant over all draws "
            f"(positions {constant[:10].tolist()}): no Pareto fit, k-hat = inf (as R loo "
            "and ArviZ report it); their LOO estimate is exact (equal importance weights)."
        )
    if result.n_draws < MIN_DRAWS:
        _warn(
            f"Only {result.n_draws} draws (fewer than {MIN_DRAWS}): LOO estimates and "
            "k-hat are unreliable."
        )
    impossible = np.isneginf(result.pointwise["elpd_loo"].to_numpy())
    if impossible.any():
        _warn(
            f"{int(impossible.sum())} unit(s) have log-likelihood -inf at some draws "
            f"(positions {np.flatnonzero(impossible)[:10].tolist()}): elpd_loo = -inf."
        )
    bad = result.unreliable_ids()
    if bad:
        _warn(
            f"{len(bad)} of {result.n_units} units have Pareto k-hat above "
            f"{result.k_threshold:.2g}: their LOO estimates are unreliable; refit without "
            "them (bayesij.refit) or use a more robust method."
        )
    if result.method == "ij" and result.pointwise["elpd_loo"].isna().any():
        _warn(
            "The IJ estimate of p(x_n | x_-n) is not positive for "
            f"{int(result.pointwise['elpd_loo'].isna().sum())} unit(s): the linear "
            "approximation fails there (elpd_loo is NaN)."
        )


def warn_about_khat(result: LooResult) -> None:
    """The warnings of :func:`loo` (k-hat, few draws, impossible units) for a LOO result
    computed elsewhere (an approximate posterior's)."""
    _warn_about(result, np.zeros(result.n_units, dtype=bool))


def _warn(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=5)


def _matching_draws(values, log_lik: np.ndarray, argument: str) -> np.ndarray:
    """Values per draw and observation, shaped and checked like the log-likelihood matrix."""
    array = as_float_array(values, argument)
    if array.ndim == 3:
        array = array.reshape(-1, array.shape[2])
    matrix, _ = as_draws_matrix(array, argument)
    if matrix.shape != log_lik.shape:
        raise fail(
            argument,
            f"shape {matrix.shape}",
            f"one value per draw and observation, shape {log_lik.shape}",
        )
    check_finite(matrix, argument)
    return matrix


def saved_log_weights(result, shape: tuple[int, int], argument: str) -> np.ndarray:
    """The smoothed log-weights a PSIS-LOO result kept (``save_psis=True``), checked to be
    for the (n_draws, n_units) they are about to be used with."""
    weights = getattr(result, "log_weights", None)
    if weights is None or getattr(result, "method", None) != "psis" or weights.shape != shape:
        found = (
            f"a {type(result).__name__} without saved PSIS weights"
            if weights is None
            else f"saved weights of shape {weights.shape} (draws x units)"
        )
        raise fail(
            argument,
            found,
            f"bayesij.loo(..., save_psis=True) on the same draws and units, shape {shape}",
        )
    return weights


class LooDraws(NamedTuple):
    """What every LOO expectation starts from: the (S, N) log-likelihood, the per-draw
    ``values`` checked against it, per-unit Pareto tail lengths and ``r_eff``, the tie
    rule, the unit labels and saved log-weights (or None)."""

    matrix: np.ndarray
    values: np.ndarray
    tails: np.ndarray
    r_eff: np.ndarray
    ties: str
    units: object
    saved: np.ndarray | None
    quantile: str = "R loo"
    codes: np.ndarray | None = None
    groups: pd.Index | None = None
    members: pd.Series | None = None
    pareto_k: np.ndarray | None = None


def draws_beside_log_lik(
    data,
    values,
    argument,
    *,
    var_name=None,
    psis=None,
    convention=None,
    groups=None,
) -> LooDraws:
    """:class:`LooDraws` of ``data`` and ``values`` under ``convention`` (as :func:`loo`).

    With ``groups``, every observation's weights are its group's leave-one-group-out ones,
    smoothed once per group and repeated for each of its observations as saved
    log-weights (with the group's k-hat in ``pareto_k``); the matrix, tail lengths and
    ``r_eff`` are the group's too (``codes``: the group of each; ``groups``: their
    labels)."""
    source = as_log_lik_source(
        data, groups=groups, var_name=var_name, whole_matrix={"data": "LOO expectations"}
    )
    settings = psis_settings(convention, source)
    ll, units = source.matrix(), source.units
    matrix = ll.reshape(-1, ll.shape[2])
    saved, r_eff, tail_rule = None, settings.r_eff, settings.tail_rule
    if psis is not None:
        saved = saved_log_weights(psis, matrix.shape, "psis")
        r_eff, tail_rule = psis.pointwise["r_eff"].to_numpy(), psis.tail_rule
    if r_eff is None:
        r_eff = log_lik_relative_eff(ll)
    r_eff = checked_r_eff(r_eff, ll.shape[2]) * np.ones(ll.shape[2])
    tails = tail_length(matrix.shape[0], r_eff, tail_rule)
    members = unit_members(source)
    if members is None:
        checked = _matching_draws(values, matrix, argument)
        return LooDraws(
            matrix, checked, tails, r_eff, settings.ties, units, saved, settings.quantile
        )
    codes = source.codes  # each observation's group: its columns, weights and tails
    checked = _matching_draws(values, matrix[:, codes], argument)
    group_k = psis.pointwise["pareto_k"].to_numpy() if psis is not None else None
    if saved is None:  # each group's weights smoothed once, not once per observation
        smoothed = psis_chunk(-matrix, tails, settings.ties)
        saved = smoothed.log_weights - logsumexp_columns(smoothed.log_weights)
        group_k = smoothed.pareto_k
    return LooDraws(
        matrix[:, codes],
        checked,
        tails[codes],
        r_eff[codes],
        settings.ties,
        source.posterior.log_lik.coords["obs"],
        saved[:, codes],
        settings.quantile,
        codes,
        source.index,
        members,
        group_k[codes],
    )


def loo_weights(draws: LooDraws, floats_per_obs: int):
    """Chunks of observations, their normalised PSIS leave-one-out weights (S, n_cols) and
    k-hat (n_cols,), smoothed here, or taken from saved log-weights (k-hat None)."""
    matrix = draws.matrix
    for chunk in obs_chunks(matrix.shape[1], floats_per_obs * matrix.shape[0]):
        yield (chunk, *chunk_loo_weights(draws, chunk))


def chunk_loo_weights(
    draws: LooDraws, chunk, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The normalised PSIS leave-one-out weights (S, n_cols) of the observations ``chunk``
    of ``draws`` and their k-hat (None where taken from saved log-weights):
    :func:`bayesij.array.loo_expectation.loo_column_weights`."""
    return loo_column_weights(draws.matrix, chunk, draws.tails, draws.ties, draws.saved, rows)


def loo_expectation(
    data,
    values=None,
    *,
    var_name=None,
    kind: str = "mean",
    prob=None,
    convention=None,
    psis=None,
) -> pd.DataFrame:
    """Leave-one-out expectations ``E[g | x_-n]`` of per-draw values, with their Monte Carlo
    SE and their own k-hat.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        Source of the pointwise log-likelihood (as :func:`loo`).
    values : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs), optional
        ``g`` at each draw for each observation, e.g. posterior predictive draws ``y_rep``;
        by default the fit's ``posterior_predictive`` variable of the log-likelihood's name
        (``var_name``), its draws paired by label, as arviz-stats reads it.
    kind : {"mean", "median", "var", "sd", "quantile"}, default "mean"
        ``var`` is the weighted variance ``sum_s w_s (g_s - mean)^2 / (1 - sum_s w_s^2)``
        (as R loo >= 2.6; R loo 2.5.1's "variance" is the Monte Carlo variance of the mean);
        NaN where one draw holds (nearly) all the weight (k-hat far above 1), not inf.
        ``median`` is the weighted quantile at 1/2.
    prob : float or sequence of float, optional
        Probability for ``kind="quantile"``: R loo's weighted quantile, or arviz-stats' with
        ``convention="arviz-stats"``. Several (``prob=[0.05, 0.5, 0.95]``) are computed from
        one smoothing: the columns are then a two-level index, ``(column, prob)``, so that
        ``table["value"]`` has one column per probability.
    convention, var_name
        As :func:`loo`.
    psis : LooResult, optional
        A PSIS-LOO result of the same observations made with ``save_psis=True``: its
        smoothed weights are reused (and its ``r_eff`` and tail rule).

    Returns
    -------
    pandas.DataFrame
        One row per observation: ``value``; ``mcse``, its Monte Carlo SE by the delta
        method for self-normalised importance sampling, ``sqrt(sum_s w_s^2 phi_s^2 /
        r_eff)`` with ``phi`` the estimate's influence function (``g - mean`` for the mean;
        ``(g - mean)^2 - var`` for the variance, divided by ``2 sd`` for the sd; for
        quantiles, the weighted quantiles at ``p -/+`` the SE of the weighted CDF at the
        estimate, half their distance); and ``pareto_k``, the k-hat of the expectation as
        arviz-stats (1.3) and R loo (>= 2.8) compute it: the larger of the k-hat of the
        raw importance ratios ``r`` (right tail) and of ``h r`` (both tails; ``h = g`` for
        the mean, ``g^2`` for the variance and sd; the ratios' alone for quantiles and
        where ``h`` has at most two distinct values or is not finite), each fitted with the
        tail length of ``pareto_khat`` for that function's tail ESS.

    Notes
    -----
    R loo (stan-dev/loo#50) and arviz-stats give no Monte Carlo SE for LOO expectations;
    this one is checked for coverage against exact leave-one-out expectations of a
    conjugate model (tests/stats/test_loo.py).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> means = np.broadcast_to(mu, (4, 500, 40))  # each observation's predictive mean
    >>> table = bayesij.loo_expectation(post, means)
    >>> list(table.columns)
    ['value', 'mcse', 'pareto_k']

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72) (the k-hat of a function's expectation).
    """
    if kind not in KINDS:
        raise fail("kind", repr(kind), f"one of {KINDS}")
    probs = _checked_probs(prob) if kind == "quantile" else [0.5 if kind == "median" else None]
    draws = draws_beside_log_lik(
        data,
        predictions_or_fit(data, values, var_name, "values"),
        "values",
        var_name=var_name,
        psis=psis,
        convention=convention,
    )
    value, mcse, k = _expectations(draws, kind, probs)
    index = unit_index(draws.units)
    if kind != "quantile" or np.ndim(prob) == 0:
        return pd.DataFrame({"value": value[0], "mcse": mcse[0], "pareto_k": k}, index=index)
    columns = {("value", p): value[j] for j, p in enumerate(probs)}
    columns |= {("mcse", p): mcse[j] for j, p in enumerate(probs)}
    columns |= {("pareto_k", p): k for p in probs}
    return pd.DataFrame(columns, index=index).rename_axis(columns=[None, "prob"])


def loo_means(data, values, *, var_name=None, convention=None, psis=None) -> np.ndarray:
    """The LOO means ``E[values_n | y_-n]`` alone, (n_obs,): :func:`loo_expectation`'s
    ``value`` without its MCSE and k-hat (for the estimators that use only the means,
    such as :func:`bayesij.loo_r2`)."""
    draws = draws_beside_log_lik(
        data, values, "y_pred", var_name=var_name, psis=psis, convention=convention
    )
    return _expectations(draws, "mean", [None], diagnostics=False)[0][0]


def _expectations(draws: LooDraws, kind: str, probs: list, diagnostics: bool = True):
    """Values (len(probs), n), their MCSE (len(probs), n) and k-hat (n,) of the LOO
    expectations of ``draws.values`` (:func:`bayesij.array.loo_expectation.loo_expectations`)."""
    return loo_expectations(
        draws.matrix,
        draws.values,
        lambda chunk, rows: chunk_loo_weights(draws, chunk, rows),
        draws.r_eff,
        kind,
        probs,
        draws.quantile,
        diagnostics,
    )


def _checked_probs(prob) -> list[float]:
    """``prob`` as a list of probabilities strictly between 0 and 1 (one or several)."""
    values = np.atleast_1d(np.asarray(prob, dtype=object))
    good = (
        values.size > 0
        and values.ndim == 1
        and all(
            isinstance(p, (int, float, np.floating)) and not isinstance(p, bool) and 0 < p < 1
            for p in values
        )
    )
    if not good:
        raise fail(
            "prob",
            repr(prob),
            "a probability strictly between 0 and 1 for quantiles, or a list of them",
        )
    return [float(p) for p in values]


def loo_pit(
    data,
    y=None,
    y_pred=None,
    *,
    var_name=None,
    convention=None,
    seed: int = 0,
    psis=None,
    pareto_pit: bool = False,
    censored=None,
) -> pd.Series:
    """Leave-one-out probability integral transform ``P(y_rep_n <= y_n | x_-n)``.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        Source of the pointwise log-likelihood (as :func:`loo`).
    y : array_like of shape (n_obs,), optional
        Observed values; by default the fit's ``observed_data`` variable of the
        log-likelihood's name (``var_name``), as arviz-stats reads it.
    y_pred : array_like of shape (n_draws, n_obs) or (n_chains, n_draws, n_obs), optional
        Posterior predictive draws at the same draws; by default the fit's
        ``posterior_predictive`` variable of the log-likelihood's name, its draws paired
        by label.
    convention, var_name, psis
        As :func:`loo_expectation`.
    seed : int, default 0
        For ties ``y_pred == y`` (discrete data) the PIT is drawn uniformly between the
        weights below and at ``y`` (randomised PIT, Czado, Gneiting and Held 2009), as R loo.
    pareto_pit : bool, default False
        Refine each value in the tail of the predictive draws beyond which the observation
        lies by a weighted generalized Pareto fit (:mod:`bayesij.array.pareto_pit`), as
        arviz-stats' ``loo_pit(..., pareto_pit=True)``: an observation beyond most draws
        gets a value strictly between 0 and 1 from the fitted tail (kept within
        ``1 / (10^4 S)`` of either end), and the values suit tests of continuous uniformity.
    censored : array_like of shape (n_obs,), optional
        Censored observations, brms' codes: 0 observed, 1 right-censored (the true value is
        at least ``y``), -1 left-censored (at most ``y``). A censored observation's PIT is
        known only to lie in ``[F(y), 1]`` (right) or ``[0, F(y)]`` (left), ``F`` its LOO
        predictive CDF; it is drawn uniformly there (``seed``), which makes it uniform when
        the model is calibrated, as the randomised PIT of discrete data is.

    Returns
    -------
    pandas.Series
        Values in [0, 1]; uniform when the model is calibrated.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> y_pred = rng.normal(mu, 1.0, size=(4, 500, 40))  # posterior predictive draws
    >>> pit = bayesij.loo_pit(post, y, y_pred)
    >>> len(pit), bool(((pit > 0) & (pit < 1)).all())
    (40, True)
    """
    check_flag(pareto_pit, "pareto_pit")  # before any work
    draws = draws_beside_log_lik(
        data,
        predictions_or_fit(data, y_pred, var_name),
        "y_pred",
        var_name=var_name,
        psis=psis,
        convention=convention,
    )
    n_obs = draws.matrix.shape[1]
    observed = as_float_array(observed_or_fit(data, y, var_name), "y")
    if observed.shape != (n_obs,):
        raise fail("y", f"shape {observed.shape}", f"one value per observation, shape ({n_obs},)")
    check_finite(observed, "y")
    codes = checked_censoring(censored, n_obs)
    if codes is not None and pareto_pit:
        raise fail("censored", "censoring codes with pareto_pit=True", "one or the other")
    rng = np.random.default_rng(check_seed(seed))
    pit = np.empty(n_obs)
    for chunk, weights, _ in loo_weights(draws, 8):
        replicated = draws.values[:, chunk]
        below = (weights * (replicated < observed[chunk])).sum(axis=0)
        at = (weights * (replicated == observed[chunk])).sum(axis=0)
        pit[chunk] = below + at * np.where(at > 0, rng.uniform(size=at.size), 0.0)
        if pareto_pit:
            pit[chunk] = pareto_pit_columns(replicated, observed[chunk], weights, pit[chunk])
        if codes is not None:  # a censored value's PIT: uniform over what is known of it
            cdf, code = np.minimum(below + at, 1.0), codes[chunk]
            low, high = np.where(code == 1, cdf, 0.0), np.where(code == -1, cdf, 1.0)
            drawn = low + (high - low) * rng.uniform(size=cdf.size)
            pit[chunk] = np.where(code != 0, drawn, pit[chunk])
    return pd.Series(np.minimum(pit, 1.0), index=unit_index(draws.units), name="loo_pit")
