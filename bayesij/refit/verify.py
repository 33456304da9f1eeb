"""Verify an influential set: refit without it and record what really happens."""

from __future__ import annotations

import numpy as np

from bayesij.array.checks import fail
from bayesij.data.fit import read
from bayesij.refit.backends import check_backend
from bayesij.refit.campaign import Task, run_campaign
from bayesij.stats.amip import AmipResult

__all__ = ["verify"]


def verify(
    result: AmipResult,
    backend,
    *,
    fit=None,
    store=None,
    executor="sequential",
    progress: bool = True,
    timeout: float | None = None,
) -> AmipResult:
    """Refit without the set of an AMIP result and record the refit value.

    Parameters
    ----------
    result : AmipResult
        From :func:`bayesij.amip`.
    backend : refit backend
        Refits the same model under observation weights (:mod:`bayesij.refit.backends`).
    fit : optional
        For a result over a hierarchy's groups (an audit's, whose units are the groups of
        its fit): that fit (anything :func:`bayesij.read` reads, with its grouping), whose
        observations of the set's groups the refit leaves out. Not needed where the
        result's units are the backend's observations.
    store, executor, progress, timeout
        As the other experiments (:func:`bayesij.refit.run_campaign`); one refit.

    Returns
    -------
    AmipResult
        A copy whose ``verification`` holds the refit mean and sd of the quantity, the
        metric's refit value and change, and whether the target is really reached.

    References
    ----------
    .. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
       robustness metric: when can dropping a little data make a big difference?
       arXiv:2011.14999 (refitting without the set gives an exact lower bound on the
       largest change).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> found = bayesij.amip(post, "beta[2]", "sign", method="linear")
    >>> checked = refit.verify(found, backend, progress=False)
    >>> checked.verification is not None  # the refit without the set, recorded
    True
    """
    if not isinstance(result, AmipResult) or result.kept is None:
        raise fail("result", f"a {type(result).__name__}", "an AmipResult from bayesij.amip")
    kept = _kept_observations(result, fit, backend)
    check_backend(backend, kept.size, "the fit the AMIP result was computed on")
    task = Task("verify", kept)
    records = run_campaign(
        [task],
        backend,
        # the fit the result was computed from: its value and predicted curve
        reference=(result.original_value, result.curve.select_dtypes("number").to_numpy(float)),
        experiment="verify",
        settings={"quantity": result.quantity, "ids": [str(i) for i in result.drop_ids]},
        store=store,
        executor=executor,
        progress=progress,
        timeout=timeout,
    )
    record = records.get("verify")
    if record is None or record["status"] != "ok":
        reason = record["reason"] if record else "no record"
        raise RuntimeError(f"backend: the refit without the set failed ({reason}).")
    if result.quantity not in record["quantities"]:
        raise fail(
            "backend",
            f"a refit without the quantity {result.quantity!r}",
            "refits reporting the quantity of the AMIP result",
        )
    column = record["quantities"].index(result.quantity)
    return result.with_refit(float(record["mean"][column]), float(record["sd"][column]))


def _kept_observations(result: AmipResult, fit, backend) -> np.ndarray:
    """Which observations a refit without ``result``'s set keeps (bool, (n_obs,)): its own
    mask where it is over observations (a result over groups of observations read as
    such keeps their observations' mask), else, for a result over a hierarchy's groups
    (an audit's over their integrated terms), the observations of ``fit`` outside the
    set's groups."""
    n_obs = getattr(backend, "n_obs", None)
    if fit is None:
        if result.unit != "obs" and n_obs is not None and n_obs != result.kept.size:
            raise fail(
                "fit",
                f"None for an AMIP result over {result.kept.size} {result.unit}s with a "
                f"backend of {n_obs} observations",
                "the fit whose groups are the result's units: the refit leaves out the "
                "observations of the set's groups",
            )
        return result.kept
    units = read(fit, argument="fit").units
    labels = None if units.labels is None else np.asarray(units.labels).astype(str)
    if labels is None or result.kept.size == labels.size:
        return result.kept  # over the fit's observations already
    dropped = np.asarray([str(i) for i in result.drop_ids])
    missing = np.setdiff1d(dropped, labels)
    n_groups = np.unique(labels).size
    if missing.size or result.kept.size != n_groups:
        raise fail(
            "fit",
            f"a fit of {n_groups} {units.name}s"
            + (f" without {missing[:3].tolist()}" if missing.size else ""),
            f"the fit whose {result.kept.size} groups the result's set is of",
        )
    return ~np.isin(labels, dropped)
