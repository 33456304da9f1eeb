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


def _bernoulli_fit(seed=3, n=120, draws=(4, 500)):
    """A logistic regression's draws (a normal approximation around the truth), its
    Bernoulli log-likelihood and 0/1 posterior predictive draws, as a fit."""
    from tests.helpers.peers import from_dict

    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.3 + 1.2 * x)))).astype(float)
    beta = np.array([0.3, 1.2]) + 0.15 * rng.normal(size=(*draws, 2))
    p = 1 / (1 + np.exp(-(beta[..., :1] + beta[..., 1:] * x)))
    log_lik = np.where(y == 1, np.log(p), np.log1p(-p))
    y_rep = (rng.uniform(size=p.shape) < p).astype(float)
    tree = from_dict(
        posterior={"beta": beta},
        log_likelihood={"y": log_lik},
        posterior_predictive={"y": y_rep},
        observed_data={"y": y},
    )
    return tree, y, log_lik, y_rep, p


def test_loo_calibration_takes_the_peers_psis_weights_and_pav():
    """The forecasts are the PSIS-weighted means of the predictive draws with the installed
    peer's own weights (ArviZ 0.23's psislw / arviz-stats' loo), the calibrated curve the
    brute-force PAV of the outcomes in the forecasts' order."""
    from tests.helpers.peers import ARVIZ_1, psis_log_weights

    tree, y, log_lik, y_rep, _ = _bernoulli_fit()
    peer = bayesij.PsisOptions("arviz-stats" if ARVIZ_1 else "ArviZ 0.23", r_eff=1.0)
    result = bayesij.loo_calibration(tree, convention=peer, n_bootstrap=50)
    weights = np.exp(psis_log_weights(log_lik, reff=1.0))  # (n_draws, n_obs), normalised
    forecast = np.sum(weights * y_rep.reshape(-1, y.size), axis=0)
    order = np.argsort(forecast)
    np.testing.assert_allclose(result.table["forecast"], forecast[order], atol=1e-10)
    brute = _brute_pav(y[order], np.ones(y.size))
    np.testing.assert_allclose(result.table["calibrated"], brute, atol=1e-12)
    assert result.score == pytest.approx(np.mean((forecast - y) ** 2), abs=1e-10)


def test_loo_calibration_from_the_log_lik_is_the_exact_beta_bernoulli_loo():
    """Bernoulli outcomes with a Beta(1, 1) prior, exact posterior draws: the LOO predictive
    probability of y_n = 1 is (1 + s_-n) / (2 + N - 1) in closed form."""
    rng = np.random.default_rng(4)
    y = (rng.uniform(size=60) < 0.35).astype(float)
    s, n = y.sum(), y.size
    p = rng.beta(1 + s, 1 + n - s, size=(4, 2000, 1))
    log_lik = np.where(y == 1, np.log(p), np.log1p(-p))
    post = bayesij.from_arrays(p, log_lik, quantity_names=["p"])
    result = bayesij.loo_calibration(post, y, from_log_lik=True, n_bootstrap=50)
    exact = np.sort((1 + s - y) / (1 + n))
    levels = np.repeat(result.table["forecast"].to_numpy(), result.table["count"].to_numpy())
    np.testing.assert_allclose(np.sort(levels), exact, atol=2e-3)


def test_loo_calibration_refuses_what_is_not_a_bernoulli_model():
    tree, y, log_lik, y_rep, p = _bernoulli_fit(n=30, draws=(2, 100))
    with pytest.raises(ValueError, match=r"^y: found values other than 0 and 1"):
        bayesij.loo_calibration(tree, y + 1, y_rep)
    with pytest.raises(ValueError, match=r"^y_pred: found predictive draws with from_log_lik"):
        bayesij.loo_calibration(tree, from_log_lik=True, y_pred=y_rep)
    post = bayesij.from_arrays(p[..., :1], log_lik + 1.0, quantity_names=["p"])
    with pytest.raises(ValueError, match=r"^data: found a log-likelihood .* values up to"):
        bayesij.loo_calibration(post, y, from_log_lik=True)
