"""Comparing models by a LOO score (CRPS, SCRPS, MAE, MSE, RMSE, R², accuracy) against the
exact leave-one-out predictive distributions of conjugate normal models: the paired
differences, their SE and the probability of being worse, computed exactly here."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import bayesij

N, TAU = 150, 2.0


def _normal_crps_terms(y, mean, sd):
    """E|X - y| and E|X - X'| of N(mean, sd^2), in closed form."""
    z = (y - mean) / sd
    absolute = sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z))
    return absolute, 2 * sd / np.sqrt(np.pi)


@pytest.fixture(scope="module")
def two_models():
    """y ~ N(1, 1.3^2) observed; model "right" assumes noise sd 1.3 and mu ~ N(0, 2^2),
    model "shrunk" noise sd 1.0 and mu ~ N(0, 0.15^2) (a mean pulled towards 0). Exact
    posterior draws, predictive draws and each observation's exact LOO predictive
    N(m_-n, sigma^2 + v_-n)."""
    rng = np.random.default_rng(3)
    y = rng.normal(1.0, 1.3, N)
    fits, exact = {}, {}
    for name, sigma, tau in (("right", 1.3, TAU), ("shrunk", 1.0, 0.15)):
        precision = 1 / tau**2 + N / sigma**2
        mu = rng.normal(y.sum() / sigma**2 / precision, precision**-0.5, size=(4, 5000, 1))
        log_lik = norm.logpdf(y, mu, sigma)
        y_rep = mu + sigma * rng.normal(size=(4, 5000, N))
        loo_precision = 1 / tau**2 + (N - 1) / sigma**2
        loo_mean = (y.sum() - y) / sigma**2 / loo_precision
        loo_sd = np.sqrt(sigma**2 + 1 / loo_precision)
        fits[name] = (log_lik, y_rep)
        exact[name] = (loo_mean, loo_sd)
    return y, fits, exact


def _exact_terms(kind, y, mean, sd):
    absolute, spread = _normal_crps_terms(y, mean, sd)
    if kind == "crps":
        return -(absolute - spread / 2)
    if kind == "scrps":
        return -absolute / spread - np.log(spread) / 2
    return {"mae": np.abs(y - mean), "mse": (y - mean) ** 2}[kind]


def _scores(fits, y, kind):
    function = bayesij.loo_score if kind in ("crps", "scrps") else bayesij.loo_metrics
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: function(ll, y, y_rep, kind=kind) for name, (ll, y_rep) in fits.items()}


@pytest.mark.parametrize("kind", ["crps", "scrps", "mae", "mse"])
def test_the_paired_difference_is_the_exact_one_within_monte_carlo_error(two_models, kind):
    y, fits, exact = two_models
    table = bayesij.compare(_scores(fits, y, kind))
    terms = {name: _exact_terms(kind, y, *exact[name]) for name in exact}
    better = 1 if kind in ("crps", "scrps") else -1
    best = max(terms, key=lambda name: better * terms[name].mean())
    assert table.index[0] == best and table.attrs["kind"] == kind
    other = [name for name in terms if name != best][0]
    difference = terms[other] - terms[best]
    assert table.loc[best, "diff"] == 0.0 and np.isnan(table.loc[best, "p_worse"])
    # (the Monte Carlo error of the posterior mean of mu, shared by every observation, moves
    # the errors' differences by up to a few thousandths)
    assert table.loc[other, "diff"] == pytest.approx(difference.mean(), rel=0.1, abs=2e-3)
    se = difference.std(ddof=1) / np.sqrt(N)
    assert table.loc[other, "se_diff"] == pytest.approx(se, rel=0.05)
    worse = norm.cdf(0, loc=better * difference.mean(), scale=se)
    assert table.loc[other, "p_worse"] == pytest.approx(worse, abs=0.03)
    for name in terms:
        assert table.loc[name, kind] == pytest.approx(terms[name].mean(), rel=0.02, abs=2e-3)
    assert (table["diag_diff"] == "").all() and (table["diag_k"] == "").all()


