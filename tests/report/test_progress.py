"""Progress of the audit: one line per stage on stderr when someone watches or asks,
nothing otherwise."""

import sys

import numpy as np
import pytest

import bayesij
from bayesij.report.progress import Progress, interactive


def test_progress_is_one_line_per_stage_on_stderr_when_asked(capsys):
    rng = np.random.default_rng(2)
    draws = rng.normal(0.3, 0.1, size=(4, 250, 2))
    log_lik = rng.normal(-1, 0.1, size=(4, 250, 30)) + 0.2 * draws[..., :1]
    post = bayesij.from_arrays(draws, log_lik)
    bayesij.audit(post, settings={"progress": True})
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and lines[0].startswith("bayesij audit [")
    assert "one pass over 1000 draws x 30 observations" in captured.err
    assert lines[-1].endswith(": done")
    bayesij.audit(post)  # not a terminal, not Jupyter: silent
    bayesij.audit(post, settings={"progress": False})
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match=r"progress: found 'yes'; expected None"):
        bayesij.audit(post, settings={"progress": "yes"})


def test_watching_is_a_terminal_or_a_jupyter_kernel(monkeypatch):
    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

        def write(self, text):
            pass

        def flush(self):
            pass

    monkeypatch.delitem(sys.modules, "IPython", raising=False)  # no kernel either
    monkeypatch.setattr(sys, "stderr", Stream(False))  # a script's log
    assert not interactive() and not Progress(None, "audit").enabled
    assert Progress(True, "audit").enabled
    monkeypatch.setattr(sys, "stderr", Stream(True))  # a terminal
    assert interactive() and Progress(None, "audit").enabled
    assert not Progress(False, "audit").enabled
