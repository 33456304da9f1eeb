"""Whether the draws have converged, before anything is computed from them: the
rank-normalised split R-hat, bulk and tail ESS of each quantity (equal to ArviZ 0.23's
``rhat(method="rank")`` and ``ess(method="bulk" | "tail")``, which arviz-stats 1.x keeps),
and the sampler's divergent transitions and energy BFMI where the fit saved them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesij.array.checks import fail
from bayesij.array.convergence import bfmi, bulk_ess, rank_rhat, tail_ess
from bayesij.data.fit import read

__all__ = [
    "BFMI_LIMIT",
    "Convergence",
    "convergence",
    "divergent_of",
    "bfmi_of",
    "convergence_of_draws",
    "RHAT_LIMIT",
    "ESS_PER_CHAIN",
]

#: R-hat above this says the chains have not mixed (Vehtari et al. 2021).
RHAT_LIMIT = 1.01

#: E-BFMI below this says the momentum resampling explores the energy poorly (Betancourt
#: 2016; Stan and ArviZ warn at the same figure).
BFMI_LIMIT = 0.3

#: Bulk or tail ESS below this many per chain is too few for R-hat and the Monte Carlo
#: errors to be trusted (Vehtari et al. 2021; PyMC warns at the same figure).
ESS_PER_CHAIN = 100


@dataclass(frozen=True)
class Convergence:
    """R-hat, bulk and tail ESS of each quantity, and the divergent transitions.

    Attributes
    ----------
    table : pandas.DataFrame
        Indexed by quantity: ``rhat``, ``ess_bulk``, ``ess_tail``.
    n_chains, n_draws : int
        Chains, and draws per chain.
    divergent : int or None
        Divergent transitions after warm-up (the ``diverging`` of ``sample_stats``); None
        where the fit did not save them.
    bfmi : ndarray of shape (n_chains,) or None
        Each chain's energy BFMI (``sample_stats.energy``; arviz-stats' ``bfmi``); None
        where the fit did not save the energy.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> draws = rng.normal(size=(4, 500, 1))
    >>> draws[0] += 1.0  # one chain elsewhere
    >>> fit = bayesij.from_arrays(draws, rng.normal(size=(4, 500, 3)), quantity_names=["mu"])
    >>> result = bayesij.convergence(fit)
    >>> bool(result.table.loc["mu", "rhat"] > 1.01), result.converged
    (True, False)
    """

    table: pd.DataFrame
    n_chains: int
    n_draws: int
    divergent: int | None = None
    bfmi: np.ndarray | None = None

    @property
    def converged(self) -> bool:
        """No R-hat above :data:`RHAT_LIMIT`, no ESS below :data:`ESS_PER_CHAIN` per chain,
        no divergent transition and no chain's E-BFMI below :data:`BFMI_LIMIT`."""
        return not self.problems()

    @property
    def mixed(self) -> bool:
        """No R-hat above :data:`RHAT_LIMIT` and no divergence (the ESS may still be too
        few)."""
        rhat = self.table["rhat"].dropna()
        return not (rhat > RHAT_LIMIT).any() and not self.divergent

    def problems(self) -> list[str]:
        """What is wrong, one phrase each (empty when nothing is)."""
        out = []
        rhat = self.table["rhat"].dropna()
        high = rhat[rhat > RHAT_LIMIT].sort_values(ascending=False)
        if len(high):
            out.append(
                f"R-hat up to {high.iloc[0]:.3g} ({_names(high.index)}; above {RHAT_LIMIT:g})"
            )
        floor = ESS_PER_CHAIN * self.n_chains
        ess = self.table[["ess_bulk", "ess_tail"]].min(axis=1).dropna()
        low = ess[ess < floor].sort_values()
        if len(low):
            out.append(
                f"ESS down to {low.iloc[0]:.0f} ({_names(low.index)}; below {floor}, "
                f"{ESS_PER_CHAIN} per chain)"
            )
        if self.divergent:
            out.append(f"{self.divergent} divergent transition(s)")
        if self.bfmi is not None and np.any(self.bfmi < BFMI_LIMIT):
            low = np.flatnonzero(self.bfmi < BFMI_LIMIT)
            out.append(
                f"E-BFMI down to {np.min(self.bfmi):.2g} (chain(s) {low.tolist()}; below "
                f"{BFMI_LIMIT:g})"
            )
        return out

    def __str__(self) -> str:
        head = f"Convergence of {self.n_chains} chain(s) x {self.n_draws} draws: "
        problems = self.problems()
        head += "; ".join(problems) if problems else "R-hat, bulk and tail ESS in bounds"
        return head + "\n" + self.table.to_string(float_format=lambda v: f"{v:.4g}")


def _names(index, limit: int = 3) -> str:
    names = [str(n) for n in index]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def convergence(data, *, quantities=None) -> Convergence:
    """R-hat, bulk and tail ESS of every posterior quantity, and the divergences.

    Parameters
    ----------
    data : Posterior, InferenceData or DataTree
        The fit (its posterior draws; the ``sample_stats`` group's ``diverging`` where
        saved).
    quantities : list of str, optional
        The quantities (element names as ``beta[2]``, or variable names); default every
        posterior quantity.

    Returns
    -------
    Convergence

    References
    ----------
    .. [1] Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Bürkner, P.-C. (2021).
       Rank-normalization, folding, and localization: an improved R-hat for assessing
       convergence of MCMC. Bayesian Analysis 16(2), 667-718.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(1)
    >>> fit = bayesij.from_arrays(rng.normal(size=(4, 1000, 2)), rng.normal(size=(4, 1000, 5)))
    >>> result = bayesij.convergence(fit)
    >>> result.converged, list(result.table.columns)
    (True, ['rhat', 'ess_bulk', 'ess_tail'])
    """
    fit = read(data)
    draws, names = fit.posterior_draws(quantities)
    if draws.shape[1] < 4:
        raise fail("data", f"{draws.shape[1]} draws per chain", "at least 4 draws per chain")
    return convergence_of_draws(draws, names, divergent_of(fit), bfmi_of(fit))


def convergence_of_draws(
    draws: np.ndarray, names: list, divergent=None, chain_bfmi=None
) -> Convergence:
    """:class:`Convergence` of draws (n_chains, n_draws, K) named ``names``, with
    ``divergent`` transitions and each chain's E-BFMI ``chain_bfmi`` (None: unknown)."""
    table = pd.DataFrame(
        {"rhat": rank_rhat(draws), "ess_bulk": bulk_ess(draws), "ess_tail": tail_ess(draws)},
        index=pd.Index(list(names), name="quantity"),
    )
    return Convergence(table, int(draws.shape[0]), int(draws.shape[1]), divergent, chain_bfmi)


def divergent_of(fit) -> int | None:
    """The number of divergent transitions the fit saved (``sample_stats.diverging``)."""
    if "sample_stats" not in fit.groups_of_input:
        return None
    stats = fit.group("sample_stats")
    if "diverging" not in stats:
        return None
    return int(np.asarray(stats["diverging"].values, dtype=bool).sum())


def bfmi_of(fit) -> np.ndarray | None:
    """Each chain's energy BFMI from the fit's ``sample_stats.energy`` (None where it was
    not saved)."""
    if "sample_stats" not in fit.groups_of_input:
        return None
    stats = fit.group("sample_stats")
    if "energy" not in stats:
        return None
    return bfmi(stats["energy"].transpose("chain", "draw", ...).values)
