"""Rows comparing approximations with exact refits, by arithmetic: the error, the relative
error and the z-score with both Monte Carlo errors (an unknown one counts as 0, NaN when
neither is known), identifying columns broadcast to every row."""

import numpy as np
import pytest

from bayesij.refit.report import RefitReport, comparison_rows


def test_comparison_rows():
    rows = comparison_rows(
        {"obs": [3, 7], "pareto_k": [0.2, 0.9]},
        "psis",
        approximation=[-1.0, -2.5],
        approximation_se=[0.3, np.nan],
        exact=[-1.5, -2.0],
        exact_se=0.4,
    )
    np.testing.assert_allclose(rows["error"], [0.5, -0.5])
    np.testing.assert_allclose(rows["relative_error"], [0.5 / 1.5, -0.25])
    np.testing.assert_allclose(rows["z"], [0.5 / 0.5, -0.5 / 0.4])
    assert rows["method"].tolist() == ["psis", "psis"] and rows["obs"].tolist() == [3, 7]
    unknown = comparison_rows({"fold": [1]}, "ij", [1.0], np.nan, [0.0], np.nan)
    assert np.isnan(unknown["z"][0]) and unknown["relative_error"][0] == np.inf
    report = RefitReport("loo", rows, rows.iloc[:0][["method"]], 2, 2, {"elpd": -3.5})
    assert report.table("psis").equals(rows) and report.table("ij").empty
    assert "2 of 2 planned refits succeeded" in str(report)
    assert report.summary["elpd"] == pytest.approx(-3.5)
