"""Say on stderr, once per process, that the kernels are being compiled: the first call
after installing compiles them (numba caches them on disk, so later calls only load them),
and a user should not take the wait for a hang."""

from __future__ import annotations

import sys
import threading

from numba.core import event

__all__ = ["MESSAGE", "listen"]

#: Measured on the project's 2-core machine, cache empty, idle: 38 s for the README's audit
#: (22 s of it PSIS-LOO's kernels); several times that on a loaded machine.
MESSAGE = (
    "bayesij: compiling numerical kernels not yet in numba's disk cache (each kernel once "
    "per input type, so a later call with other types may compile more; about 40 s for an "
    "audit on an idle 2-core machine, minutes on a busy one)..."
)


class _FirstCompile(event.Listener):
    """Prints :data:`MESSAGE` when numba starts compiling a bayesij kernel, the first time."""

    def __init__(self):
        self.announced = False
        self._lock = threading.Lock()

    def on_start(self, ev) -> None:
        if self.announced:
            return
        dispatcher = (ev.data or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if module.startswith("bayesij."):
            with self._lock:
                if not self.announced:
                    self.announced = True
                    print(MESSAGE, file=sys.stderr, flush=True)

    def on_end(self, ev) -> None:
        return None


_LISTENER = _FirstCompile()
_REGISTERED: list[bool] = []


def listen() -> None:
    """Register the listener (idempotent)."""
    if not _REGISTERED:
        event.register("numba:compile", _LISTENER)
        _REGISTERED.append(True)
