"""Stacking under the CRPS and the SCRPS, checked by brute force: the mixture's LOO score
computed directly from the pooled, weighted LOO draws of the models (weighted_crps, equal
to arviz-stats' CRPS) on a grid of weights (two models) and at random weights (three)."""

import warnings

import numpy as np
import pytest

import bayesij
from bayesij.array.scores import weighted_crps
from bayesij.stats.loo import chunk_loo_weights, draws_beside_log_lik


def _models(shifts, scales, n=80, seed=0):
    """Normal-mean models of y ~ N(0, 1): model k centres its predictions shift_k away and
    predicts with sd scale_k; 2 x 500 draws each."""
    rng = np.random.default_rng(seed)
    y = rng.normal(0.0, 1.0, n)
    fits, y_pred = {}, {}
    for k, (shift, scale) in enumerate(zip(shifts, scales, strict=True)):
        mu = rng.normal(y.mean() + shift, 0.1, size=(2, 500, 1))
        fits[f"m{k}"] = -0.5 * ((y - mu) / scale) ** 2
        y_pred[f"m{k}"] = rng.normal(mu, scale, size=(2, 500, n))
    return y, fits, y_pred


def _loo_draws(y, fits, y_pred):
    """Each model's predictive draws and their PSIS leave-one-out weights."""
    out = []
    for name, fit in fits.items():
        draws = draws_beside_log_lik(fit, y_pred[name], "y_pred")
        out.append((draws.values, chunk_loo_weights(draws, slice(0, y.size))[0]))
    return out


def _mixture_score(y, fits, y_pred, weights, kind, loo_draws=None):
    """The mean LOO score of the mixture, from the pooled draws weighted w_k * LOO weight."""
    loo_draws = loo_draws or _loo_draws(y, fits, y_pred)
    values = np.concatenate([v for v, _ in loo_draws])
    pooled = np.concatenate([w * lw for (_, lw), w in zip(loo_draws, weights, strict=True)])
    crps, scrps = weighted_crps(values, y, pooled)
    return float(np.mean(crps if kind == "crps" else scrps))


@pytest.mark.parametrize("kind", ["crps", "scrps"])
def test_two_models_weights_are_the_grid_s_best(kind):
    y, fits, y_pred = _models([-0.6, 0.4], [1.0, 1.4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weights = bayesij.score_weights(fits, kind, y=y, y_pred=y_pred)
        grid = np.linspace(0, 1, 201)
        loo_draws = _loo_draws(y, fits, y_pred)
        scores = [_mixture_score(y, fits, y_pred, (g, 1 - g), kind, loo_draws) for g in grid]
    best = grid[int(np.argmax(scores))]
    assert 0.05 < weights["m0"] < 0.95  # a real mixture
    assert abs(weights["m0"] - best) <= 0.0075
    at_weights = _mixture_score(y, fits, y_pred, weights.to_numpy(), kind)
    assert weights.attrs["score"] == pytest.approx(at_weights, rel=1e-10)
    assert at_weights >= max(scores) - 1e-9
    for k, name in enumerate(fits):
        single = _mixture_score(y, fits, y_pred, np.eye(2)[k], kind)
        assert weights.attrs["single"][name] == pytest.approx(single, rel=1e-10)


def test_three_models_no_random_weights_do_better():
    y, fits, y_pred = _models([-0.5, 0.0, 0.7], [1.0, 2.0, 0.8], seed=1)
    rng = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("crps", "scrps"):
            weights = bayesij.score_weights(fits, kind, y=y, y_pred=y_pred)
            loo_draws = _loo_draws(y, fits, y_pred)
            ours = _mixture_score(y, fits, y_pred, weights.to_numpy(), kind, loo_draws)
            for w in rng.dirichlet(np.ones(3), size=40):
                assert _mixture_score(y, fits, y_pred, w, kind, loo_draws) <= ours + 1e-9


def test_a_model_that_predicts_better_everywhere_takes_all_the_weight():
    y, fits, y_pred = _models([0.0, 3.0], [1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weights = bayesij.score_weights(fits, y=y, y_pred=y_pred)
    assert weights["m0"] == pytest.approx(1.0, abs=1e-6)


def test_weights_read_y_and_predictions_from_fits_and_refuse_bad_input():
    from peers import from_dict

    y, fits, y_pred = _models([-0.6, 0.4], [1.0, 1.4])
    trees = {
        name: from_dict(
            posterior={"mu": np.zeros((2, 500))},
            log_likelihood={"obs": fits[name]},
            posterior_predictive={"obs": y_pred[name]},
            observed_data={"obs": y},
        )
        for name in fits
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        read = bayesij.score_weights(trees)
        given = bayesij.score_weights(fits, y=y, y_pred=y_pred)
    np.testing.assert_allclose(read.to_numpy(), given.to_numpy(), atol=1e-10)
    with pytest.raises(ValueError, match=r"kind: found 'energy'; expected one of"):
        bayesij.score_weights(fits, "energy", y=y, y_pred=y_pred)
    with pytest.raises(ValueError, match=r"fits: found dict; expected a dict of two or more"):
        bayesij.score_weights({"m0": fits["m0"]}, y=y, y_pred=y_pred)
    with pytest.raises(ValueError, match=r"y_pred\['m0'\]: found None with data of type ndarray"):
        bayesij.score_weights(fits, y=y)
    short = {"m0": fits["m0"], "m1": fits["m1"][..., :-1]}
    with pytest.raises(ValueError, match=r"y_pred\['m1'\]: found shape"):
        bayesij.score_weights(short, y=y, y_pred=y_pred)


def test_scrps_with_a_point_mass_is_named_not_read_as_the_best_score():
    # A binary outcome whose second model predicts every first observation as exactly 1
    # (all its draws): its SCRPS there is 0/0. loo_score says so; stacking by SCRPS refuses
    # (it gave that model all the weight); by CRPS it is defined.
    y, fits, y_pred = _models([0.0, 0.3], [1.0, 1.0])
    y = (y > 0).astype(float)
    y_pred = {name: (draws > 0).astype(float) for name, draws in y_pred.items()}
    y_pred["m1"][..., 0], y[0] = 1.0, 1.0
    with pytest.warns(UserWarning, match=r"SCRPS is undefined for 1 observation\(s\)"):
        scores = bayesij.loo_score(fits["m1"], y, y_pred["m1"], kind="scrps")
    assert np.isnan(scores.pointwise["score"].iloc[0])
    with pytest.raises(ValueError, match=r"^kind: found 'scrps' with model 'm1' a point mass"):
        _quiet(bayesij.score_weights, fits, "scrps", y=y, y_pred=y_pred)
    assert np.isfinite(_quiet(bayesij.score_weights, fits, "crps", y=y, y_pred=y_pred)).all()


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)
