"""Exact checks: bootstrap, leave-one-out, K-fold and drop-a-set refits against the
approximations bayesij computes from the original draws.

Every experiment plans its refits as a campaign (see :mod:`bayesij.refit.campaign`): with
``store=`` a directory, finished refits are written as they finish and calling the
experiment again with the same arguments resumes it. Every experiment takes the campaign's
``store``, ``executor`` (default: local worker processes; ``"sequential"``, a number of
processes, an Executor or Dask), ``retry_failed`` (run recorded failures again) and
``timeout`` (seconds a refit may run before it is stopped and recorded as failed); see
:func:`bayesij.refit.campaign.run_campaign`.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from bayesij.array.checks import check_positive_int, check_replicates, check_seed, fail
from bayesij.array.kfold import fold_elpd, subset_elpd
from bayesij.array.linearity import leave_out_changes
from bayesij.array.numeric import elpd_standard_error
from bayesij.array.psis import pareto_k_threshold
from bayesij.data.fit import read
from bayesij.data.posterior import Posterior, label_codes
from bayesij.refit.backends import check_backend
from bayesij.refit.campaign import Task, run_campaign
from bayesij.refit.report import RefitReport, comparison_rows
from bayesij.refit.scheduler import LooStopRule, exact_lpd, loo_priorities
from bayesij.refit.splits import kfold_split_grouped, kfold_split_random, label_vector
from bayesij.refit.summary import summarise
from bayesij.stats.elpd import KfoldResult
from bayesij.stats.jackknife import ij_covariance
from bayesij.stats.loo import loo_methods

__all__ = ["bootstrap", "loo", "kfold", "drop"]


def _checked(post, backend) -> Posterior:
    """The fit refitted (anything :func:`bayesij.read` accepts) as its checked container,
    and the backend checked against it."""
    post = read(post, argument="post").posterior()
    check_backend(backend, post.n_obs, "post")
    return post


def _failures(records: dict) -> pd.DataFrame:
    failed = [(key, r["reason"]) for key, r in records.items() if r["status"] != "ok"]
    return pd.DataFrame(failed, columns=["key", "reason"])


def _ok(records: dict) -> dict:
    return {key: r for key, r in records.items() if r["status"] == "ok"}


def _check_some_finished(experiment: str, records: dict) -> None:
    """A campaign none of whose refits finished has nothing to report: say why (the first
    reasons) instead of failing on an empty table."""
    if records and not _ok(records):
        reasons = _failures(records)["reason"].drop_duplicates().tolist()
        raise RuntimeError(
            f"{experiment}: all {len(records)} refits failed (reasons: {reasons[:3]}); fix "
            "the cause and rerun (with a store=, retry_failed=True runs only the failed ones)."
        )


def _quantity_columns(record: dict, names: list[str]) -> list[int]:
    missing = [name for name in names if name not in record["quantities"]]
    if missing:
        raise fail(
            "backend",
            f"refits without the quantities {missing[:5]}",
            "refits reporting every quantity of post",
        )
    return [record["quantities"].index(name) for name in names]


def _campaign(post, tasks, backend, experiment, settings, store, executor, progress, **options):
    return run_campaign(
        tasks,
        backend,
        reference=post,
        experiment=experiment,
        settings=settings,
        store=store,
        executor=executor,
        progress=progress,
        **options,
    )


def _held_out_sums(tasks, records, grouped: bool = False):
    """Finished folds (positions in ``tasks``), the exact ``sum log p(x_n | x_-F)`` of each
    (with ``grouped``: ``sum_g log p(x_g | x_-F)`` over its groups, jointly) and its Monte
    Carlo SE, from the refits' lpd."""
    ok = _ok(records)
    done = [k for k, task in enumerate(tasks) if task.key in ok]
    score = "lpd_groups" if grouped else "lpd"
    exact = np.array([np.sum(ok[tasks[k].key][score]) for k in done])
    exact_se = np.array(
        [np.sqrt(np.sum(np.square(ok[tasks[k].key][f"{score}_mcse"]))) for k in done]
    )
    return done, exact, exact_se


