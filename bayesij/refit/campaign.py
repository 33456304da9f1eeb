"""Running a campaign of refits: sequentially, on a local process pool or on Dask.

A campaign is a list of :class:`Task` (a key, a weight vector, the points whose predictive
density is wanted). Finished refits go to the store as they finish; tasks already in the
store are not run again. A refit that raises is recorded as failed with its reason.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import multiprocessing as mp
import os
import pickle
import re
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from bayesij.array.checks import fail
from bayesij.refit.store import CampaignStore
from bayesij.refit.summary import summarise

__all__ = ["Task", "run_campaign", "execute"]


class Task(NamedTuple):
    """One refit: ``key`` names it, ``weights`` (n_obs,) define it, ``points`` are the
    observation positions whose log predictive density the refit should report."""

    key: str
    weights: np.ndarray
    points: tuple[int, ...] = ()

    def fingerprint(self) -> str:
        digest = hashlib.sha256(np.ascontiguousarray(self.weights, dtype=float).tobytes())
        digest.update(repr(tuple(self.points)).encode())
        return digest.hexdigest()[:16]


def execute(backend, task: Task) -> dict:
    """Refit ``task`` with ``backend`` and summarise it; failures become records too."""
    start = time.perf_counter()
    record = {"key": task.key}
    try:
        record.update(summarise(backend.fit(task.weights), task.points), status="ok", reason="")
    except Exception as error:  # recorded, reported, never dropped
        record.update(status="failed", reason=f"{type(error).__name__}: {error}")
    record["seconds"] = time.perf_counter() - start
    return record


def _sequential(backend, tasks) -> Iterator[dict]:
    for task in tasks:
        yield execute(backend, task)


def _futures(submit: Callable, completed: Callable, backend, tasks) -> Iterator[dict]:
    futures = [submit(execute, backend, task) for task in tasks]
    try:
        for future in completed(futures):
            yield future.result()
    finally:  # interrupted: drop what has not started
        for future in futures:
            future.cancel()


def _check_picklable(backend) -> None:
    try:
        pickle.dumps(backend)
    except Exception as error:
        raise fail(
            "backend",
            f"an object that cannot be pickled ({error})",
            "a picklable backend for a process pool or Dask",
            "Use module-level functions, or executor='sequential'.",
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


def _results(executor, backend, tasks: list[Task]) -> Iterator[dict]:
    """Records of ``tasks`` in the order they finish, on the chosen executor."""
    in_process = not getattr(backend, "process_pool_safe", True)
    if executor == "sequential" or not tasks or (executor is None and in_process):
        yield from _sequential(backend, tasks)
        return
    if in_process and (isinstance(executor, (int, cf.Executor))):
        raise fail(
            "executor",
            f"a local process pool for a {type(backend).__name__}",
            "executor=None or 'sequential' (refits in this process) or Dask",
            "PyStan runs its chains in parallel processes itself, and its sampler "
            "hangs in pool worker processes.",
        )
    _check_picklable(backend)
    if executor is None or isinstance(executor, int):
        workers = min(len(tasks), executor or os.cpu_count() or 1)
        # Fresh worker processes (forkserver/spawn), never forks of this one: Stan's
        # interfaces run event loops and threads that do not survive a fork.
        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        try:
            with cf.ProcessPoolExecutor(
                max_workers=workers, mp_context=mp.get_context(method)
            ) as pool:
                yield from _futures(pool.submit, cf.as_completed, backend, tasks)
        except cf.process.BrokenProcessPool as error:
            raise RuntimeError(
                "executor: a worker process died. In a script, run the campaign under "
                "`if __name__ == '__main__':` (worker processes import the script), or pass "
                "executor='sequential'. Finished refits are kept in the store."
            ) from error
    elif isinstance(executor, cf.Executor):
        yield from _futures(executor.submit, cf.as_completed, backend, tasks)
    elif isinstance(executor, str) or type(executor).__module__.startswith("distributed"):
        yield from _dask_results(executor, backend, tasks)
    else:
        raise fail(
            "executor",
            f"a {type(executor).__name__}",
            "None (local processes), 'sequential', a number of processes, a "
            "concurrent.futures.Executor, a dask.distributed Client or a scheduler "
            "address",
        )


def _dask_results(executor, backend, tasks) -> Iterator[dict]:
    try:
        import distributed
    except ImportError:
        raise fail(
            "executor", repr(executor), "dask.distributed installed", "pip install 'bayesij[dask]'"
        ) from None
    client = distributed.Client(executor) if isinstance(executor, str) else executor
    try:
        submit = lambda fn, *args: client.submit(fn, *args, pure=False)  # noqa: E731
        yield from _futures(submit, distributed.as_completed, backend, tasks)
    finally:
        if isinstance(executor, str):
            client.close()


def _progress(total: int, done: int, description: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc=description, disable=not enabled, unit="refit")


def run_campaign(
    tasks: list[Task],
    backend,
    *,
    experiment: str,
    settings: dict,
    store=None,
    executor=None,
    progress: bool = True,
    stop: Callable[[dict], bool] | None = None,
    round_size: int | None = None,
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
    store : str or path, optional
        Directory of the campaign store; default: kept in memory only.
    executor : None, "sequential", int, concurrent.futures.Executor, dask Client or str
        None: a local process pool with one process per core; an int: that many
        processes; a Client or a scheduler address: dask.distributed.
    progress : bool, default True
        Show a tqdm progress bar.
    stop : callable, optional
        With a stopping rule the tasks run in order, in rounds of ``round_size`` (default:
        one per local core), and the campaign ends once ``stop(records)`` is true; the
        rule must depend on the records only, so a resumed campaign stops at the same
        place.
    """
    check_executor(executor)
    keys = [task.key for task in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("tasks: found repeated keys; expected each refit once.")
    campaign = store if isinstance(store, CampaignStore) else CampaignStore(store)
    campaign.check_plan(
        {
            "experiment": experiment,
            "backend": repr(backend),
            "settings": settings,
            "tasks": {task.key: task.fingerprint() for task in tasks},
        }
    )
    finished = campaign.records()
    pending = [task for task in tasks if task.key not in finished]
    size = max(1, len(pending) if stop is None else round_size or os.cpu_count() or 1)
    with _progress(len(tasks), len(tasks) - len(pending), experiment, progress) as bar:
        for start in range(0, len(pending), size):
            if stop is not None and stop(_in_plan_order(campaign.records(), keys)):
                break
            for record in _results(executor, backend, pending[start : start + size]):
                campaign.append(record)
                bar.update()
    return _in_plan_order(campaign.records(), keys)


def _in_plan_order(records: dict, keys: list[str]) -> dict[str, dict]:
    return {key: records[key] for key in keys if key in records}
