"""Whether PyStan's builds load on this Python: with httpstan 4.17.0 on Python 3.13 the
programs compile but their modules do not import (``undefined symbol:
_PyThreadState_UncheckedGet``), and :func:`bayesij.refit.stan.build_model` raises
:class:`~bayesij.refit.stan.UnloadableStanModel` saying so. Tests that reach PyStan
through a subprocess, a notebook kernel or the command line (where that error is a line of
output, not an exception the suite's hooks see) ask first, and skip with the reason, as
the CmdStan tests skip where CmdStan is not installed."""

import functools

import pytest


@functools.cache
def _unloadable() -> str | None:
    """The error of building the demo's program (compiled once, then loaded from httpstan's
    cache), or None where it loads."""
    from bayesij.refit.stan import UnloadableStanModel, build_model
    from bayesij.stan_models import example_data, stan_code

    data = example_data("linear_regression", n=20, seed=1)
    try:
        build_model(stan_code("linear_regression"), data=data, random_seed=1)
    except UnloadableStanModel as error:
        return str(error)
    return None


def skip_unless_pystan_loads() -> None:
    """Skip the calling test where PyStan is not installed or cannot load its builds."""
    pytest.importorskip("stan")
    reason = _unloadable()
    if reason is not None:
        pytest.skip(f"PyStan cannot load its builds on this Python: {reason}")
