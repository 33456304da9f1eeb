"""Stacking of predictive distributions under the CRPS or the SCRPS instead of the log
score: the weights that make the mixture's leave-one-out CRPS (or SCRPS) best.

R loo's ``loo_model_weights`` and arviz-stats' ``compare(method="stacking")`` stack under
the log score only (asked for in stan-dev/loo#281). The mixture's CRPS needs, besides each
model's ``E|X_k - y_n|`` under its LOO weights, the cross terms ``E|X_k - X_l|`` between
models' LOO predictive draws (:func:`bayesij.array.scores.weighted_mean_difference`); the
optimisation is :func:`bayesij.array.model_weights.score_stacking_weights`.

References
----------
.. [1] Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to average
   Bayesian predictive distributions. Bayesian Analysis 13(3), 917-1007.
.. [2] Bolin, D. and Wallin, J. (2023). Local scale invariance and robustness of proper
   scoring rules. Statistical Science 38(1), 140-159.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesij.array.checks import as_float_array, check_finite, fail
from bayesij.array.model_weights import mixture_score, score_stacking_weights
from bayesij.array.numeric import obs_chunks
from bayesij.array.scores import weighted_mean_difference
from bayesij.data.fit import observed_or_fit, predictions_or_fit
from bayesij.stats.loo import chunk_loo_weights, draws_beside_log_lik
from bayesij.stats.scores import SCORES

__all__ = ["score_weights", "mixture_terms"]


def score_weights(
    fits: dict,
    kind: str = "crps",
    *,
    y=None,
    y_pred: dict | None = None,
    groups=None,
    var_name=None,
    convention=None,
) -> pd.Series:
    """Stacking weights of models under the LOO CRPS or SCRPS of their mixture.

    Parameters
    ----------
    fits : dict of str to data
        Each model's log-likelihood source (as :func:`bayesij.loo`), on the same
        observations.
    kind : {"crps", "scrps"}, default "crps"
    y : array_like of shape (n_obs,), optional
        The observations; by default the first fit's ``observed_data`` variable of the
        log-likelihood's name.
    y_pred : dict of str to array_like, optional
        Each model's posterior predictive draws (at its own draws); by default each fit's
        ``posterior_predictive`` variable of that name.
    var_name, convention
        As :func:`bayesij.loo_score`.
    groups : array_like or mapping, optional
        Leave one group out (as :func:`bayesij.loo_score`): each model's predictive of an
        observation is the one without its whole group, so the weights are those for
        predicting new groups.

    Returns
    -------
    pandas.Series
        ``weight`` per model (summing to one); ``attrs["score"]``: the mixture's mean LOO
        score at the weights (the CRPS negated, as :func:`bayesij.loo_score`), and
        ``attrs["single"]``: each model's own.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(0.0, 1.0, size=60)
    >>> fits, y_pred = {}, {}
    >>> for name, shift in (("low", -0.5), ("high", 0.5)):  # each biased, half a unit
    ...     mu = rng.normal(y.mean() + shift, 0.1, size=(2, 500, 1))
    ...     fits[name] = -0.5 * (y - mu) ** 2
    ...     y_pred[name] = rng.normal(mu, 1.0, size=(2, 500, 60))
    >>> weights = bayesij.score_weights(fits, y=y, y_pred=y_pred)
    >>> bool(abs(weights["low"] - 0.5) < 0.2)  # the mixture of the two is best
    True

    References
    ----------
    .. [1] Yao, Y., Vehtari, A., Simpson, D. and Gelman, A. (2018). Using stacking to
       average Bayesian predictive distributions. Bayesian Analysis 13(3), 917-1007.
    """
    if kind not in SCORES:
        raise fail("kind", repr(kind), f"one of {SCORES}")
    names, absolute, spread = mixture_terms(fits, y, y_pred, var_name, convention, groups)
    if kind == "scrps":
        _check_spread(spread, names)
    weights, score = score_stacking_weights(absolute, spread, kind)
    result = pd.Series(weights, index=pd.Index(names, name="model"), name="weight")
    result.attrs["score"] = score
    result.attrs["single"] = {
        name: mixture_score(absolute, spread, np.eye(len(names))[k], kind)
        for k, name in enumerate(names)
    }
    return result


def mixture_terms(fits: dict, y, y_pred, var_name, convention, groups=None):
    """The models' names, ``a_nk = E|X_k - y_n|`` (n, K) and ``B_nkl = E|X_k - X_l|``
    (n, K, K) under each model's LOO weights, from the fits and their predictive draws (as
    :func:`score_weights` reads them): every mixture's CRPS and SCRPS follow."""
    if not isinstance(fits, dict) or len(fits) < 2:
        raise fail("fits", type(fits).__name__, "a dict of two or more models' fits")
    y_pred = {} if y_pred is None else y_pred
    if not isinstance(y_pred, dict) or set(y_pred) - set(fits):
        raise fail(
            "y_pred", repr(type(y_pred).__name__), f"a dict keyed by models among {list(fits)}"
        )
    names = list(fits)
    draws = {
        name: draws_beside_log_lik(
            fits[name],
            predictions_or_fit(fits[name], y_pred.get(name), var_name, f"y_pred[{name!r}]"),
            f"y_pred[{name!r}]",
            var_name=var_name,
            convention=convention,
            groups=groups,
        )
        for name in names
    }
    n_obs = {d.matrix.shape[1] for d in draws.values()}
    if len(n_obs) != 1:
        raise fail("fits", f"models on {sorted(n_obs)} observations", "the same observations")
    observed = as_float_array(observed_or_fit(fits[names[0]], y, var_name), "y")
    if observed.shape != (n_obs.pop(),):
        raise fail("y", f"shape {observed.shape}", "one value per observation")
    check_finite(observed, "y")
    absolute, spread = _mixture_terms(draws, names, observed)
    return names, absolute, spread


def _check_spread(spread: np.ndarray, names: list) -> None:
    """Refuse SCRPS stacking with a model whose LOO predictive is a point mass at some
    observation (``E|X_k - X_k'| = 0``): its SCRPS there is undefined, and the optimiser
    would read the NaN as the best score."""
    own = np.einsum("nkk->nk", spread)
    point = [(name, int(np.sum(own[:, k] <= 0))) for k, name in enumerate(names)]
    point = [(name, count) for name, count in point if count]
    if point:
        name, count = point[0]
        raise fail(
            "kind",
            f"'scrps' with model {name!r} a point mass at {count} observation(s) (its SCRPS "
            "is undefined there)",
            "kind='crps', or models whose predictive draws vary at every observation",
        )


def _mixture_terms(draws: dict, names: list, observed: np.ndarray):
    """``a_nk = E|X_k - y_n|`` (n, K) and ``B_nkl = E|X_k - X_l|`` (n, K, K) under each
    model's LOO weights."""
    n_obs, n_models = observed.size, len(names)
    absolute = np.empty((n_obs, n_models))
    spread = np.empty((n_obs, n_models, n_models))
    largest = max(d.matrix.shape[0] for d in draws.values())
    for chunk in obs_chunks(n_obs, 8 * n_models * largest):
        parts = []
        for k, name in enumerate(names):
            weights, _ = chunk_loo_weights(draws[name], chunk)
            values = draws[name].values[:, chunk]
            absolute[chunk, k] = np.sum(weights * np.abs(values - observed[chunk]), axis=0)
            parts.append((values, weights))
        for k in range(n_models):
            for j in range(k, n_models):
                cross = weighted_mean_difference(*parts[k], *parts[j])
                spread[chunk, k, j] = spread[chunk, j, k] = cross
    return absolute, spread
