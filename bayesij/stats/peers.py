"""One switch for a peer's PSIS-LOO conventions: the tail length's rounding, the order of
tied draws, the default relative efficiency and the standard error's divisor, set together
so that ``loo(data, convention="arviz-stats")`` is ``arviz_stats.loo``'s answer.

========================  =======  ===================  ===================  ============
convention                tail     ties at the cutoff   default ``r_eff``    SE
========================  =======  ===================  ===================  ============
``"bayesij"`` (default)   ceil     left out of the tail per unit, chains     sqrt(N var)
``"R loo"``               ceil     by stable position   per unit, chains     sqrt(N) sd
``"arviz-stats"``         floor    by stable position   posterior ESS        sqrt(N) sd
``"ArviZ 0.23"``          ceil     left out of the tail posterior ESS        sqrt(N var)
========================  =======  ===================  ===================  ============

Weighted quantiles (LOO expectations) are R loo's (linear between cumulative weights)
except for "arviz-stats", whose weighted Hyndman-Fan type 7 uses the effective sample size
``1 / sum w^2``. "per unit, chains" is R loo's ``relative_eff(exp(log_lik), chain_id)``; "one
number, posterior ESS" is ArviZ's: the mean split-chain ESS of the mean over every posterior
element, divided by the number of draws (1 with one chain).
"""

from __future__ import annotations

from typing import NamedTuple

from bayesij.array.checks import checked_r_eff, fail
from bayesij.array.ess import mean_relative_ess

__all__ = ["CONVENTIONS", "PsisSettings", "psis_settings", "unit_r_eff", "mean_relative_ess"]


class PsisSettings(NamedTuple):
    """What a convention sets: ``r_eff`` is None (per unit from the chains), a number or
    the caller's value."""

    tail_rule: str
    ties: str
    r_eff: object
    ddof: int
    quantile: str


#: name -> (tail rule, tie rule, r_eff rule, SE ddof, weighted quantile rule)
CONVENTIONS = {
    "bayesij": ("ceil", "above", "chains", 0, "R loo"),
    "R loo": ("ceil", "position", "chains", 1, "R loo"),
    "arviz-stats": ("floor", "position", "posterior", 1, "type 7"),
    "ArviZ 0.23": ("ceil", "above", "posterior", 0, "R loo"),
}


def psis_settings(convention, source, *, tail_rule=None, ties=None, r_eff=None, ddof=None):
    """The settings of ``convention`` for ``source`` (a :class:`LogLikSource`), each one
    given explicitly taking precedence.

    Parameters
    ----------
    convention : str or None
        A key of :data:`CONVENTIONS`; None is ``"bayesij"``.
    source : LogLikSource
        Its posterior draws give the ``"posterior"`` r_eff rule's number.
    tail_rule, ties, r_eff, ddof : optional
        Explicit values (None: the convention's).

    Returns
    -------
    PsisSettings
    """
    name = "bayesij" if convention is None else convention
    if not isinstance(name, str) or name not in CONVENTIONS:
        raise fail("convention", repr(convention), f"one of {sorted(CONVENTIONS)} or None")
    default_tail, default_ties, r_eff_rule, default_ddof, quantile = CONVENTIONS[name]
    if r_eff is None and r_eff_rule == "posterior":
        r_eff = _posterior_r_eff(source, name)
    return PsisSettings(
        default_tail if tail_rule is None else tail_rule,
        default_ties if ties is None else ties,
        r_eff,
        default_ddof if ddof is None else ddof,
        quantile,
    )


def _posterior_r_eff(source, name: str) -> float:
    if source.posterior is None:
        raise fail(
            "convention",
            f"{name!r} with a lazy log-likelihood",
            "r_eff= given with it (ArviZ's number: the posterior's mean ESS over S, "
            "bayesij.array.ess.mean_relative_ess)",
        )
    draws = source.all_posterior_draws()
    if draws.shape[2] == 0:
        raise fail(
            "convention",
            f"{name!r} for a log-likelihood without posterior draws",
            "data with a posterior group (its ESS gives r_eff), or r_eff= given",
        )
    return mean_relative_ess(draws)


def unit_r_eff(settings, source):
    """The settings' r_eff checked as one value per unit of ``source`` (None: the kernel
    computes R loo's from the chains)."""
    return None if settings.r_eff is None else checked_r_eff(settings.r_eff, source.n_units)
