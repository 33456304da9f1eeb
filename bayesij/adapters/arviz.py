"""LOO and WAIC results as ArviZ ``ELPDData``, for ``compare`` and the ArviZ plots.

ArviZ 1.x (arviz-stats) and ArviZ 0.23 keep different ``ELPDData`` classes; the one the
installed ArviZ uses is built, so ``arviz_stats.compare`` / ``az.compare`` and the k-hat and
compare plots take bayesij's results as their own.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = [
    "to_elpd_data",
    "arviz_generation",
    "mean_relative_ess",
    "tail_relative_ess",
    "tail_relative_ess_chains",
]


def arviz_generation() -> int:
    """1 when ArviZ 1.x (arviz-stats) is installed, 0 for ArviZ 0.23."""
    try:
        import arviz_stats  # noqa: F401
    except ImportError:
        return 0
    return 1


def mean_relative_ess(draws: np.ndarray) -> float:
    """ArviZ's default ``r_eff`` for PSIS-LOO: the mean over every posterior element of its
    split-chain ESS of the mean (``ess(method="mean")``), divided by the number of draws;
    1 for a single chain (``arviz_stats.loo`` and ArviZ 0.23's ``az.loo`` alike).

    Parameters
    ----------
    draws : ndarray of shape (n_chains, n_draws, n_elements)
        The posterior's draws (every variable, flattened).
    """
    n_chains, n_draws, n_elements = draws.shape
    if n_chains == 1:
        return 1.0
    if arviz_generation():
        from arviz_stats.base import array_stats

        ess = array_stats.ess(draws, method="mean", chain_axis=0, draw_axis=1)
    else:
        import arviz as az

        ess = [
            az.ess(np.ascontiguousarray(draws[..., j]), method="mean") for j in range(n_elements)
        ]
    return float(np.mean(ess) / (n_chains * n_draws))


def tail_relative_ess(rows: np.ndarray, prob: float = 0.05) -> np.ndarray:
    """ArviZ's relative tail ESS (``ess(method="tail", prob=prob, relative=True)``) of each
    row taken as one chain, shape (n_rows,): what ``pareto_khat`` uses for its tail length
    when given no ``r_eff`` (arviz-stats' k-hat of LOO expectations).

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_draws)
    """
    if arviz_generation():
        from arviz_stats.base import array_stats

        return np.asarray(
            array_stats.ess(
                rows, method="tail", prob=prob, relative=True, chain_axis=None, draw_axis=-1
            ),
            dtype=float,
        ).reshape(rows.shape[0])
    import arviz as az

    return np.array([az.ess(row, method="tail", prob=prob, relative=True) for row in rows], float)


def tail_relative_ess_chains(draws: np.ndarray, prob: float = 0.05) -> np.ndarray:
    """ArviZ's relative tail ESS of each column of (n_chains, n_draws, n_cols) draws, the
    chains taken as chains: what arviz-stats' ``pareto_khat`` uses when given no r_eff."""
    n_chains, n_draws, n_cols = draws.shape
    if arviz_generation():
        from arviz_stats.base import array_stats

        ess = array_stats.ess(
            np.moveaxis(draws, 2, 0),
            method="tail",
            prob=prob,
            relative=True,
            chain_axis=1,
            draw_axis=2,
        )
        return np.asarray(ess, dtype=float).reshape(n_cols)
    import arviz as az

    return np.array(
        [
            az.ess(np.ascontiguousarray(draws[..., j]), method="tail", prob=prob, relative=True)
            for j in range(n_cols)
        ],
        dtype=float,
    )


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
