"""The two result protocols every labelled estimator returns.

* :class:`ElpdResult`: expected log predictive density estimates (LOO, WAIC, held-out,
  leave-future-out, subsampled LOO) — ``pointwise`` (one row per unit), ``elpd``, ``se``,
  ``p``, ``estimates()``, ``to_arviz()``, one ``__str__`` and ``_repr_html_``;
  :func:`bayesij.compare` and :func:`bayesij.model_weights` take any of them.
* :class:`Summary`: every other result (IJ covariance, linearity, AMIP, DIC, the audit) —
  ``table()`` (a DataFrame), ``__str__`` and a ``_repr_html_`` that shows the same text and
  table in a notebook instead of a raw dump of nested tables.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from bayesij.array.checks import fail
from bayesij.array.numeric import elpd_standard_error

__all__ = ["ElpdResult", "Summary", "KfoldResult"]


def _html(text: str, table: pd.DataFrame | None) -> str:
    """The text as it prints, and the full table folded under it (the text already shows
    its main columns: unfolded, the numbers would stand twice)."""
    parts = [f"<pre>{html.escape(text)}</pre>"]
    if table is not None:
        body = table.to_html(float_format=lambda v: f"{v:.4g}")
        parts.append(f"<details><summary>table()</summary>{body}</details>")
    return "\n".join(parts)


class ElpdResult:
    """Base of the elpd results (mixed into frozen dataclasses).

    A subclass has a ``pointwise`` DataFrame with the column :attr:`elpd_column`, and
    ``elpd``, ``se``, ``ddof`` and ``n_draws``; it names its criterion and, where it has
    one, the column of the effective number of parameters.
    """

    #: Short name of the criterion, as R loo and ArviZ write it ("loo", "waic", ...).
    criterion: ClassVar[str] = "elpd"
    #: Column of ``pointwise`` holding each unit's elpd.
    elpd_column: ClassVar[str] = "elpd"
    #: Column of ``pointwise`` holding each unit's effective number of parameters, if any.
    p_column: ClassVar[str | None] = None
    #: Format of the estimates in ``__str__``.
    number_format: ClassVar[str] = ".1f"
    #: Whether ArviZ has this criterion (``to_arviz``): LOO and WAIC only.
    in_arviz: ClassVar[bool] = False

    pointwise: pd.DataFrame

    @property
    def pointwise_elpd(self) -> pd.Series:
        """Each unit's elpd (the column :func:`bayesij.compare` pairs models on)."""
        return self.pointwise[self.elpd_column]

    @property
    def p(self) -> float:
        """The effective number of parameters (NaN where the criterion has none)."""
        if self.p_column is None:
            return float("nan")
        return float(self.pointwise[self.p_column].sum())

    @property
    def n_units(self) -> int:
        return len(self.pointwise)

    def estimates(self) -> pd.DataFrame:
        """Estimate and SE of elpd, p (where defined) and the information criterion
        ``-2 elpd``, as R loo's ``estimates``."""
        name = self.criterion
        rows = {f"elpd_{name}" if name else "elpd": (self.elpd, self.se)}
        if self.p_column is not None:
            values = self.pointwise[self.p_column].to_numpy()
            rows[f"p_{name}"] = (self.p, elpd_standard_error(values, self.ddof))
        ic = {"loo": "looic", "waic": "waic", "kfold": "kfoldic"}.get(name, "ic")
        rows[ic] = (-2 * self.elpd, 2 * self.se)
        return pd.DataFrame(rows, index=["Estimate", "SE"]).T

    def to_arviz(self):
        """This result as ArviZ's ``ELPDData`` (arviz-stats' with ArviZ 1.x, ``az.ELPDData``
        with ArviZ 0.23), for ``arviz_stats.compare`` / ``az.compare`` and ArviZ's plots.
        LOO and WAIC only: ArviZ has no other criterion, and labelling another as one of them
        would mislead its comparisons (use :func:`bayesij.compare`, which takes any)."""
        from bayesij.adapters.arviz import to_elpd_data

        if not self.in_arviz:
            raise fail(
                "result",
                f"a {type(self).__name__}",
                "a LooResult or WaicResult for ArviZ; bayesij.compare takes this one",
            )

        return to_elpd_data(self)

    def _title(self) -> str:
        return f"elpd ({self.criterion}) of {self.n_units} units from {self.n_draws} draws"

    def _details(self) -> list[str]:
        """Lines after the estimates (diagnostics of the criterion)."""
        return []

    def __str__(self) -> str:
        table = self.estimates().to_string(float_format=lambda v: f"{v:{self.number_format}}")
        grouping = getattr(self, "grouping", None)  # per observation of a grouped fit
        notes = ["", grouping] if grouping else []
        return "\n".join([self._title(), "", table, *self._details(), *notes])

    def _repr_html_(self) -> str:
        return _html(str(self), None)


class Summary:
    """Base of the other results: ``table()`` and ``__str__`` given by the subclass;
    ``_repr_html_`` shows the text in a notebook, the table folded under it."""

    def table(self) -> pd.DataFrame:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _repr_html_(self) -> str:
        text = str(self)
        table = self.table()
        return _html(text, table if isinstance(table, pd.DataFrame) else None)


@dataclass(frozen=True)
class KfoldResult(ElpdResult):
    """Exact K-fold cross-validation from refits (R loo's ``kfold``): ``log p(x_n | x_-F)``
    of every observation ``n`` from the refit without its fold ``F``.

    Attributes
    ----------
    pointwise : pandas.DataFrame
        One row per observation whose fold's refit finished: ``elpd_kfold``, ``p_kfold``
        (the full fit's ``lpd`` less ``elpd_kfold``: the effective number of parameters, as
        R loo's kfold objects report it), its Monte Carlo SE ``mcse`` and ``fold``.
    elpd, se : float
        Sum over those observations and its SE ``sqrt(N var_n)`` (divisor ``N - ddof``).
    n_folds, n_refits : int
    ddof : int
    n_draws : int
        Draws of each refit.
    """

    pointwise: pd.DataFrame
    elpd: float
    se: float
    n_folds: int
    n_refits: int
    ddof: int
    n_draws: int

    criterion: ClassVar[str] = "kfold"
    elpd_column: ClassVar[str] = "elpd_kfold"
    p_column: ClassVar[str | None] = "p_kfold"

    def _title(self) -> str:
        return (
            f"Exact {self.n_folds}-fold cross-validation of {self.n_units} observations "
            f"({self.n_refits} refits of {self.n_draws} draws; SE with ddof={self.ddof})"
        )
