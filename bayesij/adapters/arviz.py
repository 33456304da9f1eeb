"""LOO and WAIC results as ArviZ ``ELPDData``, for ``compare`` and the ArviZ plots.

ArviZ 1.x (arviz-stats) and ArviZ 0.23 keep different ``ELPDData`` classes; the one the
installed ArviZ uses is built, so ``arviz_stats.compare`` / ``az.compare`` and the k-hat and
compare plots take bayesij's results as their own.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["to_elpd_data", "arviz_generation"]


def arviz_generation() -> int:
    """1 when ArviZ 1.x (arviz-stats) is installed, 0 for ArviZ 0.23."""
    try:
        import arviz_stats  # noqa: F401
    except ImportError:
        return 0
    return 1


def _pointwise(result, column: str) -> xr.DataArray:
    index = result.pointwise.index
    return xr.DataArray(
        result.pointwise[column].to_numpy(), dims=(index.name,), coords={index.name: index}
    )


def to_elpd_data(result):
    """An ArviZ ``ELPDData`` with the estimates and pointwise values of a LOO or WAIC result.

    Parameters
    ----------
    result : LooResult or WaicResult

    Returns
    -------
    arviz_stats.utils.ELPDDataLOO / ELPDData (ArviZ 1.x) or arviz.ELPDData (ArviZ 0.23)
    """
    loo = result.criterion == "loo"
    elpd, se, p, column = result.elpd, result.se, result.p, result.elpd_column
    n_samples, n_points = result.n_draws, len(result.pointwise)
    pareto_k = _pointwise(result, "pareto_k") if loo else None
    warning = bool(loo and (result.pointwise["pareto_k"] > result.k_threshold).any())
    good_k = result.k_threshold if loo else None
    if arviz_generation() == 1:
        from arviz_stats.utils import ELPDData, ELPDDataLOO

        cls = ELPDDataLOO if loo else ELPDData
        return cls(
            elpd=float(elpd),
            se=float(se),
            p=float(p),
            n_samples=n_samples,
            n_data_points=n_points,
            scale="log",
            warning=warning,
            good_k=good_k if good_k is not None else 0.7,
            elpd_i=_pointwise(result, column),
            pareto_k=pareto_k,
        )
    from arviz import ELPDData

    if loo:
        values = [
            elpd,
            se,
            p,
            n_samples,
            n_points,
            warning,
            _pointwise(result, column),
            pareto_k,
            "log",
            good_k,
        ]
        index = [
            "elpd_loo",
            "se",
            "p_loo",
            "n_samples",
            "n_data_points",
            "warning",
            "loo_i",
            "pareto_k",
            "scale",
            "good_k",
        ]
    else:
        values = [elpd, se, p, n_samples, n_points, warning, _pointwise(result, column), "log"]
        index = [
            "elpd_waic",
            "se",
            "p_waic",
            "n_samples",
            "n_data_points",
            "warning",
            "waic_i",
            "scale",
        ]
    return ELPDData(data=np.array(values, dtype=object), index=index)
