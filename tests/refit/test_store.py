"""The campaign store under faults: damaged files, a deleted plan, two runners at once,
a worker that dies, a full disk."""

import errno
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bayesij import refit
from bayesij.refit import store as store_module
from bayesij.refit.store import CampaignStore
from refit_helpers import BACKEND, dying_fit, dying_or_slow_fit

HERE = Path(__file__).parents[1] / "helpers"


def _post():
    return BACKEND.fit(np.ones(BACKEND.n_obs))


def _loo(store, backend=BACKEND, points=(0, 1, 2, 3), post=None, **options):
    options.setdefault("executor", "sequential")
    post = _post() if post is None else post
    return refit.loo(post, backend, points=list(points), store=store, progress=False, **options)


def _lines(store) -> list[str]:
    return Path(store, "records.jsonl").read_text().splitlines()


@pytest.mark.parametrize(
    ("damage", "where"),
    [
        (lambda lines: lines[:1] + ["{not json"] + lines[1:], "line 2"),
        (lambda lines: lines[:2] + ["[1, 2]"] + lines[2:], "line 3"),
        (lambda lines: ['{"key": "loo-0"}'] + lines, "line 1"),
        (lambda lines: lines[:1] + [lines[1].replace('"ok"', '"fine"')] + lines[2:], "line 2"),
    ],
)
def test_a_damaged_record_line_is_named_with_its_file_and_line(tmp_path, damage, where):
    _loo(tmp_path)
    lines = damage(_lines(tmp_path))
    Path(tmp_path, "records.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"store: found {where} of '.*records.jsonl' .*Delete"):
        _loo(tmp_path)


@pytest.mark.parametrize("content", ["{truncated", "[]", '{"experiment": "loo"}', "\xff"])
def test_a_damaged_plan_is_named_and_deleting_it_is_safe(tmp_path, content):
    _loo(tmp_path)
    Path(tmp_path, "plan.json").write_text(content, encoding="latin-1")
    with pytest.raises(ValueError, match=r"store: found the content of '.*plan.json' .*Delete"):
        _loo(tmp_path)
    Path(tmp_path, "plan.json").unlink()
    before = _lines(tmp_path)
    assert _loo(tmp_path).n_refits == 4
    assert _lines(tmp_path) == before, "the same campaign reuses its records"


def test_records_are_tied_to_their_plan(tmp_path):
    _loo(tmp_path)
    Path(tmp_path, "plan.json").unlink()
    other = refit.ConjugateNormalBackend(BACKEND.model.X, BACKEND.model.y, sigma=2.0, draws=400)
    with pytest.raises(ValueError, match=r"store: found 4 record\(s\) .* different campaign"):
        _loo(tmp_path, backend=other)
    assert all(json.loads(line)["plan"] for line in _lines(tmp_path))


def test_two_runners_on_one_fresh_store_do_each_refit_once(tmp_path):
    store, log = tmp_path / "store", tmp_path / "calls.log"
    env = {
        **os.environ,
        "BAYESIJ_TEST_LOG": str(log),
        "BAYESIJ_TEST_SLEEP": "0.1",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, str(HERE / "campaign_script.py"), str(store)]
    runners = [
        subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    errors = [runner.communicate(timeout=300)[1] for runner in runners]
    assert [runner.returncode for runner in runners] == [0, 0], errors
    assert sum("in use by another runner" in error for error in errors) == 1, errors
    started = log.read_text().splitlines()
    assert len(started) == BACKEND.n_obs, "no refit done twice"
    keys = [json.loads(line)["key"] for line in _lines(store)]
    assert sorted(keys) == sorted(f"loo-{n}" for n in range(BACKEND.n_obs))


def test_a_refit_that_kills_its_worker_is_recorded_and_the_campaign_finishes(tmp_path):
    marker = tmp_path / "die"
    marker.touch()
    backend = refit.CallableBackend(functools.partial(dying_fit, str(marker)), BACKEND.n_obs)
    report = _loo(tmp_path / "store", backend, points=range(6), executor=2)
    assert report.n_planned == 6 and report.n_refits == 5
    assert report.failures["key"].tolist() == ["loo-0"]
    assert "worker process died" in report.failures["reason"][0]
    assert "SIGKILL" in report.failures["reason"][0]
    again = _loo(tmp_path / "store", backend, points=range(6), executor=2)
    assert again.n_refits == 5, "a failure is a finished refit unless retried"
    marker.unlink()  # the fault was transient
    retried = _loo(tmp_path / "store", backend, points=range(6), executor=2, retry_failed=True)
    assert retried.n_refits == 6 and len(retried.failures) == 0
    assert len(_lines(tmp_path / "store")) == 7, "the retry is appended, the failure kept"


def test_a_full_disk_stops_with_a_clear_error_and_loses_nothing(tmp_path, monkeypatch):
    real_write, calls = os.write, []

    def write(descriptor, data):
        if b'"status"' not in data:  # the key, written first
            return real_write(descriptor, data)
        calls.append(data)
        if len(calls) > 2:
            real_write(descriptor, data[:5])  # half a line, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data)

    monkeypatch.setattr(store_module.os, "write", write)
    with pytest.raises(OSError, match=r"store: could not write the refit 'loo-2' .*No space"):
        _loo(tmp_path)
    monkeypatch.setattr(store_module.os, "write", real_write)
    assert [json.loads(line)["key"] for line in _lines(tmp_path)] == ["loo-0", "loo-1"]
    assert _loo(tmp_path).n_refits == 4


# ---------------------------------------------------------------- private stores (issue 29)
def _finished_store(path):
    plan = {"experiment": "x", "backend": "b", "settings": {}, "tasks": {"a": "1", "b": "2"}}
    store = CampaignStore(path)
    with store.session(plan):
        store.append({"key": "a", "status": "ok", "value": 1.0})
        store.append({"key": "b", "status": "ok", "value": 2.0})
    return plan


def test_a_store_someone_else_may_write_is_refused(tmp_path):
    path = tmp_path / "shared"
    path.mkdir(mode=0o777)
    os.chmod(path, 0o777)
    with pytest.raises(ValueError, match=r"store: found .* writable by other users"):
        CampaignStore(path)
    created = tmp_path / "new"
    CampaignStore(created)
    assert os.stat(created).st_mode & 0o777 == 0o700


def test_a_planted_link_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    path = tmp_path / "store"
    plan = _finished_store(path)
    (path / "records.jsonl").unlink()
    (path / "records.jsonl").symlink_to(victim)
    with pytest.raises(ValueError, match=r"records.jsonl' not a readable file"):
        with CampaignStore(path).session(plan):
            pass
    assert victim.read_text() == "precious\n"


def test_an_edited_or_duplicated_record_is_found_out(tmp_path):
    path = tmp_path / "store"
    plan = _finished_store(path)
    lines = (path / "records.jsonl").read_text().splitlines()
    assert all('"mac"' in line for line in lines)
    edited = lines[1].replace('"value": 2.0', '"value": 20.0')
    (path / "records.jsonl").write_text("\n".join([lines[0], edited]) + "\n")
    with pytest.raises(ValueError, match=r"line 2 of .* a record changed after bayesij wrote it"):
        with CampaignStore(path).session(plan):
            pass
    (path / "records.jsonl").write_text("\n".join([lines[0], lines[1], lines[1]]) + "\n")
    with pytest.raises(ValueError, match=r"line 3 of .* a second finished record of 'b'"):
        with CampaignStore(path).session(plan):
            pass


def test_a_finished_read_only_store_is_read_without_its_lock(tmp_path, monkeypatch):
    path = tmp_path / "store"
    plan = _finished_store(path)
    (path / "lock").unlink(missing_ok=True)
    real_access = os.access
    # As for a user without write permission (root here may write anywhere).
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and real_access(p, mode))
    store = CampaignStore(path)
    assert store.read_only
    with store.session(plan):
        assert sorted(store.records()) == ["a", "b"]
        with pytest.raises(ValueError, match=r"read-only with refits still to run"):
            store.append({"key": "c", "status": "ok"})
    assert not (path / "lock").exists()


def test_plan_json_that_is_a_directory_is_named(tmp_path):
    path = tmp_path / "store"
    plan = _finished_store(path)
    (path / "plan.json").unlink()
    (path / "plan.json").mkdir()
    with pytest.raises(ValueError, match=r"plan.json' not a readable file"):
        with CampaignStore(path).session(plan):
            pass


@pytest.mark.slow
def test_a_refit_that_kills_its_dask_worker_fails_alone(tmp_path, monkeypatch):
    """The slow refit beside the dying one finishes; only the refit that kills its worker
    is a failure. (With one worker, distributed 2026.8 closes the worker's nanny after the
    task that killed it four times is declared lost: the cluster is left with no worker,
    which the next test covers.)"""
    distributed = pytest.importorskip("distributed")
    from bayesij.refit import campaign

    monkeypatch.setattr(campaign, "NO_WORKERS_WAIT", 20.0)
    marker = tmp_path / "die"
    marker.touch()
    backend = refit.CallableBackend(
        functools.partial(dying_or_slow_fit, str(marker)), BACKEND.n_obs
    )
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        with distributed.Client(cluster) as client:
            report = _loo(tmp_path / "store", backend, points=[0, 1], executor=client)
    assert report.failures["key"].tolist() == ["loo-0"], report.failures
    assert report.n_refits == 1


def test_a_campaign_on_a_dask_cluster_without_workers_ends(tmp_path, monkeypatch):
    """A cluster with no worker (all died, none came back) does not hang the campaign: after
    NO_WORKERS_WAIT seconds each waiting refit is recorded as failed, saying why, and a
    rerun with workers and retry_failed=True does them."""
    distributed = pytest.importorskip("distributed")
    from bayesij.refit import campaign

    monkeypatch.setattr(campaign, "NO_WORKERS_WAIT", 2.0)
    with distributed.LocalCluster(n_workers=0, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as client:
            report = _loo(tmp_path / "store", points=[0, 1], executor=client)
    assert report.failures["key"].tolist() == ["loo-0", "loo-1"]
    assert report.failures["reason"].str.startswith("the Dask cluster had no worker for 2 s").all()
    assert _loo(tmp_path / "store", points=[0, 1], retry_failed=True).failures.empty


def _data_reading_backends():
    """A refit function's data held by an object: read through a dict, a bound method's
    object or an object held in a closure, three ways the callable's digest used to miss a
    change of data."""

    class Data:
        def __init__(self, y):
            self.y = y

        def fit(self, weights):
            return refit.ConjugateNormalBackend(np.ones((self.y.size, 1)), self.y, draws=200).fit(
                weights
            )

    return Data


def test_a_store_is_keyed_by_the_campaign_s_data_not_the_callable(tmp_path):
    """A campaign on new data (a new full-data fit) refuses the store of the old one, however
    the refit function reads its data; the same data resumes."""
    Data = _data_reading_backends()
    rng = np.random.default_rng(4)
    for way in ("dict", "method", "closure object"):
        store = tmp_path / way.replace(" ", "_")
        data = {"y": rng.normal(size=8)}
        holder = Data(data["y"])

        def by_dict(weights, data=data):
            return Data(data["y"]).fit(weights)

        def by_object(weights, holder=holder):
            return holder.fit(weights)

        fn = {"dict": by_dict, "method": holder.fit, "closure object": by_object}[way]
        backend = refit.CallableBackend(fn, 8)
        for _ in range(2):  # the same data: resumed, nothing refitted
            _loo(store, backend, points=[0, 1], post=backend.fit(np.ones(8)))
            assert len(_lines(store)) == 2
        new_y = rng.normal(size=8)
        data["y"], holder.y = new_y, new_y  # the same callables now read other data
        with pytest.raises(ValueError, match=r"planned with different (backend, )?reference"):
            _loo(store, backend, points=[0, 1], post=backend.fit(np.ones(8)))


def test_the_digest_of_a_callable_sees_arrays_of_its_object_and_dicts():
    Data = _data_reading_backends()
    a, b = Data(np.zeros(5)), Data(np.zeros(5))
    assert repr(refit.CallableBackend(a.fit)) == repr(refit.CallableBackend(b.fit))
    b.y = np.ones(5)
    assert repr(refit.CallableBackend(a.fit)) != repr(refit.CallableBackend(b.fit))
    held = {"y": np.zeros(5)}

    def reads(weights):
        return held["y"]

    before = repr(refit.CallableBackend(reads))
    held["y"] = np.ones(5)
    assert repr(refit.CallableBackend(reads)) != before


def test_a_signed_store_without_its_key_is_refused(tmp_path):
    _loo(tmp_path)
    Path(tmp_path, "key").unlink()
    lines = _lines(tmp_path)
    record = json.loads(lines[0])
    record["lpd"] = [0.0]  # a hand edit that the missing key would let through
    Path(tmp_path, "records.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"store: found signed records in '.*' without its 'key'"):
        _loo(tmp_path)


def test_an_empty_or_linked_key_and_a_lock_directory_are_named(tmp_path):
    _loo(tmp_path / "empty")
    Path(tmp_path, "empty", "key").write_bytes(b"")
    with pytest.raises(ValueError, match=r"store: found an empty 'key' in '.*'"):
        _loo(tmp_path / "empty")
    _loo(tmp_path / "linked")
    key = Path(tmp_path, "linked", "key")
    Path(tmp_path, "elsewhere").write_bytes(key.read_bytes())
    key.unlink()
    key.symlink_to(Path(tmp_path, "elsewhere"))
    with pytest.raises(ValueError, match=r"store: found the path of '.*key' not a readable file"):
        _loo(tmp_path / "linked")
    Path(tmp_path, "locked").mkdir(mode=0o700)
    Path(tmp_path, "locked", "lock").mkdir()
    with pytest.raises(OSError, match=r"store: could not lock '.*lock'"):
        _loo(tmp_path / "locked")


def test_the_key_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A full disk while the key is written leaves no key (no empty secret signing
    everything) and a clear error; the next run writes it."""
    real_write = os.write

    def full_disk(descriptor, data):
        if len(data) == 32:  # the secret
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data)

    monkeypatch.setattr(store_module.os, "write", full_disk)
    with pytest.raises(OSError, match=r"store: could not write the key"):
        _loo(tmp_path)
    assert not Path(tmp_path, "key").exists()
    assert not [p for p in Path(tmp_path).iterdir() if p.name.startswith(".key")]
    monkeypatch.setattr(store_module.os, "write", real_write)
    assert _loo(tmp_path).n_refits == 4


def test_a_store_that_cannot_be_made_is_named(tmp_path, monkeypatch):
    def read_only_mount(path, mode=0o777, exist_ok=False):
        raise OSError(errno.EROFS, "Read-only file system", path)

    monkeypatch.setattr(store_module.os, "makedirs", read_only_mount)
    with pytest.raises(OSError, match=r"store: could not create '.*new' \(Read-only file system\)"):
        CampaignStore(tmp_path / "new")
