"""Text tables: the most influential units and the plain-text influence report."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from bayesij.data.fit import read
from bayesij.stats.jackknife import IJCovariance, ij_covariance
from bayesij.stats.loo import loo

__all__ = ["most_influential", "influence_report"]


def most_influential(data, top: int = 5, ij: IJCovariance | None = None) -> pd.DataFrame:
    """The ``top`` units of largest |psi| for each quantity, with the predicted change.

    ``change_if_removed = -psi`` is the first-order change of the posterior mean when the
    unit is left out; ``change_in_sd`` divides it by the posterior sd. ``data`` is anything
    :func:`bayesij.read` accepts (its unit is the fit's); the scores come from ``ij`` (an
    :func:`~bayesij.ij_covariance` result of the same fit) when given.
    """
    fit = read(data)
    scores = (ij if ij is not None else ij_covariance(fit)).influence
    unit = scores["psi"].dims[1]
    post = fit.posterior([str(q) for q in scores["quantity"].values], need_quantities=True)
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


def _loo_summary(fit) -> str:
    """PSIS-LOO estimates (over the report's units) and the units whose k-hat says LOO
    cannot be trusted there."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report states the diagnostics itself
        result = loo(fit, groups=fit.unit_labels())
    lines = ["PSIS-LOO", result.estimates().to_string(float_format=lambda v: f"{v:.4g}")]
    bad = result.bad_k_ids()
    lines.append(
        f"Pareto k-hat above {result.k_threshold:.2g} for {len(bad)} of "
        f"{result.n_units} units{': ' + str(bad[:10]) if bad else ''}"
    )
    return "\n".join(lines)


def influence_report(data, top: int = 5, quantities=None) -> str:
    """Text report of ``data`` (anything :func:`bayesij.read` accepts; its unit is the
    fit's): posterior summary, most influential units, IJ vs posterior sd (with the
    linearity check), and PSIS-LOO with its k-hat diagnostics."""
    fit = read(data)
    post = fit.posterior(quantities, need_quantities=True)
    summary = pd.DataFrame(
        {
            "mean": post.quantities.mean(dim=("chain", "draw")).values,
            "sd": post.quantities.std(dim=("chain", "draw"), ddof=1).values,
        },
        index=pd.Index(post.quantity_names, name="quantity"),
    )
    fmt = {"float_format": lambda v: f"{v:.4g}"}
    # psi, IJ and linearity in one pass
    ij = ij_covariance(fit, quantities=quantities, check_linearity=True)
    return "\n\n".join(
        [
            f"{post!r}\nUnits: {fit.units.describe()}",
            "Posterior summary\n" + summary.to_string(**fmt),
            f"Most influential units (top {top} by |psi| per quantity; "
            "change_if_removed = -psi)\n" + most_influential(fit, top, ij).to_string(**fmt),
            str(ij),
            _loo_summary(fit),
        ]
    )
