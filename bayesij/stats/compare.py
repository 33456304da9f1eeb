"""Model comparison by elpd, in the layout of R loo's ``loo_compare``."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from bayesij.array.checks import (
    as_float_array,
    check_finite,
    check_replicates,
    check_seed,
    fail,
)
from bayesij.array.model_weights import pseudobma_weights, stacking_weights
from bayesij.array.numeric import elpd_standard_error
from bayesij.data.inference_data import fit_groups, optional_group
from bayesij.stats.compare_diagnostics import (
    check_same_groups,
    difference_flag,
    khat_flag,
    probability_below_zero,
    selection_check,
)
from bayesij.stats.compare_scores import compare_scores
from bayesij.stats.elpd import ElpdResult
from bayesij.stats.scores import LooScore
from bayesij.stats.subsample import LooSubsample, compare_subsampled
from bayesij.stats.weighted_loo import WeightedLooResult, weighted_standard_error

__all__ = [
    "compare",
    "model_weights",
    "weight_predictions",
    "WeightedPredictions",
    "WEIGHT_METHODS",
]


WEIGHT_METHODS = ("stacking", "pseudobma", "pseudobma+")


def compare(
    results: dict,
    weights: str | None = None,
    *,
    reference: str | None = None,
    seed=None,
    convention: str | None = None,
) -> pd.DataFrame:
    """Compare models by elpd, in the layout of R ``loo_compare`` (best model first), with
    the comparison diagnostics of R loo 2.10 and arviz-stats' ``compare``.

    Parameters
    ----------
    results : dict of str to ElpdResult, or of str to LooScore
        Results (LOO, WAIC, K-fold, held-out, LFO, ...) of the models on the same units.
        Or each model's :func:`bayesij.loo_score` / :func:`bayesij.loo_metrics` of one kind
        (CRPS, SCRPS, MAE, MSE, RMSE, R², accuracy) on the same observations: the table is
        then :func:`bayesij.stats.compare_scores.compare_scores`'s (the difference of each
        model to the best by that score, the paired SE, ``p_worse``, ``diag_diff``,
        ``diag_k``), which neither R loo nor arviz-stats offers.
        Units are paired by their ids (the pointwise index), so the order of the
        observations does not matter; results whose ids are only positions 0..N-1 (no
        labels, e.g. from plain arrays) are paired by position, as R loo and ArviZ do.
    weights : {"stacking", "pseudobma", "pseudobma+"}, optional
        Add a ``weight`` column (:func:`model_weights`), as ArviZ's ``compare`` does
        (R ``loo_compare`` has none: the default).
    reference : str, optional
        The model the differences are taken to (a baseline or null model); by default the
        best one. With a reference the probability column is ``p_better`` (that the model
        predicts better than the reference) instead of ``p_worse``, as in arviz-stats.
    seed : int, optional
        For ``"pseudobma+"``'s Bayesian bootstrap.
    convention : {None, "R loo", "arviz-stats", "ArviZ 0.23"}, optional
        Whose standard error of the difference: R's ``loo_compare`` takes
        ``sqrt(N) sd_n`` (ddof 1), arviz-stats' and ArviZ 0.23's ``compare`` ``sqrt(N
        var_n)`` (ddof 0) — arviz-stats so even though its models' ``se`` use ddof 1.
        Each model's ``se`` is its result's (compute the results with the same
        ``convention=`` to reproduce a peer's whole table). None: the results' ddof.
    -------
    pandas.DataFrame
        Indexed by model name, sorted by elpd (best first):

        - ``elpd_diff``: elpd of the model minus that of the reference (the best by
          default, so <= 0), and ``se_diff`` = ``sqrt(N) sd_n(elpd_n - elpd_ref,n)`` with
          the convention's ddof (the results' by default);
        - ``p_worse``: ``P(D < 0)`` for ``D ~ N(elpd_diff, se_diff^2)``, the probability
          that the model predicts worse than the best (NaN for the best), or ``p_better``
          with a ``reference``;
        - ``diag_diff``: ``"N < 100"`` or ``"|elpd_diff| < 4"`` where that normal
          approximation is poorly calibrated (Sivula et al. 2025), else ``""``;
        - ``diag_elpd``: ``"K k̂ > t"`` where K units' Pareto k exceed the LOO threshold
          (the elpd is biased, favouring that model), else ``""``;
        - each model's ``elpd``, ``se``, ``p`` and ``ic`` (-2 elpd); ``rank`` (0 = best);
          and ``weight`` if asked.

        With more than 11 models, the best model's lead is checked for selection bias
        (McLatchie & Vehtari 2024): ``table.attrs["selection"]`` holds the
        :class:`~bayesij.stats.compare_diagnostics.SelectionCheck`, and a warning says so
        when the lead is within what chance gives the best of that many equal models.
        Subsampled results (:func:`bayesij.loo_subsample`, all on the same subsample) are
        compared by the difference estimator of the pointwise differences:
        ``elpd_diff``, ``se_diff``, ``subsampling_se_diff``, ``elpd``, ``se``,
        ``subsampling_se``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> right = bayesij.loo(-0.5 * (y - mu) ** 2)
    >>> biased = bayesij.loo(-0.5 * (y - mu - 1.0) ** 2)  # predicts one unit too high
    >>> table = bayesij.compare({"right": right, "biased": biased})
    >>> list(table.index)
    ['right', 'biased']

    References
    ----------
    .. [1] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model
       evaluation using leave-one-out cross-validation and WAIC. Statistics and Computing
       27, 1413-1432.
    .. [2] Sivula, T., Magnusson, M., Matamoros, A. A. and Vehtari, A. (2025). Uncertainty
       in Bayesian leave-one-out cross-validation based model comparison. Bayesian
       Analysis.
    .. [3] McLatchie, Y. and Vehtari, A. (2024). Efficient estimation and correction of
       selection-induced bias with order statistics. Statistics and Computing 34, 132.
    """
    if weights is not None and weights not in WEIGHT_METHODS:
        raise fail("weights", repr(weights), f"None or one of {WEIGHT_METHODS}")
    if isinstance(results, dict) and any(isinstance(r, LooScore) for r in results.values()):
        return _compared_scores(results, weights, reference, convention)
    if isinstance(results, dict) and any(isinstance(r, LooSubsample) for r in results.values()):
        if weights is not None:
            raise fail("weights", repr(weights), "None for subsampled results")
        if reference is not None:
            raise fail("reference", repr(reference), "None for subsampled results")
        return compare_subsampled(results)
    frame, ddof = _pointwise_table(results)
    ddof = _difference_ddof(convention, ddof)
    if reference is not None and reference not in results:
        raise fail("reference", repr(reference), f"one of the models {list(results)}")
    weighting = _common_weighting(results)
    order = list(frame.sum().sort_values(ascending=False).index)
    baseline = frame[order[0] if reference is None else reference]
    probability = "p_worse" if reference is None else "p_better"
    sign = 1.0 if reference is None else -1.0
    rows = []
    for rank, name in enumerate(order):
        result = results[name]
        difference = frame[name] - baseline
        elpd_diff = float(difference.sum())
        se_diff = _difference_se(difference.to_numpy(), weighting, ddof)
        rows.append(
            {
                "model": name,
                "elpd_diff": elpd_diff,
                "se_diff": se_diff,
                probability: probability_below_zero(sign * elpd_diff, se_diff),
                "diag_diff": difference_flag(elpd_diff, _n_observations(difference, weighting)),
                "diag_elpd": khat_flag(*_pareto_k(result)),
                "elpd": float(frame[name].sum()),
                "se": result.se,
                "p": result.p,
                "ic": -2 * float(frame[name].sum()),
                "rank": rank,
            }
        )
    table = pd.DataFrame(rows).set_index("model")
    if weights is not None:
        table["weight"] = model_weights(results, weights, seed=seed).loc[table.index]
    _check_selection(table, frame, order)
    return table


def _compared_scores(results: dict, weights, reference, convention) -> pd.DataFrame:
    """:func:`compare` of :class:`~bayesij.stats.scores.LooScore` results."""
    others = [name for name, r in results.items() if not isinstance(r, LooScore)]
    if others or len(results) < 2:
        raise fail(
            "results",
            f"scores beside {others}" if others else f"{len(results)} score",
            "two or more LooScore results (loo_score / loo_metrics), or elpd results only",
        )
    for name, value in (("weights", weights), ("reference", reference), ("convention", convention)):
        if value is not None:
            raise fail(name, repr(value), "None when comparing scores")
    return compare_scores(results)


#: The divisor of the difference's SE in each peer's comparison table.
DIFFERENCE_DDOF = {"R loo": 1, "arviz-stats": 0, "ArviZ 0.23": 0}


def _difference_ddof(convention, results_ddof: int) -> int:
    if convention is None:
        return results_ddof
    if not isinstance(convention, str) or convention not in DIFFERENCE_DDOF:
        raise fail("convention", repr(convention), f"None or one of {sorted(DIFFERENCE_DDOF)}")
    return DIFFERENCE_DDOF[convention]


def _common_weighting(results: dict) -> tuple[str, np.ndarray] | None:
    """The weights of weighted LOO results (:func:`bayesij.loo_weighted`), which must be
    the same kind and values for every model; None for unweighted results."""
    weighted = {name: r for name, r in results.items() if isinstance(r, WeightedLooResult)}
    if not weighted:
        return None
    first_name, first = next(iter(weighted.items()))
    for name, result in results.items():
        same = (
            name in weighted
            and result.kind == first.kind
            and np.array_equal(result.weights, first.weights)
        )
        if not same:
            raise fail(
                "results",
                f"{name!r} with other weights than {first_name!r}",
                f"every model weighted alike ({first.kind} weights of the same values)",
            )
    return first.kind, first.weights


def _difference_se(difference: np.ndarray, weighting, ddof: int) -> float:
    """SE of the summed (weighted) pointwise differences."""
    if weighting is None or weighting[0] == "survey":
        return elpd_standard_error(difference, ddof)
    kind, weights = weighting
    return weighted_standard_error(difference / weights, weights, kind, ddof)


def _n_observations(difference: pd.Series, weighting) -> float:
    """The number of observations (the total weight of frequency-weighted rows)."""
    if weighting is not None and weighting[0] == "frequency":
        return float(weighting[1].sum())
    return len(difference)


def _pareto_k(result) -> tuple:
    """A LOO result's k-hat and threshold, (None, None) for criteria without them."""
    if "pareto_k" not in result.pointwise or not hasattr(result, "k_threshold"):
        return None, None
    return result.pointwise["pareto_k"].to_numpy(), result.k_threshold


