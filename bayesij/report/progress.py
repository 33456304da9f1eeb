"""Progress of a long call (the audit: 15-35 s on a few thousand observations), one line
per stage on standard error: shown in a terminal and in Jupyter, silent in scripts and
logs unless asked for (``progress=True``), never when asked not to (``progress=False``)."""

from __future__ import annotations

import sys
import time

from bayesij.array.checks import fail

__all__ = ["Progress", "interactive", "check_progress"]


def interactive() -> bool:
    """Whether a person is likely watching: standard error is a terminal, or the code runs
    in a Jupyter kernel."""
    if getattr(sys.stderr, "isatty", lambda: False)():
        return True
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    get = getattr(shell, "get_ipython", None)
    kernel = get() if get is not None else None
    return kernel is not None and "IPKernelApp" in getattr(kernel, "config", {})


def check_progress(progress) -> None:
    """``progress`` is None (shown when interactive), True or False."""
    if progress is not None and not isinstance(progress, bool):
        raise fail("progress", repr(progress), "None (shown when interactive), True or False")


class Progress:
    """Stage lines ``bayesij audit [2.1 s]: one pass over the draws ...`` on stderr.

    Parameters
    ----------
    progress : bool or None
        True: always; False: never; None: when :func:`interactive`.
    what : str
        The call's name in each line.
    """

    def __init__(self, progress, what: str):
        check_progress(progress)
        self.enabled = interactive() if progress is None else progress
        self.what = what
        self.start = time.perf_counter()

    def stage(self, words: str) -> None:
        """Say that ``words`` starts now."""
        if self.enabled:
            seconds = time.perf_counter() - self.start
            print(f"bayesij {self.what} [{seconds:.1f} s]: {words}", file=sys.stderr, flush=True)

    def done(self) -> None:
        self.stage("done")
