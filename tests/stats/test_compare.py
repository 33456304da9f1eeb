"""bayesij.compare (R loo's loo_compare layout): differences to the best model and their
SE by pairs of pointwise values, units paired by their labels, refusals of results on other
units or with other SE conventions. (Any elpd result: tests/stats/test_elpd.py; weights:
tests/array/test_model_weights.py.)"""

import warnings

import numpy as np
import pytest

import bayesij
from peers import r_log_lik


def test_compare_layout_and_values():
    log_lik = r_log_lik("reference")
    good = bayesij.loo(log_lik, convention=bayesij.PsisOptions(ddof=1))
    worse = bayesij.loo(log_lik - np.linspace(0, 0.2, 25), convention=bayesij.PsisOptions(ddof=1))
    table = bayesij.compare({"worse": worse, "good": good})
    assert list(table.index) == ["good", "worse"]
    assert list(table.columns[:2]) == ["elpd_diff", "se_diff"]
    difference = worse.pointwise["elpd_loo"] - good.pointwise["elpd_loo"]
    np.testing.assert_allclose(table.loc["worse", "elpd_diff"], difference.sum())
    np.testing.assert_allclose(table.loc["worse", "se_diff"], np.sqrt(25) * difference.std(ddof=1))
    assert table.loc["good", "elpd_diff"] == 0 and table.loc["good", "se_diff"] == 0
    with pytest.raises(ValueError, match=r"results: found .b. on other units than .a."):
        bayesij.compare(
            {"a": good, "b": bayesij.loo(log_lik[..., :5], convention=bayesij.PsisOptions(ddof=1))}
        )
    with pytest.raises(ValueError, match=r"results: found mixed SE conventions"):
        bayesij.compare({"a": good, "b": bayesij.loo(log_lik)})


def test_compare_pairs_units_by_id_and_refuses_different_units():
    log_lik = r_log_lik("reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = bayesij.loo(log_lik)
        order = np.random.default_rng(3).permutation(log_lik.shape[2])
        permuted = bayesij.loo(
            bayesij.from_arrays(
                np.zeros((*log_lik.shape[:2], 1)), log_lik[..., order], obs_names=order
            )
        )
    table = bayesij.compare({"a": first, "b": permuted})
    assert table["se_diff"].max() == pytest.approx(0.0, abs=1e-12)  # the same model
    assert table["elpd_diff"].abs().max() == pytest.approx(0.0, abs=1e-9)
    fewer = bayesij.loo(log_lik[..., :20])
    with pytest.raises(ValueError, match=r"results: found 'b' on other units than 'a'"):
        bayesij.compare({"a": first, "b": fewer})
    with pytest.raises(ValueError, match=r"results: found a int for 'b'; expected LooResult"):
        bayesij.compare({"a": first, "b": 3})
