"""numba's on-disk cache is used only when its folder is writable and private; damaged index
files are removed; otherwise the kernels compile in memory with one warning saying why."""

import os
import re
import subprocess
import sys

import pytest

#: WAIC's kernels (a few seconds to compile afresh; LOO's take half a minute): each test
#: compiles them in a new process with a cache folder of its own.
SCRIPT = (
    "import warnings, numpy as np\n"
    "warnings.simplefilter('always')\n"
    "import bayesij\n"
    "from bayesij.array.kernels import cache\n"
    "r = bayesij.waic(np.random.default_rng(0).normal(-1, 0.1, size=(2, 100, 20)))\n"
    "print('CACHE', cache.CACHE, round(r.elpd, 6))\n"
)


def _run(cache_dir) -> tuple[str, str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


@pytest.mark.slow
def test_a_damaged_index_is_removed_and_the_kernels_still_work(tmp_path):
    out, _ = _run(tmp_path)
    assert "CACHE True" in out
    expected = out.split()[-1]
    for folder, _, files in os.walk(tmp_path):
        for name in files:
            if name.endswith(".nbi"):
                path = os.path.join(folder, name)
                with open(path, "r+b") as handle:
                    handle.truncate(20)  # a pickle cut short
    out, err = _run(tmp_path)
    assert "CACHE True" in out and out.split()[-1] == expected
    assert "removed" in err and "damaged file(s) from numba's cache" in err


def test_a_folder_others_may_write_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    out, err = _run(shared)
    assert "CACHE False" in out
    assert "may be written by any user" in err and "compiled in memory" in err
    assert not any(name.endswith(".nbi") for _, _, files in os.walk(shared) for name in files)


def test_no_usable_folder_means_memory_not_a_crash(tmp_path, monkeypatch):
    """A read-only install whose user has no writable home: numba finds no locator (as
    root, that cannot be made for real: numba's locators are taken away instead)."""
    from numba.core import caching

    from bayesij.array.kernels import cache

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])
    with pytest.warns(cache.KernelCacheWarning, match=r"numba finds no writable folder"):
        assert cache._decide() is False
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out, _ = _run(blocker / "cache")  # NUMBA_CACHE_DIR unusable: numba's next folder, no crash
    assert "CACHE" in out


def test_every_kernel_module_s_damaged_index_is_removed_and_nothing_else(tmp_path):
    # The damaged-file sweep knows every compiled module of the folder (the AMIP steps'
    # kernels too), and leaves other packages' files alone.
    from pathlib import Path

    from bayesij.array.kernels import cache

    folder = Path(cache.__file__).parent
    decorated = re.compile(r"^@(compiled|fused|reordered|_inlined|njit)\b|cache=CACHE", re.M)
    compiled = sorted(p.stem for p in folder.glob("*.py") if decorated.search(p.read_text()))
    assert cache.kernel_modules() == compiled
    assert {"set_weights", "screen", "rows", "tails"} <= set(compiled)
    for name in ("set_weights._set_weights-64.py311.nbi", "rows._products-9.py311.nbi"):
        (tmp_path / name).write_bytes(b"\x80\x04 cut short")
    (tmp_path / "otherpackage.f-1.py311.nbi").write_bytes(b"not ours")
    removed = cache._remove_damaged(str(tmp_path))
    assert sorted(removed) == [
        "rows._products-9.py311.nbi",
        "set_weights._set_weights-64.py311.nbi",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["otherpackage.f-1.py311.nbi"]