def test_rmse_and_r2_differences_by_the_delta_method(two_models):
    y, fits, exact = two_models
    errors = {name: y - mean for name, (mean, _) in exact.items()}
    rmse = {name: np.sqrt(np.mean(e**2)) for name, e in errors.items()}
    table = bayesij.compare(_scores(fits, y, "rmse"))
    best, other = table.index
    assert rmse[best] <= rmse[other]
    assert table.loc[other, "diff"] == pytest.approx(rmse[other] - rmse[best], rel=0.1, abs=1e-3)
    influence = errors[other] ** 2 / (2 * rmse[other]) - errors[best] ** 2 / (2 * rmse[best])
    assert table.loc[other, "se_diff"] == pytest.approx(
        influence.std(ddof=1) / np.sqrt(N), rel=0.05
    )
    r2 = bayesij.compare(_scores(fits, y, "r2"))
    exact_r2 = {name: 1 - np.var(e) / np.var(y) for name, e in errors.items()}
    assert r2.index[0] == max(exact_r2, key=exact_r2.get)
    name = r2.index[1]
    # R² ignores the shrunk model's shift of every prediction: the two nearly tie (within
    # the Monte Carlo error of the LOO means, which se_diff, over observations, leaves out)
    exact_diff = exact_r2[name] - exact_r2[r2.index[0]]
    assert r2.loc[name, "diff"] == pytest.approx(exact_diff, abs=3e-3)
    assert 0 < r2.loc[name, "se_diff"] < 0.01


def test_accuracy_differences_count_the_observations_classified_differently():
    rng = np.random.default_rng(4)
    n = 200
    y = (rng.uniform(size=n) < 0.5).astype(float)
    p_good = np.clip(np.where(y == 1, 0.7, 0.3) + rng.normal(0, 0.05, n), 0.01, 0.99)
    p_bad = np.full(n, 0.6)
    scores = {}
    for name, p in (("good", p_good), ("bad", p_bad)):
        draws = np.broadcast_to(p, (2, 200, n))  # the same probability at every draw
        log_lik = np.where(y == 1, np.log(draws), np.log1p(-draws))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores[name] = bayesij.loo_metrics(log_lik, y, draws, kind="acc")
    table = bayesij.compare(scores)
    right = {"good": (p_good > 0.5) == (y == 1), "bad": (p_bad > 0.5) == (y == 1)}
    difference = right["bad"].astype(float) - right["good"]
    assert list(table.index) == ["good", "bad"]
    assert table.loc["bad", "diff"] == pytest.approx(difference.mean(), abs=1e-12)
    assert table.loc["bad", "se_diff"] == pytest.approx(difference.std(ddof=1) / np.sqrt(n))


def test_scores_that_cannot_be_compared_are_refused(two_models):
    y, fits, _ = two_models
    crps, mae = _scores(fits, y, "crps"), _scores(fits, y, "mae")
    with pytest.raises(ValueError, match=r"results: found scores of kinds \['crps', 'mae'\]"):
        bayesij.compare({"a": crps["right"], "b": mae["shrunk"]})
    with pytest.raises(ValueError, match=r"results: found scores beside \['loo'\]"):
        bayesij.compare({"a": crps["right"], "loo": bayesij.loo(fits["right"][0])})
    with pytest.raises(ValueError, match=r"weights: found 'stacking'; expected None when"):
        bayesij.compare(crps, weights="stacking")
    short = crps["shrunk"]
    other = type(short)(short.kind, short.estimate, short.se, short.pointwise.iloc[:-1])
    with pytest.raises(ValueError, match=r"results: found 'b' on other observations"):
        bayesij.compare({"a": crps["right"], "b": other})
    few = {n: type(s)(s.kind, s.estimate, s.se, s.pointwise.iloc[:50]) for n, s in crps.items()}
    assert bayesij.compare(few)["diag_diff"].tolist() == ["", "N < 100"]
    assert isinstance(bayesij.compare(crps), pd.DataFrame)


