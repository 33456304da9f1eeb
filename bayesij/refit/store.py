"""An append-only store of finished refits, so that a killed campaign resumes and loses nothing.

A store is a directory with two files:

* ``plan.json`` — the campaign's experiment, backend and planned tasks (keys and a
  fingerprint of each task's weights), written once, atomically;
* ``records.jsonl`` — one JSON line per finished refit (successful or failed), appended
  and flushed to disk as each refit finishes.

A line cut short by a kill is not a finished refit: it is dropped when the store is
opened and its refit is done again. Opening a store with a different plan is an error, so
results of different campaigns never mix.
"""

from __future__ import annotations

import json
import os

from bayesij.array.checks import fail

__all__ = ["CampaignStore"]


class CampaignStore:
    """Finished refits of one campaign, on disk (``path``) or in memory (``path=None``)."""

    def __init__(self, path=None):
        self.path = None if path is None else os.fspath(path)
        self._records: dict[str, dict] = {}
        if self.path is not None:
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                raise fail("store", f"{self.path!r}, a file", "a directory (new or existing)")
            os.makedirs(self.path, exist_ok=True)
            self._records = self._read()

    @property
    def _records_file(self) -> str:
        return os.path.join(self.path, "records.jsonl")

    @property
    def _plan_file(self) -> str:
        return os.path.join(self.path, "plan.json")

    def _read(self) -> dict[str, dict]:
        """Complete lines of records.jsonl; a cut-off last line is truncated away."""
        if not os.path.exists(self._records_file):
            return {}
        with open(self._records_file, "rb") as handle:
            content = handle.read()
        complete = content[: content.rfind(b"\n") + 1]
        records = {}
        for line in complete.splitlines():
            record = json.loads(line)
            records.setdefault(record["key"], record)
        if len(complete) < len(content):
            with open(self._records_file, "r+b") as handle:
                handle.truncate(len(complete))
        return records

    def check_plan(self, plan: dict) -> None:
        """Record ``plan`` in a new store; in an existing one, insist it is the same plan."""
        if self.path is None:
            return
        if os.path.exists(self._plan_file):
            with open(self._plan_file) as handle:
                found = json.load(handle)
            if found != json.loads(json.dumps(plan)):
                changed = sorted(k for k in set(found) | set(plan) if found.get(k) != plan.get(k))
                raise fail(
                    "store",
                    f"{self.path!r} holding a campaign planned with different {', '.join(changed)}",
                    "the same experiment, backend and settings to resume, or a new directory",
                )
            return
        temporary = self._plan_file + ".tmp"
        with open(temporary, "w") as handle:
            json.dump(plan, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._plan_file)

    def records(self) -> dict[str, dict]:
        """Finished refits by key (successful and failed)."""
        return dict(self._records)

    def append(self, record: dict) -> None:
        """Keep one finished refit; on disk, flushed and synced before returning."""
        if record["key"] in self._records:
            raise ValueError(
                f"store: found a second record for {record['key']!r}; expected each refit once."
            )
        self._records[record["key"]] = record
        if self.path is not None:
            with open(self._records_file, "a") as handle:
                handle.write(json.dumps(record) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
