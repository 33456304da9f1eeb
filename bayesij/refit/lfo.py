"""Leave-future-out cross-validation: exact (a refit at every origin, as a resumable
campaign), PSIS (reweighting the latest fit, refitting where k-hat is too high) and IJ."""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import check_real, fail
from bayesij.array.lfo import lfo_origins
from bayesij.data.fit import read
from bayesij.refit.campaign import Task, run_campaign
from bayesij.stats.lfo import (
    METHODS,
    NEEDS_REFITS,
    LfoResult,
    lfo_from_draws,
    lfo_result,
    lfo_table,
)

__all__ = ["lfo"]


def lfo(
    data,
    backend=None,
    *,
    var_name=None,
    min_train: int,
    horizon: int = 1,
    k_threshold: float = 0.7,
    method: str = "psis",
    weight_derivative=None,
    store=None,
    executor=None,
    progress: bool = True,
    timeout: float | None = None,
) -> LfoResult:
    """M-step-ahead leave-future-out cross-validation of a time-series model.

    The log-likelihood columns of ``data`` must be the conditional terms
    ``l_t = log p(y_t | y_<t, theta)`` in time order (an AR(p) model's, or the one-step
    predictive terms of a state-space model), so that the joint predictive density of the
    next ``M`` observations given the past is ``exp(sum l_t)`` over the block.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree or array_like
        Draws of the posterior given all ``T`` observations.
    backend : refit backend, optional
        Fits the model under observation weights (1 for the past, 0 for the future);
        needed for ``"exact"`` and ``"psis"`` (an exact fit at the first origin, and a refit
        wherever k-hat passes ``k_threshold``); optional for ``"psis-backward"``.
    min_train : int
        The first origin: at least this many observations form the past.
    horizon : int, default 1
        ``M``, the number of future observations predicted jointly at each origin.
    k_threshold : float, default 0.7
    method : {"psis", "exact", "psis-backward", "ij"}, default "psis"
        ``"exact"``: a refit at each origin ``i = min_train .. T - M`` with weights 1 up to
        ``i`` and 0 after, run as a campaign (``store``, ``executor`` as
        :func:`bayesij.refit.run_campaign`: resumable, on processes or Dask).
        ``"psis"``: Bürkner, Gabry and Vehtari's algorithm: the model is fitted exactly at
        the first origin; each later origin reweights the draws of the latest fit by
        ``exp(sum l_t)`` over the observations added since, Pareto-smoothed, and where
        k-hat passes ``k_threshold`` the model is refitted there.
        ``"psis-backward"``: the full-data draws reweighted by ``exp(-sum_{future} l_t)``
        from the last origin back (refitting where k-hat passes the threshold when a
        backend is given): no refit is needed, but the proposal is narrower than every
        target and the estimate is optimistic (see :func:`bayesij.stats.lfo.lfo_from_draws`).
        ``"ij"``: the first-order approximation from the full-data draws, with a linearity
        check against PSIS.
    var_name : str, optional
        The conditional log-likelihood variable of an InferenceData or DataTree.
    weight_derivative : str, Posterior or array_like, optional
        IJ only: ``d log p(y; theta, w) / d w_t`` at ``w = 1`` per draw and time point, for
        models whose weights act inside the likelihood (an HMM; see
        :func:`bayesij.stats.lfo.lfo_from_draws`). Default: the conditional terms.
    store, executor, progress, timeout
        For the exact campaign (as :func:`bayesij.refit.run_campaign`). To run again the
        refits a store records as failed, pass
        ``store=bayesij.refit.CampaignStore(path, retry_failed=True)``.

    Returns
    -------
    LfoResult

    References
    ----------
    .. [1] Bürkner, P.-C., Gabry, J. and Vehtari, A. (2020). Approximate leave-future-out
       cross-validation for Bayesian time series models. J. Stat. Comput. Simul. 90(14).
    .. [2] Ghosh et al. (2020), Approximate cross-validation for structured models, NeurIPS
       33, Proposition 3: for chain-structured models, leaving the future out by
       weighting its terms is exact.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij.refit import ConjugateNormalBackend
    >>> rng = np.random.default_rng(1)
    >>> y = np.zeros(60)
    >>> for t in range(1, 60):
    ...     y[t] = 0.6 * y[t - 1] + rng.normal()
    >>> backend = ConjugateNormalBackend(y[:-1, None], y[1:], sigma=1.0, draws=2000)
    >>> post = backend.fit(np.ones(59))  # AR(1): rows are y_t given y_{t-1}
    >>> result = bayesij.lfo(post, backend, min_train=20)
    >>> result.n_refits < len(result.pointwise)
    True
    """
    if method not in METHODS:
        raise fail("method", repr(method), f"one of {METHODS}")
    if backend is not None and not callable(getattr(backend, "fit", None)):
        raise fail("backend", f"a {type(backend).__name__}", "a refit backend (fit(weights))")
    post = read(data, var_name=var_name).in_memory("lfo")
    origins = lfo_origins(post.n_obs, min_train, horizon)  # checks both
    k_threshold = check_real(k_threshold, "k_threshold", 0.0, low_open=True)
    if method == "psis" and backend is None:
        raise fail("backend", "None", NEEDS_REFITS.replace("a way to refit", "a refit backend"))
    if isinstance(weight_derivative, str):  # a variable of data's log-likelihood group
        try:
            weight_derivative = read(data, var_name=weight_derivative).posterior()
        except ValueError as error:
            raise fail(
                "weight_derivative",
                repr(weight_derivative),
                f"a log-likelihood variable of data ({error})",
            ) from None
    if method != "exact":
        refit = None
        if backend is not None:

            def refit(i: int):
                return backend.fit(_past_weights(post.n_obs, i))

        return lfo_from_draws(
            post,
            min_train=min_train,
            horizon=horizon,
            method=method,
            k_threshold=k_threshold,
            refit=refit,
            weight_derivative=weight_derivative,
        )
    if backend is None:
        raise fail("backend", "None", "a refit backend for method='exact'")
    if weight_derivative is not None:
        raise fail(
            "weight_derivative", "a value with method='exact'", "weight_derivative only with 'ij'"
        )
    tasks = [
        Task(f"lfo-{i}", _past_weights(post.n_obs, int(i)), tuple(range(i, i + horizon)))
        for i in origins
    ]
    records = run_campaign(
        tasks,
        backend,
        reference=post,
        experiment="lfo",
        settings={"min_train": int(min_train), "horizon": int(horizon)},
        store=store,
        executor=executor,
        progress=progress,
        timeout=timeout,
    )
    failed = [task.key for task in tasks if records[task.key]["status"] != "ok"]
    if failed:
        raise RuntimeError(
            f"lfo: {len(failed)} of {len(tasks)} exact refits failed ({failed[:5]}; reasons in "
            "the campaign store); rerun with store=CampaignStore(path, retry_failed=True) "
            "after fixing the cause, or use method='psis'."
        )
    elpd = np.array([records[task.key]["lpd_joint"] for task in tasks])
    mcse = np.array([records[task.key]["lpd_joint_mcse"] for task in tasks])
    no_k, refitted = np.full(origins.size, np.nan), np.ones(origins.size, bool)
    frame = lfo_table(post, origins, (elpd, mcse), no_k, refitted)
    frame["exact_khat"] = [records[task.key].get("lpd_joint_khat", np.nan) for task in tasks]
    return lfo_result("exact", int(horizon), frame, len(tasks), float(k_threshold))


def _past_weights(n_times: int, origin: int) -> np.ndarray:
    """Weights 1 for the first ``origin`` observations (the past), 0 for the future."""
    weights = np.zeros(n_times)
    weights[:origin] = 1.0
    return weights