def _check_selection(table: pd.DataFrame, frame: pd.DataFrame, order: list) -> None:
    """Attach the order-statistics check (more than 11 models) and warn when the best
    model's lead may be selection noise."""
    check = selection_check(frame, order)
    table.attrs["selection"] = check
    if check is not None and check.by_chance:
        warnings.warn(
            f"The best model's elpd lead over the median model ({check.best_lead:.1f}) is "
            f"within what the best of {len(order) - 1} equally good models would show by "
            f"chance ({check.expected_by_chance:.1f}): the difference may be due to "
            "selection; average the models (stacking weights) or use projection predictive "
            "selection instead of picking the best (McLatchie & Vehtari 2024).",
            UserWarning,
            stacklevel=3,
        )


def model_weights(
    results, method: str = "stacking", *, n_bootstrap: int = 1000, seed=None
) -> pd.Series:
    """Weights for averaging the models' predictive distributions, as R ``loo_model_weights``.

    Parameters
    ----------
    results : dict of str to LooResult (or WaicResult), or pandas.DataFrame
        The models' results on the same units (as :func:`compare`), or a table of pointwise
        elpd values with one column per model (R's ``lpd_point`` matrix).
    method : {"stacking", "pseudobma", "pseudobma+"}, default "stacking"
        Stacking of predictive distributions; pseudo-BMA, ``exp(elpd_k)`` normalised (R's
        ``pseudobma_weights(BB = FALSE)``); pseudo-BMA+ with the Bayesian bootstrap (R's
        default ``loo_model_weights(method = "pseudobma")``).
    n_bootstrap : int, default 1000
        Bayesian bootstrap replicates for ``"pseudobma+"`` (R's ``BB_n``).
    seed : int, optional
        Seed of the Bayesian bootstrap.

    Returns
    -------
    pandas.Series
        ``weight`` per model (summing to one), in the order given.

    References
    ----------
    .. [1] Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to
       average Bayesian predictive distributions. Bayesian Analysis 13(3), 917-1007.

    Examples
    --------
    >>> import numpy as np, pandas as pd, bayesij
    >>> lpd = pd.DataFrame({"a": [-1.0, -2.0, -1.5], "b": [-1.2, -2.4, -1.6]})
    >>> bayesij.model_weights(lpd).round(6).tolist()  # a predicts every point better
    [1.0, 0.0]
    >>> bayesij.model_weights(lpd, "pseudobma").round(4).tolist()  # exp(elpd) normalised
    [0.6682, 0.3318]
    """
    if method not in WEIGHT_METHODS:
        raise fail("method", repr(method), f"one of {WEIGHT_METHODS}")
    n_bootstrap = check_replicates(n_bootstrap, "n_bootstrap")
    rng = np.random.default_rng(None if seed is None else check_seed(seed))
    frame = pointwise_table(results)
    lpd = frame.to_numpy(dtype=float)
    if method == "stacking":
        values = stacking_weights(lpd)
    else:
        values = pseudobma_weights(lpd, method == "pseudobma+", n_bootstrap, rng)
    return pd.Series(values, index=pd.Index(frame.columns, name="model"), name="weight")


