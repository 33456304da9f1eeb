"""The report every experiment returns: approximation against exact refit, row by row."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["RefitReport", "comparison_rows", "COLUMNS"]

#: Columns of :attr:`RefitReport.comparisons` after the identifying ones.
COLUMNS = [
    "method",
    "approximation",
    "approximation_se",
    "exact",
    "exact_se",
    "error",
    "relative_error",
    "z",
]


def comparison_rows(
    index: dict, method: str, approximation, approximation_se, exact, exact_se
) -> pd.DataFrame:
    """Rows comparing an approximation with exact refit values.

    ``error = approximation - exact``; ``relative_error = error / |exact|``;
    ``z = error / sqrt(approximation_se^2 + exact_se^2)`` uses both Monte Carlo errors (an
    unknown one counts as 0; NaN when both are unknown or zero).
    """
    approx = np.asarray(approximation, dtype=float)
    approx_se = np.broadcast_to(np.asarray(approximation_se, dtype=float), approx.shape)
    exact = np.broadcast_to(np.asarray(exact, dtype=float), approx.shape)
    exact_se = np.broadcast_to(np.asarray(exact_se, dtype=float), approx.shape)
    error = approx - exact
    scale = np.sqrt(np.nan_to_num(approx_se) ** 2 + np.nan_to_num(exact_se) ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = error / np.abs(exact)
        z = np.where(scale > 0, error / scale, np.nan)
    frame = pd.DataFrame(
        {
            key: np.broadcast_to(np.asarray(value, dtype=object), approx.shape)
            for key, value in index.items()
        }
    )
    frame = frame.assign(
        method=method,
        approximation=approx,
        approximation_se=approx_se,
        exact=exact,
        exact_se=exact_se,
        error=error,
        relative_error=relative,
        z=z,
    )
    return frame.infer_objects()


@dataclass(frozen=True)
class RefitReport:
    """Approximations against exact refits.

    Attributes
    ----------
    experiment : str
        ``'bootstrap'``, ``'loo'``, ``'kfold'`` or ``'drop'``.
    comparisons : pandas.DataFrame
        One row per compared value and method: identifying columns (``quantity``, ``obs``
        or ``fold``), then ``method``, ``approximation``, ``approximation_se``, ``exact``,
        ``exact_se``, ``error``, ``relative_error`` and ``z`` (both Monte Carlo errors).
    failures : pandas.DataFrame
        Refits that failed: ``key`` and ``reason``. Their rows are absent from
        ``comparisons``.
    n_planned, n_refits : int
        Refits planned and refits that finished successfully.
    summary : dict
        Experiment-level numbers (totals, stopping reason, ...).
    result : ElpdResult, optional
        The exact estimate as an elpd result (K-fold: a
        :class:`~bayesij.stats.elpd.KfoldResult`, which :func:`bayesij.compare` takes beside
        LOO and WAIC results).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(30), rng.normal(size=30)])
    >>> y = X @ [1.0, 0.5] + rng.normal(size=30)
    >>> backend = refit.ConjugateNormalBackend(X, y, draws=1000)  # exact posteriors
    >>> post = backend.fit(np.ones(30))
    >>> report = refit.kfold(post, backend, K=3, executor="sequential", progress=False)
    >>> list(report.comparisons.columns[:3])
    ['fold', 'pareto_k', 'method']
    """

    experiment: str
    comparisons: pd.DataFrame
    failures: pd.DataFrame
    n_planned: int
    n_refits: int
    summary: dict = field(default_factory=dict)
    result: object = None

    def table(self, method: str | None = None) -> pd.DataFrame:
        """The comparisons, optionally of one method only."""
        if method is None:
            return self.comparisons.copy()
        return self.comparisons[self.comparisons["method"] == method].reset_index(drop=True)

    def __str__(self) -> str:
        lines = [
            f"Exact-refit check: {self.experiment} ({self.n_refits} of {self.n_planned} "
            "planned refits succeeded)"
        ]
        lines += [f"  {key}: {_format(value)}" for key, value in self.summary.items()]
        by_method = self.comparisons.groupby("method", sort=False)
        lines.append("Per method: mean |error|, max |error|, mean |z|")
        for method, rows in by_method:
            lines.append(
                f"  {method:<12} {rows['error'].abs().mean():10.4g} "
                f"{rows['error'].abs().max():10.4g} {rows['z'].abs().mean():8.3g}"
            )
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            lines += ["", self.comparisons.head(40).to_string(index=False, float_format="%.4g")]
        if len(self.failures):
            lines += ["", f"{len(self.failures)} refits failed:"]
            lines += [f"  {row.key}: {row.reason}" for row in self.failures.itertuples()]
        return "\n".join(lines)

    __repr__ = __str__


def _format(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
