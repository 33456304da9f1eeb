"""Campaigns: stores that survive kills, failure records, executors (processes, Dask)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from bayesij import refit
from bayesij.refit.campaign import Task, run_campaign
from refit_helpers import BACKEND, failing_fit, slow_fit

HERE = Path(__file__).parents[1] / "helpers"


def _post():
    return BACKEND.fit(np.ones(BACKEND.n_obs))


def _lines(store) -> list[dict]:
    return [json.loads(line) for line in Path(store, "records.jsonl").read_text().splitlines()]


def _started(log: Path) -> list[int]:
    return [int(line.split()[0]) for line in log.read_text().splitlines()] if log.exists() else []


def _resume_sequentially(store, log, monkeypatch):
    """Run the killed campaign again in this process; its report and the refits it ran.
    Every planned refit is then in the store exactly once."""
    started_before = len(_started(log))
    monkeypatch.setenv("BAYESIJ_TEST_LOG", str(log))
    monkeypatch.setenv("BAYESIJ_TEST_SLEEP", "0")
    report = refit.loo(
        _post(),
        refit.CallableBackend(slow_fit, BACKEND.n_obs),
        points="all",
        store=store,
        executor="sequential",
        progress=False,
    )
    keys = [record["key"] for record in _lines(store)]
    assert sorted(keys) == sorted(f"loo-{i}" for i in range(BACKEND.n_obs)), "each once"
    return report, {f"loo-{n}" for n in _started(log)[started_before:]}


@pytest.mark.parametrize("executor", ["sequential", "2"])
def test_killed_campaign_resumes_with_exactly_the_planned_refits(tmp_path, monkeypatch, executor):
    store, log = tmp_path / "store", tmp_path / "calls.log"
    env = {
        **os.environ,
        "BAYESIJ_TEST_LOG": str(log),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    args = [sys.executable, str(HERE / "campaign_script.py"), str(store)]
    if executor != "sequential":
        args.append(executor)
    process = subprocess.Popen(args, env=env, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        records = store / "records.jsonl"
        if records.exists() and len(records.read_text().splitlines()) >= 5:
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the campaign and its worker processes
    process.wait()
    first = {record["key"] for record in _lines(store)}
    assert 5 <= len(first) < BACKEND.n_obs, "killed mid-way"
    with open(store / "records.jsonl", "a") as handle:  # a line cut short by the kill
        handle.write('{"key": "loo-7", "stat')
    report, redone = _resume_sequentially(store, log, monkeypatch)
    planned = {f"loo-{i}" for i in range(BACKEND.n_obs)}
    assert not redone & first, "no finished refit is done again"
    assert redone == planned - first
    assert report.n_refits == BACKEND.n_obs and len(report.failures) == 0
    assert set(report.table("psis")["obs"]) == set(range(BACKEND.n_obs))


def test_failures_are_recorded_with_reasons_and_not_redone(tmp_path):
    backend = refit.CallableBackend(failing_fit, BACKEND.n_obs)
    post = _post()
    report = refit.loo(
        post, backend, points=[0, 1, 2], store=tmp_path, executor="sequential", progress=False
    )
    assert report.n_planned == 3 and report.n_refits == 2
    assert report.failures["key"].tolist() == ["loo-0"]
    assert "RefitFailed: 12 divergent transitions" in report.failures["reason"][0]
    assert 0 not in set(report.table()["obs"])
    assert "1 refits failed" in str(report)
    again = refit.loo(
        post, backend, points=[0, 1, 2], store=tmp_path, executor="sequential", progress=False
    )
    assert again.failures["key"].tolist() == ["loo-0"], "a failure is a finished refit"
    assert len(_lines(tmp_path)) == 3


def test_ordinary_exceptions_are_failures_too():
    tasks = [
        Task("a", np.r_[1.0, 2.0, np.ones(BACKEND.n_obs - 2)]),
        Task("b", np.ones(BACKEND.n_obs)),
    ]
    records = run_campaign(
        tasks,
        refit.CallableBackend(failing_fit),
        experiment="x",
        settings={},
        executor="sequential",
        progress=False,
    )
    assert records["a"]["status"] == "failed"
    assert records["a"]["reason"] == "ZeroDivisionError: boom"
    assert records["b"]["status"] == "ok"


def test_a_store_refuses_a_different_plan(tmp_path):
    post = _post()
    refit.loo(post, BACKEND, points=[1, 2], store=tmp_path, executor="sequential", progress=False)
    with pytest.raises(ValueError, match="store: .*different settings"):
        refit.loo(
            post, BACKEND, points=[1, 3], store=tmp_path, executor="sequential", progress=False
        )


def test_process_pool_and_dask_give_the_sequential_records():
    distributed = pytest.importorskip("distributed")
    post = _post()
    sequential = refit.bootstrap(post, BACKEND, B=6, executor="sequential", progress=False)
    pooled = refit.bootstrap(post, BACKEND, B=6, progress=False)  # default: local processes
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        with distributed.Client(cluster) as client:
            on_dask = refit.bootstrap(post, BACKEND, B=6, executor=client, progress=False)
            by_address = refit.bootstrap(
                post, BACKEND, B=6, executor=cluster.scheduler_address, progress=False
            )
    for other in (pooled, on_dask, by_address):
        np.testing.assert_allclose(other.table()["exact"], sequential.table()["exact"], rtol=1e-12)


def test_closures_run_on_worker_processes_and_unpicklable_backends_are_refused():
    backend = refit.CallableBackend(lambda w: BACKEND.fit(w), BACKEND.n_obs)
    pooled = refit.bootstrap(_post(), backend, B=3, progress=False)
    sequential = refit.bootstrap(_post(), backend, B=3, executor="sequential", progress=False)
    np.testing.assert_allclose(pooled.table()["exact"], sequential.table()["exact"], rtol=1e-12)
    lock = threading.Lock()
    locked = refit.CallableBackend(lambda w: (lock, BACKEND.fit(w))[1], BACKEND.n_obs)
    with pytest.raises(ValueError, match="backend: .*cannot be pickled"):
        refit.bootstrap(_post(), locked, B=2, progress=False)
    assert refit.bootstrap(_post(), locked, B=2, executor="sequential", progress=False).n_refits


def test_a_plain_script_without_main_guard_uses_the_default_executor():
    result = subprocess.run(
        [sys.executable, str(HERE / "unguarded_script.py")],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("refits 4") == 1, "the script ran once, workers did not re-run it"


def test_bad_executor_and_backend():
    for executor in ([1], "sequentia", -1, 0, True, 2.5):
        with pytest.raises(ValueError, match=r"executor: found .*; expected None \(local"):
            refit.bootstrap(_post(), BACKEND, B=2, executor=executor, progress=False)
    with pytest.raises(ValueError, match=r"points: found repeated ids \[1\]"):
        refit.loo(_post(), BACKEND, points=[1, 1], executor="sequential", progress=False)
    small = refit.ConjugateNormalBackend(np.ones((5, 1)), np.zeros(5))
    with pytest.raises(ValueError, match="backend: found a model of 5 observations"):
        refit.bootstrap(_post(), small, B=2, progress=False)
    with pytest.raises(ValueError, match="weights: found negative"):
        BACKEND.fit(-np.ones(BACKEND.n_obs))


@pytest.mark.slow
def test_a_runner_killed_alone_leaves_no_worker_and_resumes_the_missing_refits(
    tmp_path, monkeypatch
):
    """SIGKILL to the runner only (not its process group): its loky workers die with it
    within 5 s instead of finishing refits whose records would be lost."""
    psutil = pytest.importorskip("psutil")
    store, log = tmp_path / "store", tmp_path / "calls.log"
    env = {
        **os.environ,
        "BAYESIJ_TEST_LOG": str(log),
        "BAYESIJ_TEST_SLEEP": "1.0",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, str(HERE / "campaign_script.py"), str(store), "2"], env=env
    )
    deadline = time.time() + 120
    while time.time() < deadline and len(_started(log)) < 3:
        time.sleep(0.05)
    workers = psutil.Process(process.pid).children(recursive=True)
    assert workers, "the campaign runs on worker processes"
    process.send_signal(signal.SIGKILL)
    process.wait()
    gone, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, f"workers still running 5 s after the runner was killed: {alive}"
    done = {record["key"] for record in _lines(store)}
    report, redone = _resume_sequentially(store, log, monkeypatch)
    assert redone == {f"loo-{i}" for i in range(BACKEND.n_obs)} - done  # exactly the missing
    assert report.failures.empty


@pytest.mark.parametrize("executor", ["sequential", 2])
def test_a_refit_that_hangs_is_recorded_as_timed_out_and_the_campaign_finishes(executor):
    def hangs_on_the_third(weights):
        if weights[2] == 0:
            while True:
                time.sleep(10)
        return BACKEND.fit(weights)

    backend = refit.CallableBackend(hangs_on_the_third, BACKEND.n_obs)
    start = time.perf_counter()
    # 5 s: a fresh worker's first refit imports what it needs inside the timed call, which
    # took over 2 s on a loaded 2-core machine (two test suites and a sampler running).
    report = refit.loo(
        _post(), backend, points=[1, 2, 3], executor=executor, progress=False, timeout=5
    )
    assert time.perf_counter() - start < 60
    assert report.failures.to_dict("records") == [{"key": "loo-2", "reason": "timed out after 5 s"}]
    assert len(report.table("psis")) == 2
    with pytest.raises(ValueError, match=r"timeout: found -1; expected None or a number"):
        refit.loo(_post(), backend, points=[1], timeout=-1, progress=False)


def test_sys_exit_in_a_worker_process_is_that_refits_failure():
    """A refit calling sys.exit(3) in a loky worker: recorded as its failure, the campaign
    (and the script running it) goes on."""

    def leaves_on_the_second(weights):
        if weights[1] == 0:
            sys.exit(3)
        return BACKEND.fit(weights)

    backend = refit.CallableBackend(leaves_on_the_second, BACKEND.n_obs)
    report = refit.loo(_post(), backend, points=[0, 1, 2], executor=2, progress=False)
    assert report.failures.to_dict("records") == [
        {"key": "loo-1", "reason": "the refit called sys.exit(3)"}
    ]
    assert len(report.table("psis")) == 2