def _lpd_table(table: pd.DataFrame) -> pd.DataFrame:
    """A user's pointwise elpd table, checked: two or more models, finite numbers."""
    if table.shape[1] < 2 or table.shape[0] < 1:
        raise fail(
            "results",
            f"a table of shape {table.shape}",
            "pointwise elpd values: one row per observation, one column per model (2 or more)",
        )
    values = as_float_array(table.to_numpy(), "results")
    check_finite(values, "results")
    return pd.DataFrame(values, index=table.index, columns=table.columns)


def pointwise_table(results) -> pd.DataFrame:
    """The models' pointwise elpd, one column each, on matched units: from a dict of
    results (as :func:`compare`) or a table of them (R's ``lpd_point``)."""
    if isinstance(results, pd.DataFrame):
        return _lpd_table(results)
    return _pointwise_table(results)[0]


def _pointwise_table(results) -> tuple[pd.DataFrame, int]:
    """The models' pointwise elpd on matched units (one column each) and their ddof."""
    if not isinstance(results, dict) or len(results) < 2:
        raise fail(
            "results",
            f"{type(results).__name__} of {len(results)} result(s)"
            if hasattr(results, "__len__")
            else repr(results),
            "a dict of at least two named elpd results (LooResult, WaicResult, ...)",
        )
    pointwise = {}
    for name, result in results.items():
        if not isinstance(result, ElpdResult):
            raise fail(
                "results",
                f"a {type(result).__name__} for {name!r}",
                "LooResult, WaicResult or another elpd result (bayesij.loo, waic, holdout, "
                "lfo, loo_subsample)",
            )
        pointwise[name] = result.pointwise_elpd
    _match_units(pointwise)
    check_same_groups(results)
    ddofs = {result.ddof for result in results.values()}
    if len(ddofs) != 1:
        raise fail("results", f"mixed SE conventions ddof={sorted(ddofs)}", "one convention")
    frame = pd.DataFrame({name: values.to_numpy() for name, values in pointwise.items()})
    return frame, ddofs.pop()