G, PER_GROUP = 40, 4


@pytest.fixture(scope="module")
def grouped_models():
    """The same two conjugate models over 40 groups of 4 observations: leaving group g out,
    each of its observations' predictive is N(m_-g, sigma^2 + v_-g), in closed form."""
    rng = np.random.default_rng(7)
    n = G * PER_GROUP
    groups = np.repeat(np.arange(G), PER_GROUP)
    y = rng.normal(1.0, 1.3, n)
    group_sums = np.bincount(groups, weights=y)
    fits, exact = {}, {}
    for name, sigma, tau in (("right", 1.3, TAU), ("shrunk", 1.0, 0.15)):
        precision = 1 / tau**2 + n / sigma**2
        mu = rng.normal(y.sum() / sigma**2 / precision, precision**-0.5, size=(4, 5000, 1))
        log_lik = norm.logpdf(y, mu, sigma)
        y_rep = mu + sigma * rng.normal(size=(4, 5000, n))
        logo_precision = 1 / tau**2 + (n - PER_GROUP) / sigma**2
        logo_mean = (y.sum() - group_sums[groups]) / sigma**2 / logo_precision
        fits[name] = (log_lik, y_rep)
        exact[name] = (logo_mean, np.sqrt(sigma**2 + 1 / logo_precision))
    return y, groups, fits, exact


@pytest.mark.parametrize("kind", ["crps", "scrps"])
def test_leave_one_group_out_scores_are_the_exact_group_scores(grouped_models, kind):
    """Each group's score is the sum of its observations' scores under the predictive
    without the whole group; compare pairs the models group by group."""
    y, groups, fits, exact = grouped_models
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = {
            name: bayesij.loo_score(ll, y, y_rep, kind=kind, groups=groups)
            for name, (ll, y_rep) in fits.items()
        }
    totals = {
        name: np.bincount(groups, weights=_exact_terms(kind, y, *exact[name])) for name in exact
    }
    for name, score in scores.items():
        assert len(score.pointwise) == G and score.pointwise.index.name == "group"
        # (a group of four: the Monte Carlo error of the weighted draws, up to a few hundredths)
        np.testing.assert_allclose(score.pointwise["score"], totals[name], atol=0.05)
        assert score.estimate == pytest.approx(totals[name].mean(), abs=0.01)
        assert score.se == pytest.approx(totals[name].std() / np.sqrt(G), rel=0.05)
    table = bayesij.compare(scores)
    best, other = table.index
    difference = totals[other] - totals[best]
    assert table.loc[other, "diff"] == pytest.approx(difference.mean(), abs=0.01)
    assert table.loc[other, "se_diff"] == pytest.approx(
        difference.std(ddof=1) / np.sqrt(G), rel=0.05
    )
    assert table.loc[other, "diag_diff"] == "N < 100"  # 40 groups: the units compared


def test_results_over_other_groups_are_not_compared(grouped_models):
    """Same labels, same number of groups, other members: refused for scores and elpd."""
    y, groups, fits, _ = grouped_models
    shuffled = np.random.default_rng(0).permutation(groups)
    (ll_a, rep_a), (ll_b, rep_b) = fits.values()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = bayesij.loo_score(ll_a, y, rep_a, groups=groups)
        b = bayesij.loo_score(ll_b, y, rep_b, groups=shuffled)
        loo_a, loo_b = bayesij.loo(ll_a, groups=groups), bayesij.loo(ll_b, groups=shuffled)
    with pytest.raises(ValueError, match="results: found 'b' grouped otherwise than 'a'"):
        bayesij.compare({"a": a, "b": b})
    with pytest.raises(ValueError, match="results: found 'b' grouped otherwise than 'a'"):
        bayesij.compare({"a": loo_a, "b": loo_b})
    with pytest.raises(ValueError, match="grouped otherwise"):
        bayesij.model_weights({"a": loo_a, "b": loo_b})


