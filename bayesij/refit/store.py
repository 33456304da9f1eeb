"""An append-only store of finished refits, so that a killed campaign resumes and loses nothing.

A store is a directory with three files:

* ``plan.json`` — the campaign's experiment, a digest of its reference fit (the full-data
  draws and log-likelihood the refits are compared with: the store is keyed by the
  campaign's data, however the backend reads it), the backend and the planned tasks (keys
  and a fingerprint of each task's weights), written once, atomically;
* ``records.jsonl`` — one JSON line per finished refit (successful or failed), appended
  and synced to disk as each refit finishes; every line carries the fingerprint of the
  plan it was made for, so a record is never reused by a different campaign (even when
  ``plan.json`` was deleted);
* ``lock`` — a file lock (:mod:`filelock`) held by the runner working on the store: a
  second runner on the same directory waits until the first is done and then finds its
  refits finished, instead of doing them again. The operating system releases the lock
  of a killed runner.

A line cut short by a kill is not a finished refit: it is dropped when the store is
opened and its refit is done again. Any other damage (a malformed line, a malformed
``plan.json``) is an error that names the file and the line.

The store is private to its user: created with mode 0700, refused when another user owns it
or may write to it, its files opened without following links, the plan written through a
``mkstemp`` file. A fourth file, ``key`` (mode 0600), holds a secret with which every record
is signed (HMAC-SHA256): a record edited by hand, or forged, is an error naming its line; a
second finished record of the same refit too; signed records without their key (deleted) or
with an empty one are refused. The key is written to a temporary file, synced, then linked
into place, so it exists whole or not at all. A store that is not writable (a finished
campaign kept read-only) is read without its lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import warnings
from collections.abc import Iterator

import filelock

__all__ = ["CampaignStore", "StoreBusyWarning", "plan_fingerprint"]

RECORD_STATUSES = ("ok", "failed")


#: Seconds a second runner waits for the store's lock before it gives up.
LOCK_WAIT = 24 * 3600.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _check_private(path: str) -> None:
    """Refuse a store directory another user owns or may write: its records and plan would
    be theirs to plant (a records.jsonl link to a file of yours, forged results)."""
    if not hasattr(os, "getuid"):
        return
    info = os.stat(path)
    if info.st_uid != os.getuid():
        raise ValueError(
            f"store: found {path!r} owned by another user (uid {info.st_uid}); expected a "
            "directory of your own."
        )
    if info.st_mode & 0o022:
        raise ValueError(
            f"store: found {path!r} writable by other users (mode {oct(info.st_mode & 0o777)}); "
            "expected a private directory (chmod go-w)."
        )


@contextlib.contextmanager
def _open_private(file: str, mode: str = "r"):
    """Open a store file without following a link planted in its place."""
    flags = {"r": os.O_RDONLY, "rb": os.O_RDONLY, "r+b": os.O_RDWR}[mode] | _NOFOLLOW
    descriptor = os.open(file, flags)
    with os.fdopen(descriptor, mode) as handle:
        yield handle


class StoreBusyWarning(UserWarning):
    """A second runner found the store locked by another and waits for it."""


def plan_fingerprint(plan: dict) -> str:
    """A short hash of a JSON-ready plan (same plan, same fingerprint, in any process)."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _damaged(file: str, where: str, problem: str, fix: str) -> ValueError:
    return ValueError(f"store: found {where} of {file!r} {problem}; {fix}")


_LINE_FIX = (
    "expected one JSON record per line, as bayesij writes them. Delete that line (its "
    "refit is done again on the next run) or move the store aside to start afresh."
)
_KEY_FIX = (
    "Records are signed with the store's key: move the store aside to start afresh (its "
    "refits are done again)."
)
_PLAN_FIX = (
    "expected the plan bayesij wrote. Delete plan.json to re-plan: records carry their "
    "plan's fingerprint, so only those of the same campaign are reused."
)


