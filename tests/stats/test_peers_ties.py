"""Tied draws (a sampler that rejects repeats its state, as PyMC's output often does) under
``convention="arviz-stats"``: every LOO quantity equals arviz-stats', computed here on the
same DataTree (Python >= 3.12). The order in which tied draws take the smoothed weights
(NumPy's unstable argsort there) does not move elpd or k-hat, but it moves any expectation
of another quantity; R loo's stable order gives other values."""

import warnings

import numpy as np
import pytest

import bayesij
from peers import ARVIZ_1, from_dict

pytestmark = pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats 1.x needs Python >= 3.12")


def _metropolis_regression(n=150, chains=4, draws=500, seed=3):
    """A normal regression with unknown intercept and slope (sd 1), sampled by random-walk
    Metropolis (about half the proposals rejected: repeated states), its pointwise
    log-likelihood and posterior predictive draws."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 0.5 + 0.8 * x + rng.standard_t(4, size=n)

    def log_post(b):
        return -0.5 * np.sum((y - b[0] - b[1] * x) ** 2)

    beta = np.empty((chains, draws, 2))
    for c in range(chains):
        state = np.array([0.5, 0.8]) + rng.normal(0, 0.1, 2)
        current = log_post(state)
        for d in range(draws):
            proposal = state + rng.normal(0, 0.25, 2)
            proposed = log_post(proposal)
            if np.log(rng.uniform()) < proposed - current:
                state, current = proposal, proposed
            beta[c, d] = state
    mean = beta[..., :1] + beta[..., 1:] * x  # (chains, draws, n)
    log_lik = -0.5 * (y - mean) ** 2 - 0.5 * np.log(2 * np.pi)
    y_rep = mean + rng.normal(size=mean.shape)
    tree = from_dict(
        posterior={"beta": beta},
        log_likelihood={"y": log_lik},
        posterior_predictive={"y": y_rep},
        observed_data={"y": y},
    )
    return tree, y, log_lik, y_rep


@pytest.fixture(scope="module")
def tied():
    tree, y, log_lik, y_rep = _metropolis_regression()
    flat = log_lik.reshape(-1, y.size)
    repeats = flat.shape[0] - np.array([np.unique(col).size for col in flat.T])
    assert repeats.min() > 1000  # most draws repeat an earlier one
    return tree, y, log_lik, y_rep


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def test_loo_and_khat_equal_arviz_stats_whatever_the_tie_order(tied):
    import arviz_stats

    tree, *_ = tied
    theirs = _quiet(arviz_stats.loo, tree, pointwise=True)
    for ties in ("quicksort", "position"):
        ours = _quiet(bayesij.loo, tree, convention=bayesij.PsisOptions("arviz-stats", ties=ties))
        np.testing.assert_allclose(
            ours.pointwise["elpd_loo"], np.asarray(theirs.elpd_i).ravel(), rtol=1e-12
        )
        np.testing.assert_allclose(
            ours.pointwise["pareto_k"], np.asarray(theirs.pareto_k).ravel(), rtol=1e-10
        )
        assert ours.se == pytest.approx(theirs.se, rel=1e-12)


@pytest.mark.parametrize("kind", ["crps", "scrps"])
def test_scores_equal_arviz_stats_on_tied_draws(tied, kind):
    import arviz_stats

    tree, y, _, y_rep = tied
    theirs = _quiet(arviz_stats.loo_score, tree, kind=kind, pointwise=True)
    ours = _quiet(bayesij.loo_score, tree, y, y_rep, kind=kind, convention="arviz-stats")
    expected = np.asarray(theirs.pointwise).ravel()
    np.testing.assert_allclose(ours.pointwise["score"], expected, rtol=1e-10)
    assert ours.estimate == pytest.approx(theirs.mean, rel=1e-10)
    assert ours.se == pytest.approx(theirs.se, rel=1e-10)
    stable = _quiet(
        bayesij.loo_score,
        tree,
        y,
        y_rep,
        kind=kind,
        convention=bayesij.PsisOptions("arviz-stats", ties="position"),
    )
    assert np.abs(stable.pointwise["score"].to_numpy() - expected).max() > 1e-9


@pytest.mark.parametrize("kind", ["mae", "mse", "rmse"])
def test_metrics_equal_arviz_stats_on_tied_draws(tied, kind):
    import arviz_stats

    tree, y, _, y_rep = tied
    theirs = _quiet(arviz_stats.loo_metrics, tree, kind=kind, round_to="none")
    ours = _quiet(bayesij.loo_metrics, tree, y, y_rep, kind=kind, convention="arviz-stats")
    assert ours.estimate == pytest.approx(theirs.mean, rel=1e-10)
    assert ours.se == pytest.approx(theirs.se, rel=1e-10)


@pytest.mark.parametrize("kind, prob", [("mean", None), ("sd", None), ("quantile", 0.1)])
def test_expectations_equal_arviz_stats_on_tied_draws(tied, kind, prob):
    import arviz_stats

    tree, y, _, y_rep = tied
    theirs, _ = _quiet(arviz_stats.loo_expectations, tree, kind=kind, probs=prob)
    ours = _quiet(
        bayesij.loo_expectation, tree, y_rep, kind=kind, prob=prob, convention="arviz-stats"
    )
    np.testing.assert_allclose(ours["value"], np.asarray(theirs).ravel(), rtol=1e-10, atol=1e-12)


def test_loo_r2_equals_arviz_stats_on_tied_draws(tied):
    from arviz_stats import loo_r2

    tree, y, _, y_rep = tied
    theirs = np.asarray(_quiet(loo_r2, tree, "y", summary=False)).ravel()
    ours = _quiet(bayesij.loo_r2, tree, y, y_rep, convention="arviz-stats").draws
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_pareto_smoothed_pit_equals_arviz_stats_on_tied_draws(tied):
    """``loo_pit(pareto_pit=True)``: the observations beyond most predictive draws (t(4)
    noise: a few in each tail) get their values from the weighted tail fits."""
    import arviz_stats

    tree, y, _, y_rep = tied
    theirs = np.asarray(_quiet(arviz_stats.loo_pit, tree, pareto_pit=True)["y"]).ravel()
    ours = _quiet(bayesij.loo_pit, tree, convention="arviz-stats", pareto_pit=True)
    np.testing.assert_allclose(ours.to_numpy(), theirs, rtol=1e-10, atol=1e-14)
    raw = _quiet(bayesij.loo_pit, tree, convention="arviz-stats").to_numpy()
    refined = np.abs(ours.to_numpy() - raw) > 1e-12
    assert 5 <= refined.sum() < y.size / 2  # the tails changed, the middle kept
    assert np.all((ours > 0) & (ours < 1))