# --------------------------------------------------------------------------- bootstrap
def bootstrap(
    post,
    backend,
    B: int,
    seed: int = 0,
    store=None,
    executor=None,
    *,
    quantities=None,
    groups=None,
    progress: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
) -> RefitReport:
    """Exact bootstrap of posterior means against the IJ covariance (and the posterior).

    ``B`` refits under multinomial bootstrap counts of the units (observations, or the
    groups of ``groups``: the *weight* bootstrap over groups, a group drawn ``k`` times
    counting ``k`` times with its one set of local parameters, which the IJ over groups
    approximates; :func:`bayesij.refit.cluster_bootstrap` draws new groups instead, each
    copy with its own). The exact bootstrap variance of each
    posterior mean is the variance of the refit means less the mean squared Monte Carlo
    error of those means (the noise each refit adds); its standard error is the sampling
    error over ``B`` replicates. It is compared with the noise-corrected IJ variance (with
    its block-bootstrap MCSE) and the posterior variance.

    Returns
    -------
    RefitReport
        Rows per quantity for methods ``'ij'`` and ``'posterior'``.

    References
    ----------
    .. [1] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
       variance. arXiv:2305.06466.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> report = refit.bootstrap(post, backend, B=20, executor="sequential", progress=False)
    >>> report.n_refits, sorted(report.comparisons["method"].unique())
    (20, ['ij', 'posterior'])
    """
    post = _checked(post, backend)
    B = check_replicates(B, "B", minimum=2)
    seed = check_seed(seed)
    if quantities is not None:
        post = post.select(quantities)
    codes, units = post.unit_codes(groups)
    tasks = bootstrap_tasks("boot", codes, units.size, B, seed)
    settings = {"B": B, "seed": seed, "units": int(units.size)}
    records = _campaign(
        post,
        tasks,
        backend,
        "bootstrap",
        settings,
        store,
        executor,
        progress,
        retry_failed=retry_failed,
        timeout=timeout,
    )
    ij = ij_covariance(post, groups=groups)
    rows = {"ij": ij, "posterior": None}
    return bootstrap_report("bootstrap", records, post, rows, B, {"units": int(units.size)})


