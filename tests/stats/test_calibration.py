"""CORP calibration (Dimitriadis, Gneiting & Jordan 2021): PAV is the monotone least-squares
fit (checked against a brute-force pool-adjacent-violators), the Brier decomposition is an
identity, calibrated forecasts stay in their consistency band and miscalibrated ones do
not."""

import numpy as np
import pytest

import bayesij


def _brute_pav(values, weights):
    """Pool adjacent violators, written out."""
    blocks = [[v, w, 1] for v, w in zip(values, weights, strict=True)]
    merged = True
    while merged:
        merged = False
        for i in range(len(blocks) - 1):
            if blocks[i][0] > blocks[i + 1][0]:
                (a, wa, na), (b, wb, nb) = blocks[i], blocks[i + 1]
                blocks[i : i + 2] = [[(a * wa + b * wb) / (wa + wb), wa + wb, na + nb]]
                merged = True
                break
    return np.concatenate([[v] * n for v, _, n in blocks])


def test_pav_and_the_decomposition():
    rng = np.random.default_rng(1)
    prob = np.round(rng.uniform(size=200), 1)  # ties: 11 distinct forecasts
    y = (rng.uniform(size=200) < prob**1.5).astype(float)
    result = bayesij.calibration(y, prob, n_bootstrap=200)
    table = result.table
    assert table["count"].sum() == 200 and np.all(np.diff(table["calibrated"]) >= 0)
    means = [y[prob == f].mean() for f in table["forecast"]]
    np.testing.assert_allclose(table["calibrated"], _brute_pav(means, table["count"]), atol=1e-12)
    assert result.score == pytest.approx(np.mean((prob - y) ** 2))
    total = result.miscalibration - result.discrimination + result.uncertainty
    assert result.score == pytest.approx(total, abs=1e-12)
    calibrated = dict(zip(table["forecast"], table["calibrated"], strict=True))
    score_calibrated = np.mean((np.array([calibrated[f] for f in prob]) - y) ** 2)
    assert result.miscalibration == pytest.approx(result.score - score_calibrated)
    assert result.uncertainty == pytest.approx(y.mean() * (1 - y.mean()))


def test_calibrated_forecasts_stay_in_the_band_and_miscalibrated_ones_leave_it():
    rng = np.random.default_rng(2)
    prob = rng.uniform(size=2000)
    calibrated = bayesij.calibration((rng.uniform(size=2000) < prob).astype(float), prob)
    table = calibrated.table
    inside = (table["calibrated"] >= table["lower"]) & (table["calibrated"] <= table["upper"])
    assert inside.mean() > 0.8 and calibrated.miscalibration < 0.005
    skewed = bayesij.calibration((rng.uniform(size=2000) < prob**2).astype(float), prob)
    table = skewed.table
    inside = (table["calibrated"] >= table["lower"]) & (table["calibrated"] <= table["upper"])
    assert inside.mean() < 0.5 and skewed.miscalibration > 5 * calibrated.miscalibration


@pytest.mark.parametrize(
    ("y", "prob", "message"),
    [
        ([0, 2], [0.1, 0.2], r"y: found 2 value\(s\) not all 0 or 1"),
        ([0, 1], [0.1], r"prob: found 1 forecasts; expected one per outcome"),
        ([0, 1], [0.1, 1.2], r"prob: found values outside \[0, 1\]"),
    ],
)
def test_bad_input_is_refused_by_name(y, prob, message):
    with pytest.raises(ValueError, match=message):
        bayesij.calibration(y, prob)


def test_consistency_band_is_the_quantiles_of_calibrated_replicates():
    """Outcomes resampled from the forecasts (calibrated by construction), each PAV-fitted:
    the band is their (1 -/+ band_prob) / 2 quantiles at each distinct forecast."""
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(5)
    prob = np.round(rng.uniform(size=150), 2)
    y = (rng.uniform(size=150) < prob).astype(float)
    result = bayesij.calibration(y, prob, band_prob=0.8, n_bootstrap=300, seed=11)
    levels, position, count = np.unique(prob, return_inverse=True, return_counts=True)
    draws = np.random.default_rng(11).uniform(size=(300, 150)) < prob
    fits = []
    for outcome in draws.astype(float):
        means = np.bincount(position, weights=outcome) / count
        fits.append(isotonic_regression(means, weights=count).x)
    low, high = np.quantile(np.array(fits), [0.1, 0.9], axis=0)
    np.testing.assert_allclose(result.table["lower"], low, atol=1e-12)
    np.testing.assert_allclose(result.table["upper"], high, atol=1e-12)
    again = bayesij.calibration(y, prob, band_prob=0.8, n_bootstrap=300, seed=11)
    np.testing.assert_array_equal(again.table["lower"], result.table["lower"])
