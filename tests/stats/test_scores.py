"""LOO predictive scores: CRPS/SCRPS against the closed form of a normal LOO predictive and
against arviz-stats ``loo_score`` / ``loo_metrics`` (Python 3.12+ environment)."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm

import bayesij
from bayesij.array.scores import weighted_crps

N, SIGMA, TAU = 30, 1.0, 2.0


@pytest.fixture(scope="module")
def normal_mean():
    """y_n ~ N(mu, 1), mu ~ N(0, 2^2): exact posterior draws, predictive draws, and the
    closed-form LOO predictive N(m_-n, s_-n^2) of every observation."""
    rng = np.random.default_rng(0)
    y = rng.normal(1.0, 1.3, N)
    precision = 1 / TAU**2 + N / SIGMA**2
    mu = rng.normal(y.sum() / SIGMA**2 / precision, precision**-0.5, size=(4, 10000, 1))
    log_lik = norm.logpdf(y, mu, SIGMA)
    y_rep = mu + SIGMA * rng.normal(size=(4, 10000, N))
    loo_precision = 1 / TAU**2 + (N - 1) / SIGMA**2
    loo_mean = (y.sum() - y) / SIGMA**2 / loo_precision
    loo_sd = np.sqrt(SIGMA**2 + 1 / loo_precision)
    return y, log_lik, y_rep, loo_mean, loo_sd


def _normal_crps(y, mean, sd):
    z = (y - mean) / sd
    return sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))


def _normal_scrps(y, mean, sd):
    z = (y - mean) / sd
    absolute = sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z))  # E|X - y|
    spread = 2 * sd / np.sqrt(np.pi)  # E|X - X'|
    return -absolute / spread - 0.5 * np.log(spread)


def test_weighted_crps_is_exact_for_the_empirical_distribution():
    rng = np.random.default_rng(1)
    draws, y = rng.normal(size=(7, 3)), rng.normal(size=3)
    weights = rng.dirichlet(np.ones(7), size=3).T
    crps, scrps = weighted_crps(draws, y, weights)
    for j in range(3):  # the double sums over all pairs of draws
        absolute = weights[:, j] @ np.abs(draws[:, j] - y[j])
        pairs = np.abs(draws[:, j, None] - draws[None, :, j])
        spread = weights[:, j] @ pairs @ weights[:, j]
        assert crps[j] == pytest.approx(-(absolute - spread / 2), rel=1e-12)
        assert scrps[j] == pytest.approx(-absolute / spread - np.log(spread) / 2, rel=1e-12)


@pytest.mark.parametrize(("kind", "closed_form"), [("crps", None), ("scrps", _normal_scrps)])
def test_loo_scores_equal_the_closed_form_of_the_normal_loo_predictive(
    normal_mean, kind, closed_form
):
    y, log_lik, y_rep, loo_mean, loo_sd = normal_mean
    result = bayesij.loo_score(log_lik, y, y_rep, kind=kind)
    truth = (
        -_normal_crps(y, loo_mean, loo_sd)
        if closed_form is None
        else closed_form(y, loo_mean, loo_sd)
    )
    np.testing.assert_allclose(result.pointwise["score"], truth, atol=0.04)
    assert result.estimate == pytest.approx(truth.mean(), abs=0.01)
    assert result.se == pytest.approx(truth.std() / np.sqrt(N), rel=0.05)
    assert np.all(result.pointwise["pareto_k"] < 0.5)
    reused = bayesij.loo_score(
        log_lik, y, y_rep, kind=kind, psis=bayesij.loo(log_lik, save_psis=True)
    )
    np.testing.assert_allclose(reused.pointwise["score"], result.pointwise["score"], rtol=1e-12)


def test_loo_metrics_of_the_normal_mean(normal_mean):
    y, log_lik, y_rep, loo_mean, _ = normal_mean
    error = y - loo_mean
    rmse = bayesij.loo_metrics(log_lik, y, y_rep, kind="rmse")
    np.testing.assert_allclose(rmse.pointwise["prediction"], loo_mean, atol=0.03)
    assert rmse.estimate == pytest.approx(np.sqrt(np.mean(error**2)), abs=0.01)
    mae = bayesij.loo_metrics(log_lik, y, y_rep, kind="mae")
    assert mae.estimate == pytest.approx(np.mean(np.abs(error)), abs=0.01)
    # Intercept only: the LOO residuals exceed the deviations from the mean, so R^2 < 0,
    # about 1 - (N / (N - 1))^2 under a flat prior.
    r2 = bayesij.loo_metrics(log_lik, y, y_rep, kind="r2")
    assert r2.estimate == pytest.approx(1 - np.var(error) / np.var(y), abs=0.01)
    assert r2.estimate < 0 and 0 < r2.se < 0.05


def test_score_arguments_are_checked(normal_mean):
    y, log_lik, y_rep, _, _ = normal_mean
    with pytest.raises(ValueError, match=r"kind: found 'energy'; expected one of"):
        bayesij.loo_score(log_lik, y, y_rep, kind="energy")
    with pytest.raises(ValueError, match=r"y: found shape \(29,\); expected one value"):
        bayesij.loo_score(log_lik, y[:-1], y_rep)
    with pytest.raises(ValueError, match=r"kind: found 'r3'; expected one of"):
        bayesij.loo_metrics(log_lik, y, y_rep, kind="r3")


def test_loo_scores_and_metrics_equal_arviz_stats(normal_mean):
    arviz_stats = pytest.importorskip("arviz_stats")
    az = pytest.importorskip("arviz")
    if int(az.__version__.split(".")[0]) < 1:
        pytest.skip("arviz-stats 1.x runs with ArviZ 1.x (Python >= 3.12)")
    y, log_lik, y_rep, _, _ = normal_mean
    tree = az.from_dict(
        {
            "posterior": {"mu": log_lik[..., :1] * 0 + y_rep[..., :1]},
            "posterior_predictive": {"y": y_rep},
            "log_likelihood": {"y": log_lik},
            "observed_data": {"y": y},
        }
    )
    from arviz_stats.loo.loo_helper import _get_r_eff

    r_eff = float(_get_r_eff(tree, log_lik.shape[0] * log_lik.shape[1]))  # theirs: scalar
    for kind in ("crps", "scrps"):
        theirs = arviz_stats.loo_score(tree, kind=kind, pointwise=True)
        ours = bayesij.loo_score(
            tree,
            y,
            y_rep,
            kind=kind,
            convention=bayesij.PsisOptions(r_eff=r_eff, tail_rule="floor"),
        )
        np.testing.assert_allclose(
            ours.pointwise["score"], np.asarray(theirs.pointwise).ravel(), rtol=1e-10
        )
        assert ours.estimate == pytest.approx(theirs.mean, rel=1e-10)
        assert ours.se == pytest.approx(theirs.se, rel=1e-10)
    for kind in ("mae", "mse", "rmse"):
        theirs = arviz_stats.loo_metrics(tree, kind=kind, round_to="none")
        ours = bayesij.loo_metrics(
            tree,
            y,
            y_rep,
            kind=kind,
            convention=bayesij.PsisOptions(r_eff=r_eff, tail_rule="floor"),
        )
        assert ours.estimate == pytest.approx(theirs.mean, rel=1e-10)
        assert ours.se == pytest.approx(theirs.se, rel=1e-10)


def _logistic_fit(rng, n=120, draws=(4, 250)):
    """Draws of a logistic regression's probabilities (a Laplace-like cloud around the
    truth), the binary outcomes, their log-likelihood and replicated outcomes."""
    x = rng.normal(size=n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.3 + 1.5 * x)))).astype(float)
    beta = rng.normal([0.3, 1.5], 0.15, size=(*draws, 2))
    p = 1 / (1 + np.exp(-(beta[..., :1] + beta[..., 1:] * x)))
    log_lik = np.where(y == 1, np.log(p), np.log1p(-p))
    return y, log_lik, p


def test_accuracy_and_balanced_accuracy():
    rng = np.random.default_rng(8)
    y, log_lik, p = _logistic_fit(rng)
    acc = bayesij.loo_metrics(log_lik, y, p, kind="acc")
    prediction = acc.pointwise["prediction"].to_numpy()
    right = (prediction > 0.5) == (y == 1)
    assert acc.estimate == pytest.approx(right.mean())
    assert acc.se == pytest.approx(np.sqrt(right.mean() * (1 - right.mean()) / y.size))
    balanced = bayesij.loo_metrics(log_lik, y, p, kind="acc_balanced")
    tn, tp = right[y == 0].mean(), right[y == 1].mean()
    assert balanced.estimate == pytest.approx((tn + tp) / 2)
    assert balanced.se == pytest.approx(np.sqrt((tp * (1 - tp) + tn * (1 - tn)) / (4 * y.size)))
    # A probability of exactly 1/2 classifies as 0, as arviz-stats' `predicted > 0.5`.
    from bayesij.stats.scores import _accuracy

    assert _accuracy("acc", np.array([0.0, 1.0]), np.array([0.5, 0.5]))[0] == 0.5
    assert _accuracy("acc", np.array([0.0, 0.0]), np.array([0.5, 0.5]))[0] == 1.0
    with pytest.raises(ValueError, match=r"y: found values other than 0 and 1"):
        bayesij.loo_metrics(log_lik, y + 0.5, p, kind="acc")
    with pytest.raises(ValueError, match=r"y: found outcomes of one class only"):
        bayesij.loo_metrics(log_lik, np.ones_like(y), p, kind="acc_balanced")


def test_accuracy_equals_arviz_stats():
    arviz_stats = pytest.importorskip("arviz_stats")
    az = pytest.importorskip("arviz")
    if int(az.__version__.split(".")[0]) < 1:
        pytest.skip("arviz-stats 1.x runs with ArviZ 1.x (Python >= 3.12)")
    y, log_lik, p = _logistic_fit(np.random.default_rng(9))
    tree = az.from_dict(
        {
            "posterior": {"mu": p[..., 0]},
            "posterior_predictive": {"y": p},
            "log_likelihood": {"y": log_lik},
            "observed_data": {"y": y},
        }
    )
    from arviz_stats.loo.loo_helper import _get_r_eff

    r_eff = float(_get_r_eff(tree, log_lik.shape[0] * log_lik.shape[1]))
    for kind in ("acc", "acc_balanced"):
        with warnings.catch_warnings():  # arviz-stats on its short expectation tails
            warnings.simplefilter("ignore")
            theirs = arviz_stats.loo_metrics(tree, kind=kind, round_to="none")
            ours = bayesij.loo_metrics(
                tree,
                y,
                p,
                kind=kind,
                convention=bayesij.PsisOptions(r_eff=r_eff, tail_rule="floor"),
            )
        assert ours.estimate == pytest.approx(theirs.mean, rel=1e-12)
        assert ours.se == pytest.approx(theirs.se, rel=1e-12)


def test_the_score_s_se_divisor_is_arviz_stats_unless_psis_options_give_one(normal_mean):
    """loo_score's SE uses ddof 0 (arviz-stats) under every convention's name, and ddof 1
    exactly when PsisOptions(ddof=1) asks: sd / sqrt(n) with the sample sd."""
    y, log_lik, y_rep, _, _ = normal_mean
    plain = bayesij.loo_score(log_lik, y, y_rep)
    named = bayesij.loo_score(log_lik, y, y_rep, convention="R loo")  # R loo's ddof is 1
    given = bayesij.loo_score(log_lik, y, y_rep, convention=bayesij.PsisOptions(ddof=1))
    scores = plain.pointwise["score"].to_numpy()
    assert plain.se == pytest.approx(scores.std(ddof=0) / np.sqrt(scores.size), rel=1e-12)
    assert named.se == pytest.approx(named.pointwise["score"].std(ddof=0) / np.sqrt(N), rel=1e-12)
    assert given.se == pytest.approx(scores.std(ddof=1) / np.sqrt(scores.size), rel=1e-12)


def _normal_predictive(n_obs, mu=0.3, sigma=1.2, n_draws=4000):
    """A fit whose LOO weights are uniform (a constant log-likelihood) and whose predictive
    draws of every observation are N(mu, sigma^2) at its quantiles (no Monte Carlo noise)."""
    from scipy.stats import norm

    x = mu + sigma * norm.ppf((np.arange(n_draws) + 0.5) / n_draws)
    y_pred = np.repeat(x[:, None], n_obs, axis=1).reshape(1, n_draws, n_obs)
    post = bayesij.from_arrays(np.zeros((1, n_draws, 1)), np.zeros((1, n_draws, n_obs)))
    return post, y_pred


def test_the_censored_crps_is_the_threshold_weighted_crps_of_the_normal():
    """Right-censored at c: -int_{-inf}^{c} Phi((z - mu)/sigma)^2 dz; left-censored at c:
    -int_{c}^{inf} (1 - Phi)^2 dz; an observed value keeps its ordinary CRPS."""
    from scipy.integrate import quad
    from scipy.stats import norm

    post, y_pred = _normal_predictive(3)
    y = np.array([0.9, -0.4, 0.5])
    censored = np.array([1, -1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        score = bayesij.loo_score(post, y, y_pred, censored=censored).pointwise["score"]
        plain = bayesij.loo_score(post, y, y_pred).pointwise["score"]
    cdf = norm(0.3, 1.2).cdf
    right = quad(lambda z: cdf(z) ** 2, -np.inf, 0.9)[0]
    left = quad(lambda z: (1 - cdf(z)) ** 2, -0.4, np.inf)[0]
    np.testing.assert_allclose(score.iloc[:2], [-right, -left], atol=2e-4)
    assert score.iloc[2] == plain.iloc[2]
    with pytest.raises(ValueError, match=r"^censored: found codes other than -1, 0, 1"):
        bayesij.loo_score(post, y, y_pred, censored=[2, 0, 0])


def test_the_censored_loo_pit_is_uniform_when_the_model_is_right():
    """Data from the predictive, right-censored above 1.0: each censored value's PIT lies
    in [F(1.0), 1], the uncensored ones are F(y), and all of them together are uniform
    (20 data sets pooled: the largest ECDF gap within 3 / sqrt(n), where a bias of a few
    percent would show; without the censoring codes the censored values' PIT is F(1.0),
    which is not)."""
    from scipy.stats import kstest, norm

    post, y_pred = _normal_predictive(400, n_draws=2000)
    pooled, naive = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        latent = rng.normal(0.3, 1.2, size=400)
        censored = (latent > 1.0).astype(int)
        y = np.minimum(latent, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pit = bayesij.loo_pit(post, y, y_pred, censored=censored, seed=seed).to_numpy()
            naive.append(bayesij.loo_pit(post, y, y_pred).to_numpy())
        cut = norm(0.3, 1.2).cdf(1.0)
        assert np.all(pit[censored == 1] >= cut - 1e-3)
        uncensored = norm(0.3, 1.2).cdf(y[censored == 0])
        np.testing.assert_allclose(pit[censored == 0], uncensored, atol=1e-3)
        pooled.append(pit)
    assert kstest(np.concatenate(pooled), "uniform").statistic < 3 / np.sqrt(8000)
    assert kstest(np.concatenate(naive), "uniform").statistic > 0.1
    with pytest.raises(ValueError, match=r"^censored: found censoring codes with pareto_pit"):
        bayesij.loo_pit(post, y, y_pred, censored=censored, pareto_pit=True)