def _unlabelled(values: pd.Series) -> bool:
    """Ids that are only positions 0..N-1 (the input carried no labels)."""
    index = values.index
    return index.dtype.kind in "iu" and np.array_equal(index.to_numpy(), np.arange(len(index)))


def _match_units(pointwise: dict) -> None:
    """Reorder every model's pointwise values to the units of the first labelled one (in
    place): by id where the ids are the same set, by position where one side has only
    positions; refuse models on other units."""
    labelled = [name for name, values in pointwise.items() if not _unlabelled(values)]
    reference_name = labelled[0] if labelled else next(iter(pointwise))
    reference = pointwise[reference_name]
    for name, values in pointwise.items():
        same_size = len(values) == len(reference)
        if same_size and set(values.index) == set(reference.index):
            pointwise[name] = values.loc[reference.index]
        elif same_size and (_unlabelled(values) or _unlabelled(reference)):
            pointwise[name] = pd.Series(values.to_numpy(), index=reference.index)
        else:
            missing = sorted(set(reference.index) - set(values.index), key=str)[:5]
            extra = sorted(set(values.index) - set(reference.index), key=str)[:5]
            raise fail(
                "results",
                f"{name!r} on other units than {reference_name!r} (missing {missing}, "
                f"extra {extra}, {len(values)} vs {len(reference)} units)",
                "results computed on the same units (observation ids or groups)",
            )


