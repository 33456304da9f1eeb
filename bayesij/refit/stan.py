"""Compile and sample Stan programs for refits: PyStan (works on a fresh machine) and
CmdStanPy (where CmdStan is installed). The adapters turn the fits into containers."""

from __future__ import annotations

import contextlib
import io
import sys

__all__ = ["sample_pystan", "sample_cmdstanpy"]


def _build_and_sample(code: str, data: dict, seed: int, sample_kwargs: dict, progress: bool):
    import stan

    # PyStan writes "Building..." to stdout and its progress and sampler messages to stderr:
    # both go to stderr when progress is asked for, nowhere otherwise, so that a refit
    # campaign or a report on stdout is not flooded.
    sink = sys.stderr if progress else io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        model = stan.build(code, data=data, random_seed=seed)
        return model.sample(**sample_kwargs)


def sample_pystan(code: str, data: dict, seed: int, *, progress: bool = False, **sample_kwargs):
    """Build (cached by PyStan after the first compile) and sample a Stan program.

    PyStan runs its own event loop; inside a running one (a Jupyter notebook) the work
    goes to a thread of its own, so no ``nest_asyncio`` is needed. ``progress=True`` shows
    PyStan's build and sampling progress on stderr; by default it is silent.

    PyStan (httpstan) keys its build cache by the Stan program, the httpstan version, the
    platform, the Python version and the Python executable: every new virtual environment
    compiles each program once (about a minute), then reuses the build.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    args = (code, data, seed, sample_kwargs, progress)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _build_and_sample(*args)
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(_build_and_sample, *args).result()


_COMPILED: dict = {}


def sample_cmdstanpy(code: str, data: dict, seed: int, **sample_kwargs):
    """Compile (once per process) and sample a Stan program with CmdStanPy."""
    import hashlib
    import os
    import tempfile

    import cmdstanpy

    key = hashlib.sha256(code.encode()).hexdigest()[:16]
    if key not in _COMPILED:
        folder = os.path.join(tempfile.gettempdir(), "bayesij-cmdstan")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"model_{key}.stan")
        with open(path, "w") as handle:
            handle.write(code)
        _COMPILED[key] = cmdstanpy.CmdStanModel(stan_file=path)
    return _COMPILED[key].sample(data=data, seed=seed, show_progress=False, **sample_kwargs)
