"""The first call after installing says on stderr that the kernels are being compiled, once;
a call that finds them cached says nothing."""

import os
import subprocess
import sys

SCRIPT = (
    "import numpy as np, bayesij; "
    "rng = np.random.default_rng(1); "
    "bayesij.loo(rng.normal(-1, 0.3, size=(2, 100, 20))); "
    "bayesij.waic(rng.normal(-1, 0.3, size=(2, 100, 20)))"
)


def _run(cache) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_first_compile_is_announced_once_and_a_cached_run_is_silent(tmp_path):
    first = _run(tmp_path)
    assert first.count("bayesij: compiling numerical kernels not yet in numba's disk cache") == 1
    assert "about 40 s" in first
    assert "compiling" not in _run(tmp_path)
