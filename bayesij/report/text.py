"""Text tables: the most influential units and the plain-text influence report."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from bayesij.data.posterior import Posterior
from bayesij.stats.jackknife import IJCovariance, ij_covariance
from bayesij.stats.loo import loo

__all__ = ["most_influential", "influence_report"]


def most_influential(post: Posterior, top: int = 5, ij: IJCovariance | None = None) -> pd.DataFrame:
    """The ``top`` units of largest |psi| for each quantity, with the predicted change.

    ``change_if_removed = -psi`` is the first-order change of the posterior mean when the
    unit is left out; ``change_in_sd`` divides it by the posterior sd. The scores come from
    ``ij`` (an :func:`~bayesij.ij_covariance` result) when given.
    """
    scores = (ij if ij is not None else ij_covariance(post)).influence
    unit = scores["psi"].dims[1]
    sd = post.quantities.std(dim=("chain", "draw"), ddof=1)
    rows = []
    for name in scores["quantity"].values:
        psi = scores["psi"].sel(quantity=name).values
        mcse = scores["mcse"].sel(quantity=name).values
        order = np.argsort(-np.abs(np.nan_to_num(psi)))[:top]
        scale = float(sd.sel(quantity=name))
        for rank, i in enumerate(order, start=1):
            rows.append(
                {
                    "quantity": name,
                    "rank": rank,
                    unit: scores[unit].values[i],
                    "psi": psi[i],
                    "mcse": mcse[i],
                    "change_if_removed": -psi[i],
                    "change_in_sd": -psi[i] / scale if scale > 0 else np.nan,
                }
            )
    return pd.DataFrame(rows).set_index(["quantity", "rank"])


def _loo_summary(post: Posterior) -> str:
    """PSIS-LOO estimates and the units whose k-hat says LOO cannot be trusted there."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report states the diagnostics itself
        result = loo(post)
    lines = ["PSIS-LOO", result.estimates().to_string(float_format=lambda v: f"{v:.4g}")]
    bad = result.bad_k_ids()
    lines.append(
        f"Pareto k-hat above {result.k_threshold:.2g} for {len(bad)} of "
        f"{result.n_units} units{': ' + str(bad[:10]) if bad else ''}"
    )
    return "\n".join(lines)


def influence_report(post: Posterior, top: int = 5) -> str:
    """Text report: posterior summary, most influential units, IJ vs posterior sd (with the
    linearity check), and PSIS-LOO with its k-hat diagnostics."""
    summary = pd.DataFrame(
        {
            "mean": post.quantities.mean(dim=("chain", "draw")).values,
            "sd": post.quantities.std(dim=("chain", "draw"), ddof=1).values,
        },
        index=pd.Index(post.quantity_names, name="quantity"),
    )
    fmt = {"float_format": lambda v: f"{v:.4g}"}
    ij = ij_covariance(post, check_linearity=True)  # psi, IJ and linearity in one pass
    return "\n\n".join(
        [
            repr(post),
            "Posterior summary\n" + summary.to_string(**fmt),
            f"Most influential units (top {top} by |psi| per quantity; "
            "change_if_removed = -psi)\n" + most_influential(post, top, ij).to_string(**fmt),
            str(ij),
            _loo_summary(post),
        ]
    )