class WeightedPredictions(NamedTuple):
    """Draws of the model-averaged predictive distribution.

    Attributes
    ----------
    draws : ndarray of shape (S, ...)
        ``S`` = the fewest draws of any model; each model's share is its weight.
    model : ndarray of shape (S,)
        The model each draw came from.
    """

    draws: np.ndarray
    model: np.ndarray


def weight_predictions(
    predictions: dict, weights=None, *, seed=None, group: str = "posterior_predictive"
):
    """Predictive draws of the weighted mixture of models, as arviz-stats'
    ``weight_predictions`` (and brms' ``pp_average``).

    Parameters
    ----------
    predictions : dict of str to array_like, or of str to InferenceData / DataTree
        Each model's predictive draws, (n_chains, n_draws, ...) or (S, ...); the trailing
        shape must be the same for all (the same observations). Or each model's fit: then
        every variable of its ``group`` is mixed, the same draws of a model for all of
        them (joint draws stay joint), and the result is the peer's container.
    weights : pandas.Series, dict or sequence, optional
        Each model's weight, e.g. ``model_weights(...)`` or ``compare(...)["weight"]``
        (by name), or in the order of ``predictions``; normalised. Default equal.
    seed : int, optional
        Seed of the choice of draws.
    group : str, default "posterior_predictive"
        The group of fits to mix.

    Returns
    -------
    WeightedPredictions or xarray.DataTree
        ``S = min_k S_k`` draws: ``round(S w_k)`` of model k by largest remainders, so that
        they add up to ``S`` (arviz-stats truncates each share, losing up to one draw per
        model), chosen without replacement; ``model`` names the source of each. For fits,
        a DataTree as arviz-stats returns: ``group`` with the draws along ``sample``, the
        last dim (and a ``model`` coordinate), and the first fit's ``observed_data``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(0.0, 1.0, size=(4, 500, 10))  # two models' predictive draws
    >>> b = rng.normal(1.0, 1.0, size=(4, 500, 10))
    >>> mixed = bayesij.weight_predictions({"a": a, "b": b}, weights={"a": 0.5, "b": 0.5}, seed=0)
    >>> mixed.draws.shape
    (2000, 10)

    References
    ----------
    .. [1] Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to
       average Bayesian predictive distributions. Bayesian Analysis 13(3), 917-1007.
    """
    if not isinstance(predictions, dict) or len(predictions) < 2:
        raise fail("predictions", type(predictions).__name__, "a dict of two or more models' draws")
    names = list(predictions)
    datasets = fit_groups(predictions, group)
    if datasets is not None:
        observed = optional_group(next(iter(predictions.values())), "observed_data")
        share = _normalised_weights(weights, names)
        return _weighted_fits(datasets, observed, share, seed, group)
    draws = {name: _flat_draws(values, name) for name, values in predictions.items()}
    shapes = {values.shape[1:] for values in draws.values()}
    if len(shapes) != 1:
        raise fail("predictions", f"draws of shapes {sorted(shapes)}", "the same observations")
    share = _normalised_weights(weights, names)
    total = min(values.shape[0] for values in draws.values())
    counts = _largest_remainders(share * total, total)
    rng = np.random.default_rng(None if seed is None else check_seed(seed))
    picked = [
        rng.choice(draws[n].shape[0], c, replace=False) for n, c in zip(names, counts, strict=True)
    ]
    return WeightedPredictions(
        np.concatenate([draws[n][rows] for n, rows in zip(names, picked, strict=True)]),
        np.repeat(np.array(names, dtype=object), counts),
    )


