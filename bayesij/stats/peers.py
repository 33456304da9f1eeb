"""One switch for a peer's PSIS-LOO conventions: the tail length's rounding, the order of
tied draws, the default relative efficiency and the standard error's divisor, set together
so that ``loo(data, convention="arviz-stats")`` is ``arviz_stats.loo``'s answer.

========================  =======  ===================  ===================  ============
convention                tail     ties at the cutoff   default ``r_eff``    SE
========================  =======  ===================  ===================  ============
``"bayesij"`` (default)   ceil     left out of the tail per unit, chains     sqrt(N var)
``"R loo"``               ceil     by stable position   per unit, split      sqrt(N) sd
``"R loo 2.5"``           ceil     by stable position   per unit, chains     sqrt(N) sd
``"arviz-stats"``         floor    by NumPy's argsort   posterior ESS        sqrt(N) sd
``"ArviZ 0.23"``          ceil     left out of the tail posterior ESS        sqrt(N var)
========================  =======  ===================  ===================  ============

Weighted quantiles (LOO expectations) are R loo's (linear between cumulative weights)
except for "arviz-stats", whose weighted Hyndman-Fan type 7 uses the effective sample size
``1 / sum w^2``. "per unit, split" is R loo's from 2.9 on (the newest, 2.10.1, July 2026; also named
``"R loo 2.10"``), ``posterior::ess_basic`` of ``exp(log_lik)``: the ESS of split chains;
"per unit, chains" is R loo's ``relative_eff(exp(log_lik), chain_id)`` up to 2.8 (Debian's
2.5.1, ``"R loo 2.5"``: the ESS of whole chains), which differs by up to 0.03 and moves k-hat
by up to 0.08 on real fits. "one number,
posterior ESS" is ArviZ's: the mean split-chain ESS of the mean over every posterior
element, divided by the number of draws (1 with one chain).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from bayesij.array.checks import check_ddof, fail
from bayesij.array.ess import mean_relative_ess
from bayesij.array.psis import TIE_RULES, check_tail_rule

__all__ = [
    "CONVENTIONS",
    "PsisOptions",
    "psis_options",
    "own_ddof",
    "PsisSettings",
    "psis_settings",
    "psis_rules",
    "mean_relative_ess",
]


@dataclass(frozen=True)
class PsisOptions:
    """How every estimator that Pareto-smooths does it: a peer's convention, with any of its
    settings overridden.

    Passed as ``convention=`` to :func:`bayesij.loo` and every estimator that smooths
    (``convention="R loo"`` is the shorthand for ``PsisOptions("R loo")``).

    Parameters
    ----------
    convention : str, optional
        "bayesij", "R loo" (the newest, 2.10.1; also "R loo 2.10"), "R loo 2.5" (Debian's),
        "arviz-stats" or "ArviZ 0.23": the peer whose settings are the defaults (table in
        :mod:`bayesij.stats.peers`);
        None is "bayesij": ``tail_rule="ceil"``, ``ties="above"``, ``r_eff`` per unit from
        the chains, ``ddof=0``.
    r_eff : float or array_like of shape (n_units,), optional
        Relative efficiency of ``exp(l_n)``. Default: the convention's; bayesij's and "R
        loo 2.5"'s is per unit from the chains, exactly as R loo's ``relative_eff(exp(log_lik),
        chain_id)`` up to 2.8; "R loo"'s (= "R loo 2.10") per unit from split chains, as R
        loo 2.9 and later compute it (``posterior::ess_basic``); ArviZ's is one number, the
        mean ESS of the posterior over S.
    tail_rule : {"ceil", "floor"}, optional
        Tail length ``ceil`` or ``floor`` of ``min(S/5, 3 sqrt(S/r_eff))``: "ceil" equals
        R loo (<= 2.10) and ArviZ 0.23, "floor" the PSIS paper, posterior and arviz-stats.
    ties : {"above", "position", "quicksort"}, optional
        Draws tied with the tail cutoff (repeated MCMC draws, e.g. after divergences or
        rejected proposals): "above" leaves them out of the Pareto tail, as ArviZ 0.23;
        "position" keeps the ``M`` largest by stable sorted position (later draws last),
        as R loo; "quicksort" by the position NumPy's default ``argsort`` of the draws
        gives them, as arviz-stats. The order also decides which of the draws tied inside
        the tail gets which smoothed weight: elpd and k-hat do not depend on it, an
        expectation of another quantity (LOO-PIT, LOO means, CRPS) does. Without ties the
        three are identical.
    ddof : {0, 1}, optional
        The elpd SE's divisor: 0 as ArviZ 0.23 ``sqrt(N var_n)``, 1 as R loo and
        arviz-stats ``sqrt(N) sd_n``. Estimators whose peer fixes it (``loo_score``,
        ``loo_subsample``: 0) keep theirs unless it is given here.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=30)
    >>> mu = y.mean() + rng.normal(size=(4, 250, 1)) / np.sqrt(30)  # exact posterior draws
    >>> log_lik = -0.5 * (y - mu) ** 2
    >>> r_loo = bayesij.loo(log_lik, convention="R loo")
    >>> as_r_but_floor = bayesij.PsisOptions("R loo", tail_rule="floor")
    >>> bayesij.loo(log_lik, convention=as_r_but_floor).tail_rule, r_loo.ddof
    ('floor', 1)

    References
    ----------
    .. [1] Vehtari, A., Simpson, D., Gelman, A., Yao, Y. and Gabry, J. (2024). Pareto
       smoothed importance sampling. JMLR 25(72).
    """

    convention: str | None = None
    r_eff: object = None
    tail_rule: str | None = None
    ties: str | None = None
    ddof: int | None = None

    def __post_init__(self):
        name = self.convention
        if name is not None and (not isinstance(name, str) or name not in CONVENTIONS):
            raise fail("convention", repr(name), f"one of {sorted(CONVENTIONS)} or None")
        if self.tail_rule is not None:
            check_tail_rule(self.tail_rule)
        if self.ties is not None and self.ties not in TIE_RULES:
            raise fail("ties", repr(self.ties), f"one of {TIE_RULES}")
        if self.ddof is not None:
            check_ddof(self.ddof)

    def __repr__(self) -> str:
        given = [
            f"{field}={getattr(self, field)!r}"
            for field in ("convention", "r_eff", "tail_rule", "ties", "ddof")
            if getattr(self, field) is not None
        ]
        return f"PsisOptions({', '.join(given)})"


def psis_options(value, argument: str = "convention") -> PsisOptions:
    """``value`` as :class:`PsisOptions`: None (bayesij's), a convention's name, or the
    options themselves."""
    if value is None:
        return PsisOptions()
    if isinstance(value, PsisOptions):
        return value
    if isinstance(value, str):
        return PsisOptions(value)
    raise fail(
        argument,
        f"a {type(value).__name__}",
        f"None, a convention's name (one of {sorted(CONVENTIONS)}) or bayesij.PsisOptions",
    )


def own_ddof(convention, default: int) -> int:
    """The SE divisor of an estimator whose peer fixes it at ``default``: the options'
    ``ddof`` where given, else ``default`` (a convention's name does not change it)."""
    given = psis_options(convention).ddof
    return default if given is None else given


class PsisSettings(NamedTuple):
    """What a convention sets: ``r_eff`` is None (per unit from the chains), a number or
    the caller's value; ``r_eff_rule`` how it is found where none is given
    (:meth:`~bayesij.data.source.LogLikSource.relative_eff`) and ``convention`` the
    convention's name."""

    tail_rule: str
    ties: str
    r_eff: object
    ddof: int
    quantile: str
    r_eff_rule: str = "chains"
    convention: str = "bayesij"


#: name -> (tail rule, tie rule, r_eff rule, SE ddof, weighted quantile rule)
CONVENTIONS = {
    "bayesij": ("ceil", "above", "chains", 0, "R loo"),
    "R loo": ("ceil", "position", "split", 1, "R loo"),
    "R loo 2.10": ("ceil", "position", "split", 1, "R loo"),
    "R loo 2.5": ("ceil", "position", "chains", 1, "R loo"),
    "arviz-stats": ("floor", "quicksort", "posterior", 1, "type 7"),
    "ArviZ 0.23": ("ceil", "above", "posterior", 0, "R loo"),
}


def psis_settings(convention, source, *, ddof: int | None = None) -> PsisSettings:
    """The settings of ``convention`` for ``source`` (a :class:`LogLikSource`): each one the
    options give explicitly, else the convention's.

    Parameters
    ----------
    convention : None, str or PsisOptions
        As :func:`psis_options` reads it.
    source : LogLikSource or None
        Its posterior draws give the ``"posterior"`` r_eff rule's number; None for
        independent draws (``r_eff`` 1: none may be given).
    ddof : {0, 1}, optional
        The estimator's own SE divisor where its peer fixes one (the options' ``ddof``, if
        given, still wins); None: the convention's.

    Returns
    -------
    PsisSettings
    """
    settings = psis_rules(convention, ddof=ddof)
    if source is None and settings.r_eff is not None:
        raise fail(
            "convention",
            f"r_eff={settings.r_eff!r} for independent draws",
            "PsisOptions without r_eff (it is 1 here)",
        )
    if source is None or settings.r_eff is not None:
        return settings
    return settings._replace(r_eff=source.relative_eff(settings.r_eff_rule, settings.convention))


def psis_rules(convention, *, ddof: int | None = None) -> PsisSettings:
    """The settings of ``convention`` before any draws are read: ``r_eff`` is the options'
    own (None where the convention's ``r_eff_rule`` finds it from the draws,
    :meth:`~bayesij.data.source.LogLikSource.relative_eff`); the rest as
    :func:`psis_settings`."""
    options = psis_options(convention)
    name = "bayesij" if options.convention is None else options.convention
    default_tail, default_ties, r_eff_rule, default_ddof, quantile = CONVENTIONS[name]
    if options.ddof is not None:
        ddof = options.ddof
    return PsisSettings(
        default_tail if options.tail_rule is None else options.tail_rule,
        default_ties if options.ties is None else options.ties,
        options.r_eff,
        default_ddof if ddof is None else ddof,
        quantile,
        r_eff_rule,
        name,
    )