class CampaignStore:
    """Finished refits of one campaign, on disk (``path``) or in memory (``path=None``).

    Use it through :meth:`session`, which locks the directory, checks the plan and reads
    the records; :meth:`append` then adds finished refits.

    Parameters
    ----------
    path : str or path-like, optional
        The store's directory (created if missing); None keeps the records in memory.
    retry_failed : bool, default False
        Treat recorded failures as not finished, so that a resumed campaign runs them
        again (for transient failures: a lost worker, a full disk, a time-out).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> import tempfile
    >>> path = tempfile.mkdtemp()
    >>> first = refit.kfold(post, backend, K=3, store=path, executor="sequential", progress=False)
    >>> again = refit.kfold(post, backend, K=3, store=path, executor="sequential", progress=False)
    >>> again.summary == first.summary  # the second call read the finished refits back
    True
    >>> store = refit.CampaignStore(path)  # the same records, opened directly
    """

    def __init__(self, path=None, *, retry_failed: bool = False):
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ValueError(
                f"store: found a {type(path).__name__}; expected a directory path or None."
            )
        self.path = None if path is None else os.fspath(path)
        self.retry_failed = bool(retry_failed)
        self._records: dict[str, dict] = {}
        self._plan_id = ""
        self.read_only = False
        if self.path is not None:
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                raise ValueError(
                    f"store: found {self.path!r}, a file; expected a directory (new or existing)."
                )
            # private: records and plan are the user's; exist_ok: two runners starting on
            # one fresh store at once both find it made (the loser's makedirs raised)
            try:
                os.makedirs(self.path, mode=0o700, exist_ok=True)
            except OSError as error:  # a read-only mount, no permission, a file on the way
                raise OSError(
                    error.errno,
                    f"store: could not create {self.path!r} ({error.strerror or error}); "
                    "expected a directory bayesij can create and write (another path, or "
                    "a copy of the store on a writable disk).",
                ) from error
            _check_private(self.path)
            self.read_only = not os.access(self.path, os.W_OK)

    def _file(self, name: str) -> str:
        assert self.path is not None
        return os.path.join(self.path, name)

    # ------------------------------------------------------------------ session
    @contextlib.contextmanager
    def session(self, plan: dict) -> Iterator[CampaignStore]:
        """Lock the store, record or check ``plan`` and read the finished refits."""
        self._plan_id = plan_fingerprint(plan)
        if self.path is None:
            yield self
            return
        if self.read_only:  # a finished store kept read-only, or someone else's copy
            self._check_plan(plan)
            self._records = self._read()
            yield self
            return
        lock = filelock.FileLock(self._file("lock"))
        try:
            self._acquire(lock, timeout=0)
        except filelock.Timeout:
            warnings.warn(
                f"store: {self.path!r} is in use by another runner; waiting for it to "
                f"finish (at most {LOCK_WAIT:g} s), then resuming from its records (no refit "
                "is done twice).",
                StoreBusyWarning,
                stacklevel=4,
            )
            try:
                self._acquire(lock, timeout=LOCK_WAIT)
            except filelock.Timeout:
                raise ValueError(
                    f"store: found {self.path!r} locked by another runner for {LOCK_WAIT:g} s; "
                    "expected it free. If no runner is alive, delete its 'lock' file."
                ) from None
        try:
            self._check_plan(plan)
            self._records = self._read()
            yield self
        finally:
            lock.release()

    @staticmethod
    def _acquire(lock: filelock.FileLock, timeout: float) -> None:
        try:
            lock.acquire(timeout=timeout)
        except filelock.Timeout:
            raise
        except OSError as error:  # a directory or another user's file named 'lock'
            raise OSError(
                error.errno,
                f"store: could not lock {lock.lock_file!r} ({error.strerror or error}); "
                "expected a lock file bayesij can create there: remove what is in its place.",
            ) from error

    def _check_plan(self, plan: dict) -> None:
        """Record ``plan`` in a new store; in an existing one, insist it is the same plan."""
        file = self._file("plan.json")
        if not os.path.lexists(file):
            if self.read_only:
                raise ValueError(
                    f"store: found the read-only {self.path!r} without a plan; expected a "
                    "writable directory for a new campaign."
                )
            self._write_atomically(file, json.dumps(plan, indent=1))
            return
        found = self._read_plan(file)
        if found != json.loads(json.dumps(plan)):
            changed = sorted(k for k in set(found) | set(plan) if found.get(k) != plan.get(k))
            raise ValueError(
                f"store: found {self.path!r} holding a campaign planned with different "
                f"{', '.join(changed)}; expected the same experiment, data (the reference fit), "
                "backend and settings to resume, or a new directory."
            )

    @staticmethod
    def _read_plan(file: str) -> dict:
        try:
            with _open_private(file) as handle:
                found = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise _damaged(file, "the content", f"not valid JSON ({error})", _PLAN_FIX) from None
        except OSError as error:  # a directory, a link, unreadable
            raise _damaged(
                file, "the path", f"not a readable file ({error.strerror})", _PLAN_FIX
            ) from None
        required = ("experiment", "backend", "settings", "tasks")
        if not isinstance(found, dict) or any(key not in found for key in required):
            raise _damaged(file, "the content", f"without the keys {list(required)}", _PLAN_FIX)
        return found

    def _write_atomically(self, file: str, text: str) -> None:
        descriptor, temporary = tempfile.mkstemp(dir=self.path, prefix=".plan-", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, file)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise self._write_error(file, error, "the plan") from error

    # ------------------------------------------------------------------ records
    def _read(self) -> dict[str, dict]:
        """Complete lines of records.jsonl; a cut-off last line is truncated away."""
        file = self._file("records.jsonl")
        if not os.path.lexists(file):
            return {}
        try:
            with _open_private(file, "rb") as handle:
                content = handle.read()
        except OSError as error:
            raise _damaged(
                file, "the path", f"not a readable file ({error.strerror})", _LINE_FIX
            ) from None
        complete = content[: content.rfind(b"\n") + 1]
        records: dict[str, dict] = {}
        others = 0
        key = self._key(create=False)
        for number, line in enumerate(complete.splitlines(), start=1):
            record = self._parse(file, number, line)
            if key is None and "mac" in record:
                raise ValueError(
                    f"store: found signed records in {file!r} without its 'key' file; "
                    "expected the key bayesij wrote beside them: without it an edited or "
                    "forged record cannot be told from a real one. Move the store aside to "
                    "start afresh."
                )
            self._check_mac(file, number, record, key)
            if record["plan"] != self._plan_id:
                others += 1
            elif record["key"] not in records or records[record["key"]]["status"] == "failed":
                records[record["key"]] = record  # a retried failure is superseded
            else:
                raise _damaged(
                    file,
                    f"line {number}",
                    f"a second finished record of {record['key']!r}",
                    "expected each refit once. Delete the line you do not trust.",
                )
        if others:
            raise ValueError(
                f"store: found {others} record(s) in {file!r} made for a different campaign "
                f"(plan fingerprint other than {self._plan_id}: a different experiment, "
                "backend, settings or data); expected a new directory for a new campaign, "
                "or delete the old store to start again."
            )
        if len(complete) < len(content) and not self.read_only:
            with _open_private(file, "r+b") as handle:
                handle.truncate(len(complete))
        return records

    # ------------------------------------------------------------------ integrity
    def _key(self, create: bool) -> bytes | None:
        """The store's secret (``key``, readable by its owner only): records carry an HMAC
        of their content with it, so an edited or forged record is found out."""
        file = self._file("key")
        if os.path.lexists(file):
            try:
                with _open_private(file, "rb") as handle:
                    secret = handle.read()
            except OSError as error:  # a link planted in its place, a directory
                raise _damaged(
                    file, "the path", f"not a readable file ({error.strerror})", _KEY_FIX
                ) from None
            if not secret:
                raise ValueError(
                    f"store: found an empty 'key' in {self.path!r}; expected the secret "
                    f"bayesij wrote (an empty one would sign anything). {_KEY_FIX}"
                )
            return secret
        if not create or self.read_only:
            return None
        return self._new_key(file)

    def _new_key(self, file: str) -> bytes:
        """A new secret, written to a private temporary file, synced, then linked into
        place: the key exists whole or not at all (a full disk leaves none)."""
        secret = secrets.token_bytes(32)
        descriptor, temporary = tempfile.mkstemp(dir=self.path, prefix=".key-", suffix=".tmp")
        try:
            try:
                data = secret
                while data:
                    data = data[os.write(descriptor, data) :]
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            os.link(temporary, file)  # never replaces a key already there
        except OSError as error:
            raise self._write_error(file, error, "the key") from error
        finally:
            with contextlib.suppress(OSError):
                os.remove(temporary)
        return secret

    @staticmethod
    def _mac(record: dict, key: bytes) -> str:
        body = json.dumps({k: v for k, v in record.items() if k != "mac"}, sort_keys=True)
        return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()

    def _check_mac(self, file: str, number: int, record: dict, key: bytes | None) -> None:
        if key is None:  # a store written before records were signed
            return
        if not hmac.compare_digest(str(record.get("mac", "")), self._mac(record, key)):
            raise _damaged(
                file,
                f"line {number}",
                "a record changed after bayesij wrote it (its signature does not match)",
                "expected the records as written. Delete the "
                "line (its refit is done again) or move the store aside to start afresh.",
            )

    @staticmethod
    def _parse(file: str, number: int, line: bytes) -> dict:
        where = f"line {number}"
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise _damaged(file, where, f"not valid JSON ({error})", _LINE_FIX) from None
        if not isinstance(record, dict):
            raise _damaged(file, where, f"a {type(record).__name__}, not a record", _LINE_FIX)
        missing = [key for key in ("key", "status", "plan") if key not in record]
        if missing:
            raise _damaged(file, where, f"a record without {missing}", _LINE_FIX)
        if record["status"] not in RECORD_STATUSES:
            raise _damaged(file, where, f"the status {record['status']!r}", _LINE_FIX)
        return record

    def _finished(self, record: dict) -> bool:
        return not (self.retry_failed and record["status"] == "failed")

    def records(self) -> dict[str, dict]:
        """Finished refits by key (successful and failed; failed ones not when retrying)."""
        return {key: r for key, r in self._records.items() if self._finished(r)}

    def append(self, record: dict) -> None:
        """Keep one finished refit; on disk, flushed and synced before returning."""
        key = record["key"]
        if key in self._records and self._finished(self._records[key]):
            raise ValueError(f"store: found a second record for {key!r}; expected each refit once.")
        record = {**record, "plan": self._plan_id}
        if self.path is not None:
            if self.read_only:
                raise ValueError(
                    f"store: found {self.path!r} read-only with refits still to run; expected "
                    "a writable store (or a copy of it) to go on with the campaign."
                )
            secret = self._key(create=not os.path.lexists(self._file("records.jsonl")))
            if secret is not None:
                record["mac"] = self._mac(record, secret)
            self._append_line(json.dumps(record) + "\n", key)
        self._records[key] = record

    def _append_line(self, line: str, key: str) -> None:
        file = self._file("records.jsonl")
        data = line.encode()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW
        try:
            descriptor = os.open(file, flags, 0o600)
        except OSError as error:
            raise self._write_error(file, error, f"the refit {key!r}") from error
        try:
            size = os.fstat(descriptor).st_size
            try:
                while data:
                    data = data[os.write(descriptor, data) :]
                os.fsync(descriptor)
            except OSError as error:
                with contextlib.suppress(OSError):
                    os.ftruncate(descriptor, size)  # no half line left behind
                raise self._write_error(file, error, f"the refit {key!r}") from error
        finally:
            os.close(descriptor)

    def _write_error(self, file: str, error: OSError, what: str) -> OSError:
        kept = len(self._records)
        return OSError(
            error.errno,
            f"store: could not write {what} to {file!r} ({error.strerror or error}); the "
            f"{kept} refit(s) recorded before it are kept. Free space (or fix the "
            "permissions) and run the campaign again: it resumes where it stopped.",
        )
