"""Where Stan programs and executables live: a private per-user cache folder (mode 0700,
owned by this user, not a link) and files written there without following links, left
alone when unchanged so that CmdStanPy keeps its executable. (Sampling with PyStan and
CmdStanPy: test_backends.py.)"""

import asyncio
import shutil
import stat
import threading
from pathlib import Path

import pytest

from bayesij.refit.stan import outside_event_loop, private_folder, write_private


def test_cmdstan_programs_go_to_a_private_folder_and_links_are_not_followed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = Path(private_folder())
    assert folder.is_relative_to(tmp_path) and stat.S_IMODE(folder.stat().st_mode) == 0o700
    program = folder / "model.stan"
    write_private(str(program), "parameters { real mu; }")
    assert stat.S_IMODE(program.stat().st_mode) == 0o600
    before = program.stat().st_mtime_ns
    write_private(str(program), "parameters { real mu; }")
    assert program.stat().st_mtime_ns == before, "unchanged: the executable stays valid"

    target = tmp_path / "someone_elses_file"
    target.write_text("keep")
    (folder / "planted.stan").symlink_to(target)
    with pytest.raises(PermissionError, match="symbolic links are not followed"):
        write_private(str(folder / "planted.stan"), "parameters { real mu; }")
    assert target.read_text() == "keep"

    folder.chmod(0o777)
    with pytest.raises(PermissionError, match=r"others can use \(mode 777\)"):
        private_folder()
    folder.chmod(0o700)
    shutil.rmtree(folder)
    folder.symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(PermissionError, match="a symbolic link or not a directory"):
        private_folder()


def _thread_name() -> str:
    return threading.current_thread().name


def test_outside_event_loop_runs_here_without_a_loop_and_in_one_stan_thread_inside_one():
    # A compiled Stan model's autodiff stack exists only in the thread that loaded it: every
    # PyStan call from inside a loop must go to the same thread, never a new one per call.
    assert outside_event_loop(_thread_name) == threading.current_thread().name

    async def inside() -> list[str]:
        return [outside_event_loop(_thread_name) for _ in range(3)]

    names = asyncio.run(inside()) + asyncio.run(inside())
    assert len(set(names)) == 1 and names[0].startswith("bayesij-stan")
