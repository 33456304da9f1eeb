"""Running a campaign of refits: sequentially, on a local process pool or on Dask.

A campaign is a list of :class:`Task` (a key, a weight vector, the points whose predictive
density is wanted). Finished refits go to the store as they finish; tasks already in the
store are not run again. A refit that raises is recorded as failed with its reason.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import hashlib
import os
import re
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from bayesij.array.checks import fail
from bayesij.refit.store import CampaignStore
from bayesij.refit.summary import summarise

__all__ = ["Task", "run_campaign", "execute", "reference_digest"]


class Task(NamedTuple):
    """One refit: ``key`` names it, ``weights`` (n_obs,) define it, ``points`` are the
    observation positions whose log predictive density the refit should report, and
    ``point_groups`` (one code per point, optional) the groups whose *joint* density it
    should report too (a K-fold of whole groups).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesij import refit
    >>> task = refit.Task("loo-3", np.r_[1.0, 1.0, 1.0, 0.0], points=(3,))
    >>> len(task.fingerprint())  # the store checks a finished refit against it
    16
    """

    key: str
    weights: np.ndarray
    points: tuple[int, ...] = ()
    point_groups: tuple[int, ...] = ()

    def fingerprint(self) -> str:
        digest = hashlib.sha256(np.ascontiguousarray(self.weights, dtype=float).tobytes())
        digest.update(repr(tuple(self.points)).encode())
        if self.point_groups:  # absent from the fingerprints of ungrouped tasks, as before
            digest.update(repr(tuple(self.point_groups)).encode())
        return digest.hexdigest()[:16]


class RefitTimeout(BaseException):
    """A refit ran past its campaign's ``timeout`` (a BaseException, so that a refit's own
    ``except Exception`` cannot swallow it)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`RefitTimeout` in this thread after ``seconds`` (a real-time interval
    timer; only the main thread of a process can have one: local worker processes and
    sequential refits do, Dask's worker threads do not)."""
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise RefitTimeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def _check_every_observation(posterior, n_obs: int) -> None:
    """A refit must report every observation's log-likelihood, the dropped ones included
    (the weights zero them in the fit, not in the terms): the held-out points are read by
    position, and a refit of the kept rows only would hand over other observations'."""
    if posterior.n_obs != n_obs:
        raise ValueError(
            f"backend: found a refit whose log-likelihood has {posterior.n_obs} observations; "
            f"expected all {n_obs}, the dropped ones included (the weights zero them in the "
            "fit, not in the reported terms)"
        )


def execute(backend, task: Task, *, in_worker: bool = True, timeout: float | None = None) -> dict:
    """Refit ``task`` with ``backend`` and summarise it; failures become records too.

    Everything a refit raises is its failure — ``sys.exit()``, a ``KeyboardInterrupt``
    raised inside the refit code, running past ``timeout`` seconds (recorded as "timed out
    after N s") — except, in this process (``in_worker=False``), the user's own Ctrl-C.
    """
    start = time.perf_counter()
    record = {"key": task.key}
    try:
        with _time_limit(timeout):
            posterior = backend.fit(task.weights)
        _check_every_observation(posterior, len(task.weights))
        record.update(summarise(posterior, task.points, task.point_groups), status="ok", reason="")
        record["prior_shift"] = _prior_shift(backend, task.weights, posterior)
    except RefitTimeout as error:
        record.update(status="failed", reason=str(error))
    except KeyboardInterrupt:
        if not in_worker:
            raise  # the user's Ctrl-C stops the campaign; what finished is stored
        record.update(status="failed", reason="KeyboardInterrupt raised in the refit")
    except BaseException as error:  # recorded, reported, never dropped
        reason = f"{type(error).__name__}: {error}"
        if isinstance(error, SystemExit):
            reason = f"the refit called sys.exit({error.code!r})"
        record.update(status="failed", reason=reason)
    record["seconds"] = time.perf_counter() - start
    return record


#: A refit whose log prior at the same parameters moved by more than this (in log density)
#: refitted another model: said once per campaign (a warning), kept in each record.
PRIOR_SHIFT_TOLERANCE = 1e-6


def _prior_shift(backend, weights, posterior) -> float | None:
    """The backend's ``prior_shift(weights, posterior)`` when it has one (Stan backends):
    how far the refit's model moved outside its likelihood; None when it cannot tell."""
    check = getattr(backend, "prior_shift", None)
    if not callable(check):
        return None
    try:
        shift = check(weights, posterior)
    except Exception as error:  # the check, not the refit, failed: said in the record
        warnings.warn(f"the refit's prior could not be checked ({error})", UserWarning, 2)
        return None
    return None if shift is None else float(shift)


def warn_prior_shifts(records: dict) -> None:
    """Say so, once, when any refit's model differs from the fit's outside the likelihood
    (its ``prior_shift`` above :data:`PRIOR_SHIFT_TOLERANCE`)."""
    moved = {
        key: record["prior_shift"]
        for key, record in records.items()
        if (record.get("prior_shift") or 0.0) > PRIOR_SHIFT_TOLERANCE
    }
    if moved:
        key, shift = max(moved.items(), key=lambda item: item[1])
        warnings.warn(
            f"{len(moved)} of {len(records)} refits changed the model outside the likelihood: "
            f"its log prior at the same parameters moved by up to {shift:.3g} (refit "
            f"{key!r}). The program's priors or transformed data read the weights (a prior "
            "centred on the kept data, predictors centred on the kept rows): these refits "
            "are of other models, and their differences from the fit are not the data's "
            "alone.",
            UserWarning,
            stacklevel=3,
        )


def _sequential(backend, tasks, timeout=None) -> Iterator[dict]:
    for task in tasks:
        yield execute(backend, task, in_worker=False, timeout=timeout)


def _failed(task: Task, reason: str) -> dict:
    """The record of a refit whose worker, not the refit, failed."""
    return {"key": task.key, "status": "failed", "reason": reason, "seconds": float("nan")}


def _futures(
    submit: Callable,
    completed: Callable,
    backend,
    tasks,
    interrupted: list | None = None,
    timeout: float | None = None,
) -> Iterator[dict]:
    """Records of ``tasks`` from an executor's futures, in the order they finish. A future
    that raises (its worker, not the refit, failed: dask's KilledWorker, a broken pool) is
    recorded as failed, or, with ``interrupted``, its task is appended there instead."""
    run = functools.partial(execute, timeout=timeout)
    futures = {submit(run, backend, task): task for task in tasks}
    finished: set = set()
    try:
        for future in completed(list(futures)):
            finished.add(future)
            try:
                yield future.result()
            except Exception as error:
                task = futures[future]
                lost = isinstance(error, cf.process.BrokenProcessPool) or (
                    type(error).__name__ == "KilledWorker"
                )
                if interrupted is not None and lost:
                    interrupted.append(task)
                else:
                    reason = f"the executor lost the refit: {type(error).__name__}: {error}"
                    yield _failed(task, reason)
    except ClusterLost as lost:  # no worker left to run the rest: each is a failure
        for future, task in futures.items():
            if future not in finished:
                yield _failed(task, str(lost))
    finally:  # interrupted: drop what has not started
        for future in futures:
            future.cancel()


def _check_picklable(backend) -> None:
    import cloudpickle

    try:
        cloudpickle.dumps(backend)
    except Exception as error:
        raise fail(
            "backend",
            f"an object that cannot be pickled ({error})",
            "a picklable backend for worker processes or Dask",
            "Pass executor='sequential' to refit in this process.",
        ) from None


EXECUTORS = (
    "None (local processes), 'sequential', a number of processes >= 1, a "
    "concurrent.futures.Executor, a dask.distributed Client or a scheduler address such as "
    "'tcp://127.0.0.1:8786'"
)


def check_executor(executor) -> None:
    """Refuse an executor the campaign cannot use, before any refit is planned or run."""
    if executor is None or executor == "sequential" or isinstance(executor, cf.Executor):
        return
    if type(executor).__module__.startswith("distributed"):
        return
    if isinstance(executor, (int, np.integer)) and not isinstance(executor, bool):
        if executor >= 1:
            return
    elif isinstance(executor, str) and re.fullmatch(
        r"(tcp|tls|inproc|ucx|ws|wss)://\S+|[\w.-]+:\d+", executor
    ):
        return
    raise fail("executor", repr(executor), EXECUTORS)


def _results(executor, backend, tasks: list[Task], timeout=None) -> Iterator[dict]:
    """Records of ``tasks`` in the order they finish, on the chosen executor."""
    in_process = not getattr(backend, "process_pool_safe", True)
    if executor == "sequential" or not tasks or (executor is None and in_process):
        yield from _sequential(backend, tasks, timeout)
        return
    if in_process and (isinstance(executor, (int, cf.Executor))):
        raise fail(
            "executor",
            f"a local process pool for a {type(backend).__name__}",
            "executor=None or 'sequential' (refits in this process) or Dask",
            "PyStan runs its chains in parallel processes itself, and its sampler "
            "hangs in pool worker processes.",
        )
    if isinstance(executor, cf.Executor):  # threads need no pickling; processes say so
        yield from _futures(executor.submit, cf.as_completed, backend, tasks, timeout=timeout)
        return
    _check_picklable(backend)
    if executor is None or isinstance(executor, (int, np.integer)):
        workers = min(len(tasks), int(executor or os.cpu_count() or 1))
        yield from _local_processes(workers, backend, tasks, timeout)
    else:
        yield from _dask_results(executor, backend, tasks, timeout)


def _local_processes(workers: int, backend, tasks: list[Task], timeout=None) -> Iterator[dict]:
    """Records of ``tasks`` refitted by ``workers`` loky processes.

    loky starts fresh interpreters (never forks of this one: Stan's interfaces run event
    loops and threads that do not survive a fork) that do not import the user's script,
    and sends functions and closures with cloudpickle, so a script needs no ``__main__``
    guard. A refit that kills its worker (a crash, an out-of-memory kill) breaks the pool
    for every refit in flight: those are run again one at a time in a fresh worker, so
    that the one that kills it is recorded as failed, with the exit code, and the others
    finish.
    """
    import loky

    interrupted: list[Task] = []
    pool = loky.get_reusable_executor(max_workers=workers, initializer=die_with_parent)
    yield from _futures(pool.submit, cf.as_completed, backend, tasks, interrupted, timeout)
    order = {task.key: i for i, task in enumerate(tasks)}
    for task in sorted(interrupted, key=lambda task: order[task.key]):
        yield _alone(backend, task, timeout)


def _alone(backend, task: Task, timeout=None) -> dict:
    """Refit ``task`` in a worker of its own; a dying worker becomes a failed record."""
    import loky

    pool = loky.get_reusable_executor(max_workers=1, initializer=die_with_parent)
    try:
        return pool.submit(functools.partial(execute, timeout=timeout), backend, task).result()
    except cf.process.BrokenProcessPool as error:
        codes = re.search(r"exit codes of the workers are \{(.*?)\}", str(error))
        return _failed(
            task,
            "the worker process died during the refit (exit code "
            f"{codes.group(1) if codes else 'unknown'}: a crash or an out-of-memory kill)",
        )


#: Seconds a Dask cluster may have no worker while refits wait before they are recorded as
#: failed (its workers died and none came back; a campaign never hangs on an empty cluster).
NO_WORKERS_WAIT = 120.0


class ClusterLost(Exception):
    """The Dask cluster has had no worker for ``NO_WORKERS_WAIT`` seconds."""


def _dask_completed(client, distributed) -> Callable:
    """``distributed.as_completed`` that gives up when the cluster has no worker left for
    :data:`NO_WORKERS_WAIT` seconds (a refit that kills its workers can make a
    LocalCluster close its nanny: its tasks would wait forever)."""

    def completed(futures):
        pending, empty_since = set(futures), None
        while pending:
            try:
                done, pending = distributed.wait(
                    list(pending), timeout=1.0, return_when="FIRST_COMPLETED"
                )
            except TimeoutError:
                done = set()
            yield from done
            if done or _has_workers(client):
                empty_since = None
            elif empty_since is None:
                empty_since = time.monotonic()
            elif time.monotonic() - empty_since > NO_WORKERS_WAIT:
                raise ClusterLost(
                    f"the Dask cluster had no worker for {NO_WORKERS_WAIT:g} s (its workers "
                    "died and none came back); rerun with retry_failed=True once it has "
                    "workers"
                )

    return completed


def _has_workers(client) -> bool:
    try:
        info = client.scheduler_info(n_workers=1)  # distributed >= 2025: a bounded list
    except TypeError:
        info = client.scheduler_info()
    return bool(info["workers"])


def _dask_results(executor, backend, tasks, timeout=None) -> Iterator[dict]:
    try:
        import distributed
    except ImportError:
        raise fail(
            "executor", repr(executor), "dask.distributed installed", "pip install 'bayesij[dask]'"
        ) from None
    client = distributed.Client(executor) if isinstance(executor, str) else executor
    try:
        submit = lambda fn, *args: client.submit(fn, *args, pure=False)  # noqa: E731
        interrupted: list[Task] = []
        completed = _dask_completed(client, distributed)
        yield from _futures(submit, completed, backend, tasks, interrupted, timeout=timeout)
        # Tasks whose workers died (Dask's KilledWorker): the refit that kills its worker
        # takes the others on it down with it; each runs again alone, so that only the
        # refit that kills its worker is recorded as failed.
        order = {task.key: i for i, task in enumerate(tasks)}
        for task in sorted(interrupted, key=lambda task: order[task.key]):
            yield from _futures(submit, completed, backend, [task], timeout=timeout)
    finally:
        if isinstance(executor, str):
            client.close()


def _progress(total: int, done: int, description: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc=description, disable=not enabled, unit="refit")


def reference_digest(reference) -> str | None:
    """A hash of what a campaign is about (None: nothing given): a Posterior's draws,
    log-likelihood, quantity names, observation ids and groups, or any arrays and numbers,
    by their bytes."""
    if reference is None:
        return None
    digest = hashlib.sha256()
    parts = reference if isinstance(reference, tuple) else (reference,)
    if hasattr(reference, "log_lik") and hasattr(reference, "quantities"):
        groups = reference.groups
        parts = (
            reference.quantities.values,
            reference.quantity_names,
            reference.log_lik.values,
            [repr(o) for o in reference.obs_names],
            None if groups is None else [repr(g) for g in groups.values.tolist()],
        )
    for part in parts:
        if isinstance(part, np.ndarray):
            digest.update(f"{part.dtype}{part.shape}".encode())
            digest.update(np.ascontiguousarray(part).tobytes())
        else:
            digest.update(repr(part).encode())
    return digest.hexdigest()[:16]


def run_campaign(
    tasks: list[Task],
    backend,
    *,
    experiment: str,
    settings: dict,
    reference=None,
    store=None,
    executor=None,
    progress: bool = True,
    stop: Callable[[dict], bool] | None = None,
    round_size: int | None = None,
    retry_failed: bool = False,
    timeout: float | None = None,
) -> dict[str, dict]:
    """Run the tasks not yet in ``store``; return the records of the plan by key.

    Parameters
    ----------
    tasks : list of Task
        The planned refits (keys unique).
    backend : Backend
    experiment : str
        Name of the experiment, recorded in the plan.
    settings : dict
        What else defines the campaign (JSON-ready); resuming requires the same.
    reference : Posterior or arrays, optional
        What the campaign is about: the full-data fit whose refits it runs (its draws,
        log-likelihood, names and groups) or, for a check of a result, the numbers that
        result was computed from. Its digest is part of the plan, so that a store is
        never reused for other data, however the backend reads its data (a dict, an
        object's attribute, a global).
    store : str, path or CampaignStore, optional
        Directory of the campaign store; default: kept in memory only. A second runner on
        the same directory waits for the first (a file lock) and then finds its refits
        done; see :class:`bayesij.refit.CampaignStore`.
    executor : None, "sequential", int, concurrent.futures.Executor, dask Client or str
        None: local worker processes (loky), one per core; an int: that many processes;
        a Client or a scheduler address: dask.distributed. Local workers need no
        ``if __name__ == "__main__":`` guard in a script and take closures. A refit that
        kills its worker is recorded as failed (with the exit code) and the campaign goes
        on.
    progress : bool, default True
        Show a tqdm progress bar.
    stop : callable, optional
        With a stopping rule the tasks run in order, in rounds of ``round_size`` (default:
        one per local core), and the campaign ends once ``stop(records)`` is true; the
        rule must depend on the records only, so a resumed campaign stops at the same
        place.
    retry_failed : bool, default False
        Run again the refits recorded as failed (for transient failures: a lost worker, a
        time-out); by default a failure is a result, kept and reported.
    timeout : float, optional
        Seconds a refit may run: past them it is stopped and recorded as failed ("timed out
        after N s"), and the campaign goes on. Enforced by an interval timer in the process
        that runs the refit (sequential refits and local worker processes; on Dask, whose
        refits run in worker threads, it is not enforced). Local worker processes die with
        the runner: a killed runner leaves none behind.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> tasks = [refit.Task(f"drop-{n}", np.where(np.arange(30) == n, 0.0, 1.0)) for n in range(3)]
    >>> records = refit.run_campaign(
    ...     tasks, backend, experiment="drops", settings={}, reference=post, executor="sequential",
    ...     progress=False,
    ... )
    >>> sorted(records), records["drop-0"]["status"]
    (['drop-0', 'drop-1', 'drop-2'], 'ok')
    """
    check_executor(executor)
    timeout = _checked_timeout(timeout)
    if not isinstance(tasks, list) or not all(isinstance(task, Task) for task in tasks):
        raise fail("tasks", f"a {type(tasks).__name__} of other things", "a list of Task")
    keys = [task.key for task in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("tasks: found repeated keys; expected each refit once.")
    if isinstance(store, CampaignStore):
        campaign = store
        campaign.retry_failed = campaign.retry_failed or retry_failed
    else:
        campaign = CampaignStore(store, retry_failed=retry_failed)
    plan = {
        "experiment": experiment,
        "reference": reference_digest(reference),
        "backend": repr(backend),
        "settings": settings,
        "tasks": {task.key: task.fingerprint() for task in tasks},
    }
    with campaign.session(plan):
        finished = campaign.records()
        pending = [task for task in tasks if task.key not in finished]
        size = max(1, len(pending) if stop is None else round_size or os.cpu_count() or 1)
        with _progress(len(tasks), len(tasks) - len(pending), experiment, progress) as bar:
            for start in range(0, len(pending), size):
                if stop is not None and stop(_in_plan_order(campaign.records(), keys)):
                    break
                chunk = pending[start : start + size]
                for record in _results(executor, backend, chunk, timeout):
                    campaign.append(record)
                    bar.update()
        records = _in_plan_order(campaign.records(), keys)
        warn_prior_shifts(records)
        return records


def _checked_timeout(timeout) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise fail("timeout", repr(timeout), "None or a number of seconds > 0")
    return float(timeout)


def die_with_parent() -> None:
    """Make this worker process end when its parent does (Linux: the kernel sends SIGKILL
    when the parent dies; elsewhere a thread watches the parent's pid), so that a runner
    killed with SIGKILL leaves no worker finishing refits whose results would be lost."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0:  # PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
            return
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="bayesij-parent-watch", daemon=True).start()


def _in_plan_order(records: dict, keys: list[str]) -> dict[str, dict]:
    return {key: records[key] for key in keys if key in records}
