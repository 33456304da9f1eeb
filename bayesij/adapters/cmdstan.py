"""Build a posterior container from a CmdStanPy fit or CmdStan output CSV files."""

from __future__ import annotations

import os

import numpy as np

from bayesij.adapters._stan_names import split_columns
from bayesij.array.checks import fail
from bayesij.data.arrays import from_arrays
from bayesij.data.posterior import Posterior

__all__ = ["from_cmdstanpy"]


def _is_paths(value) -> bool:
    if isinstance(value, (str, os.PathLike)):
        return True
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, (str, os.PathLike)) for v in value
    )


def _read_csv(paths):
    """A CmdStanMCMC object from CmdStan CSV files; cmdstanpy parses them without CmdStan."""
    import cmdstanpy

    files = (
        [os.fspath(paths)]
        if isinstance(paths, (str, os.PathLike))
        else [os.fspath(p) for p in paths]
    )
    real = [os.path.realpath(f) for f in files]
    repeated = sorted({f for f, r in zip(files, real, strict=True) if real.count(r) > 1})
    if repeated:
        raise fail(
            "fit_or_csv_files",
            f"the same file more than once {repeated}",
            "one CSV file per chain, each once",
        )
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise fail("fit_or_csv_files", f"missing file(s) {missing}", "CmdStan output CSV files")
    fit = cmdstanpy.from_csv(files)
    if not isinstance(fit, cmdstanpy.CmdStanMCMC):
        raise fail(
            "fit_or_csv_files",
            f"output of the {type(fit).__name__} method",
            "CSV files written by CmdStan's 'sample' method",
        )
    return fit


def from_cmdstanpy(fit_or_csv_files, log_lik="log_lik", quantities=None) -> Posterior:
    """A posterior container from a CmdStanPy fit or CmdStan output CSV files.

    Parameters
    ----------
    fit_or_csv_files : cmdstanpy.CmdStanMCMC, path or list of paths
        A sampling fit, or the CSV files of its chains (one file per chain). CSV files are
        parsed by CmdStanPy, which needs no CmdStan installation for that.
    log_lik : str, default "log_lik"
        Generated quantity holding the pointwise log-likelihood.
    quantities : str or list of str, optional
        Variables (``'beta'``) or elements (``'beta[1]'``). Default: every output column
        except sampler diagnostics (names ending in ``__``) and ``log_lik``.

    Returns
    -------
    Posterior
        Observation ids are Stan's 1-based indices of ``log_lik`` (``'i,j'`` for arrays).
        Warmup draws are left out.

    Examples
    --------
    CmdStan's CSV files are read without CmdStan; sampling needs it installed, so this
    example is not run by the doctests (``tests/adapters/test_cmdstan.py`` reads real
    CmdStan-format files):

    >>> import bayesij
    >>> post = bayesij.from_cmdstanpy(["fit-1.csv", "fit-2.csv"])  # doctest: +SKIP
    >>> fit = model.sample(data=data)  # a cmdstanpy.CmdStanModel  # doctest: +SKIP
    >>> post = bayesij.from_cmdstanpy(fit, quantities=["beta"])  # doctest: +SKIP
    >>> bayesij.loo(post)  # doctest: +SKIP
    """
    fit = _read_csv(fit_or_csv_files) if _is_paths(fit_or_csv_files) else fit_or_csv_files
    if not hasattr(fit, "draws") or not hasattr(fit, "column_names"):
        raise fail(
            "fit_or_csv_files",
            f"a {type(fit).__name__}",
            "a cmdstanpy.CmdStanMCMC fit or paths of CmdStan CSV files",
        )
    draws = np.moveaxis(np.asarray(fit.draws(concat_chains=False), dtype=float), 1, 0)
    values, names, ll_values, obs = split_columns(
        draws, list(fit.column_names), log_lik, quantities
    )
    return from_arrays(values, ll_values, quantity_names=names, obs_names=obs)
