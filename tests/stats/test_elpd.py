"""The two result protocols of bayesij/stats/elpd.py, checked on every member.

Elpd results (LOO, WAIC, held-out, LFO, subsampled LOO) all give ``pointwise``, ``elpd``,
``se``, ``p``, ``estimates()`` in R loo's layout, one printed layout and a notebook view,
and :func:`bayesij.compare` takes any of them; the other results give ``table()``, text and
a notebook view showing both. The numbers come from closed forms: the elpd is the sum of the
pointwise column, its SE ``sqrt(N var_n)`` with the result's divisor, p the sum of its
column.
"""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesij
from bayesij.stats.elpd import ElpdResult, Summary


@pytest.fixture(scope="module")
def fit():
    rng = np.random.default_rng(8)
    y = rng.normal(size=60)
    mu = y.mean() + rng.normal(size=(4, 300, 1)) / np.sqrt(60)
    log_lik = -0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi)
    return bayesij.from_arrays(mu, log_lik, quantity_names=["mu"]), log_lik


@pytest.fixture(scope="module")
def results(fit):
    post, log_lik = fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "loo": bayesij.loo(post),
            "waic": bayesij.waic(post, ddof=1),
            "holdout": bayesij.holdout(log_lik[..., :20]),
            "lfo": bayesij.lfo(post, min_train=50, method="psis-backward"),
            "subsample": bayesij.loo_subsample(post, 30, seed=2),
        }


@pytest.mark.parametrize("name", ["loo", "waic", "holdout", "lfo", "subsample"])
def test_every_elpd_result_keeps_the_protocol(results, name):
    result = results[name]
    assert isinstance(result, ElpdResult)
    assert isinstance(result.pointwise, pd.DataFrame)
    values = result.pointwise_elpd.to_numpy()
    if name != "subsample":  # a subsample's elpd is the difference estimator's
        assert result.elpd == pytest.approx(values.sum(), rel=1e-13)
    if name in ("loo", "waic", "holdout"):
        ddof = result.ddof
        expected_se = np.sqrt(values.size * values.var(ddof=ddof))
        assert result.se == pytest.approx(expected_se, rel=1e-12)
    table = result.estimates()
    assert list(table.columns) == ["Estimate", "SE"]
    assert table.iloc[0].tolist() == pytest.approx([result.elpd, result.se])
    assert table.iloc[-1].tolist() == pytest.approx([-2 * result.elpd, 2 * result.se])
    text = str(result)
    assert table.index[0] in text
    assert "<pre>" in result._repr_html_()
    if name in ("loo", "waic"):
        assert result.to_arviz() is not None  # both ArviZ generations: tests/adapters
    else:
        with pytest.raises(ValueError, match=r"^result: found a \w+; expected a LooResult or"):
            result.to_arviz()


def test_p_is_the_sum_of_the_criterion_s_column_or_nan(results):
    assert results["loo"].p == pytest.approx(results["loo"].pointwise["p_loo"].sum())
    assert results["loo"].p == results["loo"].p_loo
    assert results["waic"].p == pytest.approx(results["waic"].p_waic)
    assert np.isnan(results["holdout"].p) and np.isnan(results["lfo"].p)
    assert list(results["loo"].estimates().index) == ["elpd_loo", "p_loo", "looic"]
    assert list(results["waic"].estimates().index) == ["elpd_waic", "p_waic", "waic"]
    assert list(results["holdout"].estimates().index) == ["elpd", "ic"]


def test_compare_takes_any_member(fit, results):
    post, log_lik = fit
    other = bayesij.holdout(log_lik[..., :20] - 0.1)  # every point 0.1 worse
    table = bayesij.compare({"a": results["holdout"], "b": other})
    assert table.loc["b", "elpd_diff"] == pytest.approx(-2.0, rel=1e-12)
    assert table.loc["b", "se_diff"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match=r"results: found a int for 'b'; expected LooResult"):
        bayesij.compare({"a": results["loo"], "b": 3})


def test_the_other_results_show_their_table_in_a_notebook(fit):
    post, _ = fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        others = [
            bayesij.ij_covariance(post, n_boot=20),
            bayesij.linearity(post),
            bayesij.amip(post, "mu", "sign", method="linear"),
            bayesij.dic(post),
        ]
    for result in others:
        assert isinstance(result, Summary)
        html = result._repr_html_()
        assert html.startswith("<pre>") and "<table" in html
        assert isinstance(result.table(), pd.DataFrame)
