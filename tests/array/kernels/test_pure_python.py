"""Every public estimator runs with ``NUMBA_DISABLE_JIT=1`` (the standard setting for
debugging and coverage: the kernels run as Python) and gives the compiled kernels' numbers.

The fast-math intrinsics (float bits moved by register bitcasts) have a pure-Python twin
used when numba's JIT is off; before it, every estimator failed with "<intrinsic as_float>
is not usable in pure-python"."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import every_estimator
import numpy as np

HELPERS = Path(__file__).parents[2] / "helpers"


def test_every_estimator_gives_the_compiled_numbers_without_the_jit(tmp_path):
    out = tmp_path / "pure.pickle"
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(HELPERS), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-W", "ignore", str(HELPERS / "every_estimator.py"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    pure = pickle.loads(out.read_bytes())
    compiled = every_estimator.results()
    assert sorted(pure) == sorted(compiled)
    for name, values in compiled.items():
        # fast-math reductions are reordered when compiled: the last bits may differ
        np.testing.assert_allclose(pure[name], values, rtol=1e-9, atol=1e-12, err_msg=name)