def _weighted_fits(datasets: dict, observed, share: np.ndarray, seed, group: str):
    """:func:`weight_predictions` of fits' ``group`` Datasets: a DataTree of the mixed
    draws (and ``observed``, the first fit's observed_data, where there is one)."""
    import xarray as xr

    stacked = {
        name: dataset.stack(sample=("chain", "draw")).transpose(..., "sample")
        for name, dataset in datasets.items()
    }
    variables = {tuple(sorted(d.data_vars)) for d in stacked.values()}
    if len(variables) != 1:
        raise fail("predictions", f"{group} variables {sorted(variables)}", "the same in every fit")
    total = min(d.sizes["sample"] for d in stacked.values())
    counts = _largest_remainders(share * total, total)
    rng = np.random.default_rng(None if seed is None else check_seed(seed))
    parts = []
    for (name, dataset), count in zip(stacked.items(), counts, strict=True):
        rows = rng.choice(dataset.sizes["sample"], count, replace=False)
        part = dataset.isel(sample=rows).drop_vars(["sample", "chain", "draw"])
        parts.append(part.assign_coords(model=("sample", np.full(count, name, dtype=object))))
    tree = {group: xr.concat(parts, dim="sample")}
    if observed is not None:
        tree["observed_data"] = observed
    return xr.DataTree.from_dict(tree)


def _flat_draws(values, name: str) -> np.ndarray:
    array = as_float_array(values, f"predictions[{name!r}]")
    check_finite(array, f"predictions[{name!r}]")  # a NaN draw would be sampled silently
    if array.ndim < 2:
        raise fail(
            f"predictions[{name!r}]", f"shape {array.shape}", "draws (S, ...) or (C, D, ...)"
        )
    return array.reshape(-1, *array.shape[2:]) if array.ndim >= 3 else array


def _normalised_weights(weights, names: list) -> np.ndarray:
    if weights is None:
        return np.full(len(names), 1 / len(names))
    if isinstance(weights, (pd.Series, dict)):
        missing = [n for n in names if n not in weights]
        if missing:
            raise fail("weights", f"no weight for {missing}", f"a weight for each of {names}")
        given = [weights[n] for n in names]
        odd = [
            w for w in given if isinstance(w, bool) or not isinstance(w, (int, float, np.number))
        ]
        if odd:  # as given, never parsed or cast: "0.5" is text and True a flag
            raise fail("weights", f"the weight {odd[0]!r}", "a number for each model")
        values = np.array(given, dtype=float)
    else:
        values = as_float_array(weights, "weights").reshape(-1)
        if values.size != len(names):
            raise fail("weights", f"{values.size} weights", f"one per model ({len(names)})")
    if not np.all(np.isfinite(values)) or np.any(values < 0) or values.sum() <= 0:
        raise fail("weights", repr(values.tolist()), "finite weights >= 0, not all 0")
    return values / values.sum()


def _largest_remainders(quotas: np.ndarray, total: int) -> np.ndarray:
    """Whole counts adding up to ``total``, each its quota rounded down or up."""
    counts = np.floor(quotas).astype(int)
    extra = total - counts.sum()
    order = np.argsort(-(quotas - counts), kind="stable")
    counts[order[:extra]] += 1
    return counts
