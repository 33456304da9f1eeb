"""Where Stan programs and executables live: a private per-user cache folder (mode 0700,
owned by this user, not a link) and files written there without following links, left
alone when unchanged so that CmdStanPy keeps its executable. (Sampling with PyStan and
CmdStanPy: test_backends.py.)"""

import shutil
import stat
from pathlib import Path

import pytest

from bayesij.refit.stan import private_folder, write_private


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