def test_the_same_groups_with_the_observations_in_another_order_are_compared(grouped_models):
    """Model b's fit stores its observations in another order (its ids say which is
    which): the groups are the same, so the comparison runs, and equals the one with the
    observations in order (it was refused as 'grouped otherwise', membership read by
    position)."""
    y, groups, fits, _ = grouped_models
    (ll_a, _), (ll_b, _) = fits.values()
    ids = [f"obs {i}" for i in range(y.size)]
    order = np.random.default_rng(1).permutation(y.size)
    a = bayesij.from_arrays(np.zeros((*ll_a.shape[:2], 1)), ll_a, obs_names=ids)
    b = bayesij.from_arrays(np.zeros((*ll_b.shape[:2], 1)), ll_b, obs_names=ids)
    b_reordered = bayesij.from_arrays(
        np.zeros((*ll_b.shape[:2], 1)), ll_b[..., order], obs_names=[ids[i] for i in order]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo_a = bayesij.loo(a, groups=groups)
        in_order = bayesij.compare({"a": loo_a, "b": bayesij.loo(b, groups=groups)})
        reordered = bayesij.compare(
            {"a": loo_a, "b": bayesij.loo(b_reordered, groups=groups[order])}
        )
        moved = groups[order].copy()
        moved[[0, 1]] = moved[[1, 0]] if moved[0] != moved[1] else (moved[0], (moved[1] + 1) % G)
        with pytest.raises(ValueError, match=r"grouped otherwise than 'a' \(observations \["):
            bayesij.compare({"a": loo_a, "b": bayesij.loo(b_reordered, groups=moved)})
    pd.testing.assert_frame_equal(reordered, in_order)


@pytest.mark.slow
def test_stacking_by_score_over_groups_uses_the_leave_one_group_out_predictives(
    grouped_models,
):
    """With groups, the mixture's score at the weights equals the score of the exact
    leave-one-group-out mixture of the two normal predictives (by quadrature) within
    Monte Carlo error, and no weight on a grid scores better."""
    y, groups, fits, exact = grouped_models
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weights = bayesij.score_weights(
            {name: ll for name, (ll, _) in fits.items()},
            "crps",
            y=y,
            y_pred={name: rep for name, (_, rep) in fits.items()},
            groups=groups,
        )
    a, b, c = _mixture_crps_terms(y, exact)  # -CRPS(w) = -(w^2 a + 2 w b + c) per point
    grid = np.linspace(0, 1, 201)
    exact_scores = [-(w**2 * a + 2 * w * b + c).mean() for w in grid]
    w_best = grid[int(np.argmax(exact_scores))]
    assert weights.iloc[0] == pytest.approx(w_best, abs=0.05)
    assert weights.attrs["score"] == pytest.approx(max(exact_scores), abs=0.01)


def _mixture_crps_terms(y, exact):
    """The CRPS of each observation under the mixture w F_1 + (1 - w) F_2 of the models'
    normal predictives is the quadratic w^2 a + 2 w b + c in the weight, with a, b, c the
    integrals of (F_1 - F_2)^2, (F_1 - F_2)(F_2 - 1{x >= y}) and (F_2 - 1{x >= y})^2
    (numerical integration)."""
    x = np.linspace(-12, 14, 6001)[:, None]
    (mean_1, sd_1), (mean_2, sd_2) = exact.values()
    gap = norm.cdf(x, mean_1, sd_1) - norm.cdf(x, mean_2, sd_2)
    rest = norm.cdf(x, mean_2, sd_2) - (x >= y)
    return (np.trapezoid(f, x, axis=0) for f in (gap**2, gap * rest, rest**2))