def bootstrap_tasks(prefix: str, codes: np.ndarray, n_units: int, B: int, seed: int) -> list:
    """``B`` refits under multinomial bootstrap counts of ``n_units`` units, each
    observation weighted by its unit's count (``codes``: the unit of each observation)."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_units, np.full(n_units, 1 / n_units), size=B)
    return [Task(f"{prefix}-{b:05d}", counts[b][codes].astype(float)) for b in range(B)]


def bootstrap_report(experiment, records, post, rows: dict, B: int, summary: dict):
    """The exact bootstrap variance of each quantity's posterior mean against each
    approximation of ``rows`` (method -> IJCovariance, its noise-corrected variance and
    MCSE; None: the posterior variance of the first IJ's draws)."""
    ok = list(_ok(records).values())
    names = list(post.quantity_names)
    exact = _bootstrap_variance(ok, names)
    posterior = next(ij for ij in rows.values() if ij is not None).posterior_variance
    frames = [
        comparison_rows({"quantity": names}, method, posterior.to_numpy(), np.nan, *exact)
        if ij is None
        else comparison_rows(
            {"quantity": names},
            method,
            ij.variance_corrected.to_numpy(),
            ij.mcse.to_numpy(),
            *exact,
        )
        for method, ij in rows.items()
    ]
    return RefitReport(
        experiment,
        pd.concat(frames, ignore_index=True),
        _failures(records),
        B,
        len(ok),
        {"replicates used": len(ok), **summary},
    )


def _bootstrap_variance(records: list[dict], names: list[str]):
    """Noise-corrected variance of refit means and its standard error over replicates."""
    if len(records) < 2:
        return np.full(len(names), np.nan), np.full(len(names), np.nan)
    columns = _quantity_columns(records[0], names)
    means = np.array([np.asarray(r["mean"])[columns] for r in records])
    noise = np.mean([np.asarray(r["mcse"])[columns] ** 2 for r in records], axis=0)
    deviations = (means - means.mean(axis=0)) ** 2
    n = len(records)
    variance = deviations.sum(axis=0) / (n - 1) - noise
    return variance, deviations.std(axis=0, ddof=1) / np.sqrt(n)


# --------------------------------------------------------------------------- leave-one-out
class LooUnits(NamedTuple):
    """What a LOO or K-fold campaign leaves out: each unit's name, the unit (code) of each
    observation, whether the units are groups (scored by their joint predictive density),
    the group labels (None: observations) and each unit's log-likelihood (n_chains,
    n_draws, n_units), :meth:`Posterior.units`'s."""

    names: list
    codes: np.ndarray
    grouped: bool
    labels: object
    log_lik: np.ndarray

    def key(self, u: int) -> str:
        return f"{'logo' if self.grouped else 'loo'}-{self.names[u]}"

    def members(self, u: int) -> np.ndarray:
        """The positions of unit ``u``'s observations."""
        return np.flatnonzero(self.codes == u) if self.grouped else np.array([u])


def _loo_units(fit, post: Posterior, groups) -> LooUnits:
    """Observations (``groups`` None) or the groups ``groups`` names: labels, a mapping, or
    the name of the fit's grouping (``"county"``)."""
    labels = None
    if groups is not None and groups is not False:
        labels = fit.units.labels if fit.units.labels is not None else groups
    if labels is None:
        observations = np.arange(post.n_obs)
        return LooUnits(list(post.obs_names), observations, False, None, post.log_lik.values)
    log_lik, unique, codes = post.unit_log_lik(labels)
    return LooUnits(unique.values.tolist(), codes, True, labels, log_lik)


def _loo_approximations(unit_log_lik: np.ndarray) -> dict:
    """PSIS-, IJ- and cumulant-LOO of the units' (n_chains, n_draws, n_units)
    log-likelihood, from one smoothing pass."""
    with warnings.catch_warnings():  # k-hat is reported in the comparison, not warned
        warnings.simplefilter("ignore")
        return loo_methods(unit_log_lik, ("psis", "ij", "cumulant"))


def _loo_points(post, units: LooUnits, points, approx, budget, tolerance):
    """Units to refit (positions in ``units``), in order, and the stopping rule or None."""
    if isinstance(points, str) and points == "all":
        return np.arange(len(units.names)), None
    if isinstance(points, str) and points == "auto":
        budget = check_positive_int(budget, "budget")
        psis = approx["psis"].pointwise
        unit_log_lik = units.log_lik.reshape(post.n_draws, -1)
        priorities = loo_priorities(
            psis["elpd_loo"],
            approx["ij"].pointwise["elpd_loo"],
            psis["mcse_elpd_loo"],
            psis["pareto_k"],
            unit_log_lik.var(axis=0, ddof=1, dtype=np.float64),
            pareto_k_threshold(post.n_draws),
        )
        chosen = priorities.order[:budget]
        tolerance = 0.1 * approx["psis"].se if tolerance is None else tolerance
        keys = [units.key(u) for u in chosen]
        rule = LooStopRule(
            priorities, psis["elpd_loo"], keys, chosen, tolerance, joint=units.grouped
        )
        return chosen, rule
    return _positions(units.names, points, "points", units.grouped), None


def _positions(names: list, labels, argument: str, grouped: bool = False) -> np.ndarray:
    index = {name: i for i, name in enumerate(names)}
    labels = list(np.atleast_1d(np.asarray(labels, dtype=object)))
    unknown = [label for label in labels if label not in index]
    what = "group labels (groups=)" if grouped else "observation ids of post"
    if unknown or not labels:
        hint = "" if grouped else " (groups= to leave out whole groups)"
        raise fail(
            argument,
            f"labels {unknown[:5]} not among the {what}" if unknown else "none",
            f"'all', 'auto' or a list of {what}{hint}",
        )
    positions = np.array([index[label] for label in labels])
    repeated = [labels[i] for i in range(len(labels)) if positions[i] in positions[:i]]
    if repeated:
        raise fail(argument, f"repeated ids {repeated[:5]}", "each id once")
    return positions


def loo(
    post,
    backend,
    points="auto",
    store=None,
    executor=None,
    *,
    groups=None,
    budget: int = 10,
    tolerance: float | None = None,
    progress: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
) -> RefitReport:
    """Exact leave-one-out (or leave-one-group-out) refits against PSIS-, IJ- and
    cumulant-LOO.

    Parameters
    ----------
    post : Posterior, InferenceData or DataTree
        The fit (anything :func:`bayesij.read` accepts).
    backend : refit backend
    points : "auto", "all" or list of ids, default "auto"
        Observation ids, or group labels with ``groups``. "auto": the scheduler
        (:mod:`bayesij.refit.scheduler`) refits up to ``budget`` units in order of
        estimated PSIS error and stops early once the estimated remaining error is below
        ``tolerance``.
    groups : array_like, mapping or str, optional
        Leave whole groups out (labels, one per observation; or the name of the fit's
        grouping, ``"county"``): each refit gives the group's observations weight 0 and is
        scored by their *joint* log predictive density ``log mean_s prod_n p(y_n |
        theta_s)``, with the group's own effects drawn from their population distribution
        in the refit (a model that keeps the group's effect as a parameter without its data
        does), which is what leave-one-group-out PSIS (``bayesij.loo(groups=)``) estimates.
    store, executor, retry_failed, timeout : see :func:`bayesij.refit.campaign.run_campaign`
    budget : int, default 10
    tolerance : float, optional
        In elpd units; default a tenth of the SE of elpd_loo.

    Returns
    -------
    RefitReport
        Rows per refitted unit for methods ``'psis'``, ``'ij'``, ``'cumulant'`` (with
        ``pareto_k``); ``summary`` has elpd_loo by PSIS and with the refitted units' exact
        values put in (as R loo's ``reloo``).

    Examples
    --------
    Exact LOO of a normal mean refitted in closed form (the conjugate backend):

    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> y = np.random.default_rng(0).normal(size=20)
    >>> backend = refit.ConjugateNormalBackend(np.ones((20, 1)), y, sigma=1.0, draws=2000)
    >>> fit = backend.fit(np.ones(20))
    >>> report = refit.loo(fit, backend, points=[fit.obs_names[0]], progress=False)
    >>> report.n_refits
    1
    """
    fit = read(post, groups=groups, argument="post")
    post = _checked(fit, backend)
    units = _loo_units(fit, post, groups)
    approx = _loo_approximations(units.log_lik)
    positions, rule = _loo_points(post, units, points, approx, budget, tolerance)
    tasks = []
    for u in positions:
        members = units.members(u)
        weights = np.ones(post.n_obs)
        weights[members] = 0.0
        tasks.append(Task(units.key(u), weights, tuple(members.tolist())))
    settings = {"points": [str(units.names[u]) for u in positions], "groups": units.grouped}
    records = _campaign(
        post,
        tasks,
        backend,
        "loo",
        settings,
        store,
        executor,
        progress,
        stop=rule,
        retry_failed=retry_failed,
        timeout=timeout,
    )
    ok = _ok(records)
    done = np.array([u for u, task in zip(positions, tasks, strict=True) if task.key in ok], int)
    score = "lpd_joint" if units.grouped else "lpd"
    exact = np.array([exact_lpd(ok[units.key(u)], score) for u in done])
    exact_se = np.array([exact_lpd(ok[units.key(u)], f"{score}_mcse") for u in done])
    exact_k = np.array([exact_lpd(ok[units.key(u)], f"{score}_khat") for u in done])
    names = [units.names[u] for u in done]
    psis = approx["psis"].pointwise
    k = psis["pareto_k"].to_numpy()[done]
    frames = []
    for method, result in approx.items():
        values = result.pointwise["elpd_loo"].to_numpy()[done]
        se = result.pointwise["mcse_elpd_loo"].to_numpy()[done]
        row = {"group" if units.grouped else "obs": names, "pareto_k": k, "exact_khat": exact_k}
        frames.append(comparison_rows(row, method, values, se, exact, exact_se))
    corrected = psis["elpd_loo"].to_numpy().copy()
    corrected[done] = exact
    summary = {
        "elpd_loo (psis)": approx["psis"].elpd,
        "elpd_loo with exact refits": float(corrected.sum()),
        "points refitted": len(done),
        "refits with k-hat above 0.7 (their exact value unreliable)": int(np.sum(exact_k > 0.7)),
    }
    if rule is not None:
        rule(records)  # brings rule.remaining up to date with every finished refit
        summary["estimated remaining error"] = rule.remaining
        summary["stopped early"] = len(records) < len(tasks)
    return RefitReport(
        "loo",
        pd.concat(frames, ignore_index=True),
        _failures(records),
        len(tasks),
        len(done),
        summary,
    )


# --------------------------------------------------------------------------- K-fold
def kfold(
    post,
    backend,
    K: int = 10,
    folds=None,
    store=None,
    executor=None,
    *,
    groups=None,
    seed: int = 0,
    progress: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
) -> RefitReport:
    """Exact K-fold cross-validation against its PSIS and IJ approximations.

    Each fold is refitted without its observations; ``log p(x_n | x_-F)`` of each held-out
    observation is the log mean of its likelihood over the refit draws, summed per fold
    (as R loo's ``kfold``). Approximations from the original draws: PSIS with weights
    ``exp(-sum_{m in F} l_m)`` and the IJ (:func:`bayesij.array.kfold.fold_elpd`).

    Parameters
    ----------
    K : int, default 10
        Number of folds when ``folds`` is not given (random folds,
        :func:`kfold_split_random` with ``seed``).
    folds : array_like of shape (n_obs,), optional
        The fold label of every observation (from the ``kfold_split_*`` functions or
        your own).
    groups : array_like, mapping or str, optional
        Cross-validate whole groups (labels, one per observation, or the name of the fit's
        grouping, ``"county"``): folds of whole groups (:func:`kfold_split_grouped` when
        ``folds`` is not given; given folds must not split a group), each held-out group
        scored by its *joint* log predictive density ``log p(x_g | x_-F)``, what
        leave-one-group-out PSIS estimates, and the approximations likewise from the
        groups' summed log-likelihoods.

    Returns
    -------
    RefitReport
        Rows per fold for methods ``'psis'`` and ``'ij'`` (with the fold's ``pareto_k``);
        ``summary`` has the exact and approximate elpd_kfold totals; ``result`` the exact
        pointwise values (per observation, or per group with ``groups``).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> report = refit.kfold(post, backend, K=5, executor="sequential", progress=False)
    >>> report.summary["folds"], report.result.n_units
    (5, 30)
    """
    fit = read(post, groups=groups, argument="post")
    post = _checked(fit, backend)
    units = _loo_units(fit, post, groups)
    names, codes, unit_folds = _fold_codes(post, units, K, folds, seed)
    tasks = []
    for k, name in enumerate(names):
        points = np.flatnonzero(codes == k)
        grouped = tuple(units.codes[points].tolist()) if units.grouped else ()
        tasks.append(
            Task(f"fold-{name}", (codes != k).astype(float), tuple(points.tolist()), grouped)
        )
    records = _campaign(
        post,
        tasks,
        backend,
        "kfold",
        {"folds": codes.tolist(), "groups": units.grouped},
        store,
        executor,
        progress,
        retry_failed=retry_failed,
        timeout=timeout,
    )
    _check_some_finished("kfold", records)
    done, exact, exact_se = _held_out_sums(tasks, records, units.grouped)
    approx = fold_elpd(units.log_lik, unit_folds)
    index = {"fold": names[done], "pareto_k": approx.pareto_k[done]}
    frames = [
        comparison_rows(
            index,
            method,
            np.bincount(unit_folds, values, minlength=names.size)[done],
            np.nan,
            exact,
            exact_se,
        )
        for method, values in (("psis", approx.psis), ("ij", approx.ij))
    ]
    summary = {
        "elpd_kfold (exact)": float(exact.sum()),
        "elpd_kfold (psis)": float(approx.psis.sum()),
        "elpd_kfold (ij)": float(approx.ij.sum()),
        "folds": int(names.size),
    }
    return RefitReport(
        "kfold",
        pd.concat(frames, ignore_index=True),
        _failures(records),
        len(tasks),
        len(done),
        summary,
        result=_kfold_result(tasks, records, names, units),
    )


def _fold_codes(post, units: LooUnits, K: int, folds, seed: int):
    """The folds' names, each observation's fold code and each unit's, whole groups kept
    together."""
    if folds is None:
        seed = check_seed(seed)
        if units.grouped:
            names = np.asarray(units.names, dtype=object)
            labels = kfold_split_grouped(names[units.codes], K, seed)
        else:
            labels = kfold_split_random(post.n_obs, K, seed)
    else:
        labels = label_vector(folds, "folds", "fold")
    if labels.shape != (post.n_obs,):
        raise fail(
            "folds",
            f"shape {labels.shape}",
            f"a fold label for each of the {post.n_obs} observations",
        )
    names, codes = label_codes(labels, sort=True)
    if names.size < 2:
        raise fail("folds", f"{names.size} fold", "at least 2 folds")
    n_units = len(units.names)
    lowest, highest = np.full(n_units, names.size), np.full(n_units, -1)
    np.minimum.at(lowest, units.codes, codes)
    np.maximum.at(highest, units.codes, codes)
    split = np.flatnonzero(lowest != highest)
    if split.size:
        raise fail(
            "folds",
            f"groups split across folds ({[units.names[u] for u in split[:5]]})",
            "each group in one fold (refit.kfold_split_grouped)",
        )
    return names, codes, lowest


def _kfold_result(tasks, records, names, units: LooUnits) -> KfoldResult:
    """The exact pointwise elpd of the units (observations, or groups jointly) whose
    fold's refit finished."""
    ok = _ok(records)
    score = "lpd_groups" if units.grouped else "lpd"
    rows = []
    for k, task in enumerate(tasks):
        if task.key not in ok:
            continue
        record = ok[task.key]
        held = list(dict.fromkeys(task.point_groups)) if units.grouped else list(task.points)
        khats = record.get(f"{score}_khat", [np.nan] * len(held))  # older records: none
        values = zip(held, record[score], record[f"{score}_mcse"], khats, strict=True)
        for unit, lpd, mcse, khat in values:
            rows.append(
                {
                    "group" if units.grouped else "obs": units.names[unit],
                    "elpd_kfold": lpd,
                    "mcse": mcse,
                    "exact_khat": khat,
                    "fold": names[k],
                    "position": unit,
                }
            )
    frame = pd.DataFrame(rows).sort_values("position")
    # p_kfold = lpd - elpd_kfold, lpd from the full fit (as R loo's kfold objects carry it).
    flat = units.log_lik.reshape(-1, len(units.names))[:, frame["position"].to_numpy()]
    lpd = logsumexp(flat, axis=0) - np.log(flat.shape[0])
    frame.insert(1, "p_kfold", lpd - frame["elpd_kfold"].to_numpy())
    pointwise = frame.drop(columns="position").set_index(frame.columns[0])
    values = pointwise["elpd_kfold"].to_numpy()
    return KfoldResult(
        pointwise=pointwise,
        elpd=float(values.sum()),
        se=elpd_standard_error(values, 1),
        n_folds=len(tasks),
        n_refits=len(ok),
        ddof=1,
        n_draws=int(next(iter(ok.values()))["n_draws"]) if ok else 0,
    )


# --------------------------------------------------------------------------- LWCV
def lwcv(
    post,
    backend,
    folds,
    store=None,
    executor=None,
    *,
    progress: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
) -> RefitReport:
    """Exact leave-within-series-out CV against its PSIS and IJ approximations.

    Each fold (a set of time points, e.g. from :func:`lwcv_split`; folds may overlap) is
    refitted with the weights of its points set to 0 (the weighting scheme (A) of Ghosh et
    al. 2020: for a model whose log-likelihood does not split into terms, such as an HMM,
    the weights multiply the emission terms inside the likelihood), and ``sum_{t in O} log
    p(x_t | x_-O)`` is compared with PSIS and IJ from the original draws
    (:func:`bayesij.array.kfold.subset_elpd`).

    Returns
    -------
    RefitReport
        Rows per fold for methods ``'psis'`` and ``'ij'`` (with ``pareto_k``); ``summary``
        has the totals and the mean relative error ``|approx - exact| / |exact|`` of each
        method (over folds where it is defined: the IJ is NaN where the first-order
        density is not positive), the figure Ghosh et al. (2020) report.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> folds = refit.lwcv_split(30, 0.1, n_folds=3)  # three sets of 3 time points
    >>> report = refit.lwcv(post, backend, folds, executor="sequential", progress=False)
    >>> report.n_refits
    3
    """
    post = _checked(post, backend)
    if isinstance(folds, (str, bytes)) or not hasattr(folds, "__iter__"):
        raise fail("folds", repr(folds), "a list of arrays of 0-based time points (lwcv_split)")
    subsets = [np.asarray(fold) for fold in folds]
    approx = subset_elpd(post.log_lik.values, subsets, argument="folds")
    tasks = []
    for j, subset in enumerate(subsets):
        weights = np.ones(post.n_obs)
        weights[subset] = 0.0
        tasks.append(Task(f"lwcv-{j}", weights, tuple(int(t) for t in subset)))
    settings = {"folds": [[int(t) for t in subset] for subset in subsets]}
    records = _campaign(
        post,
        tasks,
        backend,
        "lwcv",
        settings,
        store,
        executor,
        progress,
        retry_failed=retry_failed,
        timeout=timeout,
    )
    done, exact, exact_se = _held_out_sums(tasks, records)
    index = {"fold": np.array(done), "pareto_k": approx.pareto_k[done]}
    frames = [
        comparison_rows(index, method, values[done], np.nan, exact, exact_se)
        for method, values in (("psis", approx.psis), ("ij", approx.ij))
    ]
    summary = {
        "elpd_lwcv (exact)": float(exact.sum()),
        "elpd_lwcv (psis)": float(approx.psis[done].sum()),
        "elpd_lwcv (ij)": float(approx.ij[done].sum()),
        "mean relative error (psis)": _mean_relative_error(approx.psis[done], exact),
        "mean relative error (ij)": _mean_relative_error(approx.ij[done], exact),
        "folds where the ij is undefined": int(np.isnan(approx.ij[done]).sum()),
        "folds": len(tasks),
    }
    return RefitReport(
        "lwcv",
        pd.concat(frames, ignore_index=True),
        _failures(records),
        len(tasks),
        len(done),
        summary,
    )


def _mean_relative_error(approximation: np.ndarray, exact: np.ndarray) -> float:
    """``mean |approx - exact| / |exact|`` over folds where the approximation is defined."""
    defined = np.isfinite(approximation)
    if not defined.any():
        return float("nan")
    return float(np.mean(np.abs(approximation - exact)[defined] / np.abs(exact[defined])))


# --------------------------------------------------------------------------- drop a set
def drop(
    post,
    backend,
    ids,
    *,
    groups=None,
    quantities=None,
    store=None,
    executor=None,
    progress: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
) -> RefitReport:
    """The exact change of posterior means when the units ``ids`` are deleted.

    Compared with the linear (IJ) prediction ``-sum psi`` and with importance reweighting
    of the original draws by ``exp(-sum_{n in set} l_n)``, Pareto-smoothed (its k-hat in
    ``summary``). This is how an influential set found by :func:`bayesij.amip` is verified.

    Parameters
    ----------
    ids : list
        Observation ids, or group labels when ``groups`` (or ``post.groups``) is set.

    Returns
    -------
    RefitReport
        Rows per quantity for methods ``'linear'`` and ``'reweighted'``; ``exact`` is the
        change of the posterior mean (refit minus original), ``exact_se`` combines both
        fits' Monte Carlo errors.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> two = [post.obs_names[0], post.obs_names[1]]
    >>> report = refit.drop(post, backend, two, executor="sequential", progress=False)
    >>> report.n_refits
    1
    """
    post = _checked(post, backend)
    if quantities is not None:
        post = post.select(quantities)
    codes, units = post.unit_codes(groups)
    chosen = _positions(units.values.tolist(), ids, "ids")
    deleted = np.isin(codes, chosen)
    task = Task("drop", (~deleted).astype(float))
    records = _campaign(
        post,
        [task],
        backend,
        "drop",
        {"ids": [str(i) for i in units.values[chosen]]},
        store,
        executor,
        progress,
        retry_failed=retry_failed,
        timeout=timeout,
    )
    names = post.quantity_names
    before = summarise(post)
    ok = _ok(records)
    exact = exact_se = np.full(len(names), np.nan)
    refit_moments: dict = {}
    if ok:
        after = ok["drop"]
        columns = _quantity_columns(after, names)
        exact = np.asarray(after["mean"])[columns] - np.asarray(before["mean"])
        exact_se = np.hypot(np.asarray(after["mcse"])[columns], before["mcse"])
        refit_moments = {
            name: (after["mean"][c], after["sd"][c]) for name, c in zip(names, columns, strict=True)
        }
    values = post.quantities.values
    set_lik = post.log_lik.values[:, :, deleted].sum(axis=2, keepdims=True, dtype=np.float64)
    # The set's summed log-likelihood as one unit: -psi of it is -sum of the members' psi,
    # and its batch-means MCSE accounts for their correlation.
    changes = leave_out_changes(values, set_lik, check=False)
    linear, linear_se = changes.delta_lin[:, 0], changes.mcse_lin[:, 0]
    frames = [
        comparison_rows({"quantity": names}, "linear", linear, linear_se, exact, exact_se),
        comparison_rows(
            {"quantity": names}, "reweighted", changes.delta_is[:, 0], np.nan, exact, exact_se
        ),
    ]
    summary = {
        "units dropped": int(chosen.size),
        "observations dropped": int(deleted.sum()),
        "pareto_k of the set": float(changes.pareto_k[0]),
        "refit": refit_moments,
    }
    return RefitReport(
        "drop", pd.concat(frames, ignore_index=True), _failures(records), 1, len(ok), summary
    )
