"""Every Python example in the README runs as written, in order, in one namespace (as a
reader pasting them into a notebook would), on data that ships offline."""

import re
import warnings
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_python_examples():
    assert len(_python_blocks()) >= 8


@pytest.mark.stan
@pytest.mark.slow
def test_every_readme_python_block_runs_in_order(tmp_path, monkeypatch):
    pytest.importorskip("stan")
    monkeypatch.chdir(tmp_path)  # the examples write audit.html and a campaign store here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__main__"}
    for number, block in enumerate(_python_blocks()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the examples' diagnostics are not the test
            try:
                exec(compile(block, f"README python block {number}", "exec"), namespace)
            except Exception as error:  # name the block that failed
                raise AssertionError(f"README python block {number} failed:\n{block}") from error
    assert (tmp_path / "audit.html").is_file()
