"""Power-scaling sensitivity: against arviz-stats ``psense`` on the same draws (Python 3.12+),
and its first-order derivatives against the closed form of a conjugate normal model."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import bayesij
from bayesij.array.power_scaling import cjs_distance
from tests.helpers.peers import ARVIZ_1, from_dict

N, SIGMA = 20, 1.0


def _conjugate(tau: float, prior_mean: float = 0.0, seed: int = 3):
    """Exact posterior draws of mu for y_n ~ N(mu, 1), mu ~ N(prior_mean, tau^2), with the
    pointwise log-likelihood and the log prior, as an InferenceData / DataTree."""
    rng = np.random.default_rng(seed)
    y = rng.normal(2.0, SIGMA, N)
    precision = 1 / tau**2 + N / SIGMA**2
    mean = (prior_mean / tau**2 + y.sum() / SIGMA**2) / precision
    mu = rng.normal(mean, precision**-0.5, size=(4, 5000))
    log_lik = norm.logpdf(y, mu[..., None], SIGMA)
    log_prior = norm.logpdf(mu, prior_mean, tau)
    data = from_dict(
        posterior={"mu": mu}, log_likelihood={"y": log_lik}, log_prior={"mu": log_prior}
    )
    return data, mean, precision, log_prior


def test_the_first_order_derivatives_equal_the_closed_form():
    tau = 0.5
    data, mean, precision, _ = _conjugate(tau)
    table = bayesij.psense(data)
    # d/d alpha at 1 of the posterior mean m(alpha) under p(mu)^alpha p(y | mu) (prior mean
    # 0): -m / (tau^2 precision); under p(mu) p(y | mu)^alpha: +m / (tau^2 precision).
    slope = mean / (tau**2 * precision)
    # Relative Monte Carlo sd of these covariances with 20000 exact draws: about 1 %.
    assert table.loc["mu", "d_mean_prior"] == pytest.approx(-slope, rel=0.05)
    assert table.loc["mu", "d_mean_likelihood"] == pytest.approx(slope, rel=0.05)
    psi = bayesij.influence(data)["psi"].sum("obs").values[0]
    assert table.loc["mu", "d_mean_likelihood"] == pytest.approx(psi, rel=1e-10)


def test_a_conflicting_prior_is_diagnosed_and_a_vague_one_is_not():
    conflict, *_ = _conjugate(tau=0.3, prior_mean=-1.0)
    vague, *_ = _conjugate(tau=100.0)
    table = bayesij.psense(conflict)
    assert table.loc["mu", "diagnosis"] == "potential prior-data conflict"
    assert table.loc["mu", "prior"] > 0.05 and table.loc["mu", "likelihood"] > 0.05
    calm = bayesij.psense(vague)
    assert calm.loc["mu", "diagnosis"] == "-" and calm.loc["mu", "prior"] < 0.01


def test_every_log_prior_source_gives_the_same_answer():
    data, _, _, log_prior = _conjugate(tau=0.5)
    post = bayesij.from_inference_data(data)
    expected = bayesij.psense(data)
    for source in (log_prior, log_prior.ravel(), lambda p: log_prior):
        np.testing.assert_array_equal(bayesij.psense(post, log_prior=source), expected)
    mu = post.quantities.values
    with_lprior = bayesij.from_arrays(
        np.concatenate([mu, log_prior[..., None]], axis=2),
        post.log_lik.values,
        quantity_names=["mu", "lprior"],
    )
    from_name = bayesij.psense(with_lprior, log_prior="lprior")
    assert list(from_name.index) == ["mu"]
    np.testing.assert_allclose(
        from_name.to_numpy()[:, :2].astype(float), expected.to_numpy()[:, :2].astype(float)
    )


def test_cjs_distance_is_zero_for_equal_weights_and_grows_with_the_tilt():
    draws = np.random.default_rng(0).normal(size=(2000, 1))
    assert cjs_distance(draws, np.full(2000, 1 / 2000))[0] == pytest.approx(0.0, abs=1e-6)
    distances = []
    for tilt in (0.05, 0.2, 0.5):
        weights = np.exp(tilt * draws[:, 0])
        distances.append(cjs_distance(draws, weights / weights.sum())[0])
    assert 0 < distances[0] < distances[1] < distances[2]


def test_psense_arguments_are_checked():
    data, *_ = _conjugate(tau=0.5)
    post = bayesij.from_inference_data(data)
    with pytest.raises(ValueError, match=r"log_prior: found None with data a Posterior"):
        bayesij.psense(post)
    with pytest.raises(ValueError, match=r"log_prior: found shape \(7,\); expected one value"):
        bayesij.psense(post, log_prior=np.zeros(7))
    with pytest.raises(ValueError, match=r"alphas: found \(1.01, 0.99\); expected two powers"):
        bayesij.psense(data, alphas=(1.01, 0.99))
    with pytest.raises(ValueError, match=r"log_prior: found 'nope'; expected a quantity"):
        bayesij.psense(post, log_prior="nope")


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats 1.x runs with ArviZ 1.x (Python >= 3.12)")
def test_psense_equals_arviz_stats_on_the_same_draws():
    arviz_stats = pytest.importorskip("arviz_stats")
    rng = np.random.default_rng(3)
    y = rng.normal(2.0, 1.0, N)
    mu = rng.normal(1.8, 0.22, size=(4, 1000))
    sigma = np.exp(rng.normal(0, 0.15, size=(4, 1000)))
    data = from_dict(
        posterior={"mu": mu, "sigma": sigma},
        log_likelihood={"y": norm.logpdf(y, mu[..., None], sigma[..., None])},
        log_prior={"mu": norm.logpdf(mu, 0, 1), "sigma": norm.logpdf(np.log(sigma), 0, 1)},
    )
    ours = bayesij.psense(data)
    for component in ("prior", "likelihood"):
        theirs = arviz_stats.psense(data, group=component)
        for name in ("mu", "sigma"):
            assert ours.loc[name, component] == pytest.approx(float(theirs[name]), rel=1e-8)


@pytest.mark.parametrize("component", ["prior", "likelihood"])
def test_sequence_follows_the_closed_form_scaled_posterior(component):
    """Power-scaling a conjugate normal model's prior by alpha gives precision
    alpha/tau^2 + N, its likelihood 1/tau^2 + alpha N: the sequence's weighted means and sds
    follow the closed form within their Monte Carlo error."""
    tau, prior_mean = 0.3, -1.0
    data, _, _, _ = _conjugate(tau, prior_mean=prior_mean)
    rng = np.random.default_rng(3)
    y_sum = rng.normal(2.0, SIGMA, N).sum()  # the data _conjugate drew (same seed)
    sequence = bayesij.psense_sequence(data, component=component, alphas=[0.8, 0.9, 1.0, 1.25])
    assert list(sequence.columns) == [
        "alpha",
        "quantity",
        "mean",
        "sd",
        "cjs",
        "pareto_k",
        "reliable",
    ]
    for alpha, row in sequence.set_index("alpha").iterrows():
        a_prior, a_lik = (alpha, 1.0) if component == "prior" else (1.0, alpha)
        precision = a_prior / tau**2 + a_lik * N / SIGMA**2
        mean = (a_prior * prior_mean / tau**2 + a_lik * y_sum / SIGMA**2) / precision
        assert row["reliable"]
        assert row["mean"] == pytest.approx(mean, abs=4 * precision**-0.5 / np.sqrt(2000))
        assert row["sd"] == pytest.approx(precision**-0.5, rel=0.05)
    unscaled = sequence.set_index("alpha").loc[1.0]
    assert unscaled["cjs"] == pytest.approx(0.0, abs=1e-6) and unscaled["pareto_k"] == -np.inf


def test_prior_selection_scales_only_the_parts_named():
    rng = np.random.default_rng(4)
    mu, log_sigma = rng.normal(1.0, 0.2, size=(2, 4, 1000))
    log_lik = norm.logpdf(rng.normal(1, 1, 15), mu[..., None], np.exp(log_sigma)[..., None])
    parts = {"mu": norm.logpdf(mu, 0, 0.5), "sigma": norm.logpdf(log_sigma, 0, 1)}
    data = from_dict(
        posterior={"mu": mu, "log_sigma": log_sigma}, log_likelihood={"y": log_lik}, log_prior=parts
    )
    only_mu = bayesij.psense(data, prior_selection="mu")
    post = bayesij.from_inference_data(data)
    expected = bayesij.psense(post, log_prior=parts["mu"])
    pd.testing.assert_frame_equal(only_mu, expected)
    stacked = np.stack([parts["mu"], parts["sigma"]], axis=-1)  # an array: parts by index
    pd.testing.assert_frame_equal(
        bayesij.psense(post, log_prior=stacked, prior_selection=[0]), expected
    )
    with pytest.raises(ValueError, match=r"prior_selection: found \['tau'\]; expected parts"):
        bayesij.psense(data, prior_selection="tau")


def test_khat_of_the_scaling_is_reported_and_warned_about():
    data, *_ = _conjugate(tau=0.5)
    table = bayesij.psense(data)
    assert (table["prior_khat"] < 0.5).all() and (table["likelihood_khat"] < 0.5).all()
    post = bayesij.from_inference_data(data)
    wild = 2000 * np.random.default_rng(5).standard_t(1.5, size=(4, 5000))
    with pytest.warns(UserWarning, match=r"Power-scaling the prior: Pareto k-hat .* > 0\.70"):
        flagged = bayesij.psense(post, log_prior=wild)
    assert flagged["prior_khat"].iloc[0] > 0.7
    sequence = bayesij.psense_sequence(post, log_prior=wild, alphas=[0.8])
    assert not sequence["reliable"].any()


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats 1.x runs with ArviZ 1.x (Python >= 3.12)")
def test_prior_selection_equals_arviz_stats_prior_var_names():
    arviz_stats = pytest.importorskip("arviz_stats")
    rng = np.random.default_rng(6)
    mu = rng.normal(1.8, 0.22, size=(4, 1000))
    sigma = np.exp(rng.normal(0, 0.15, size=(4, 1000)))
    data = from_dict(
        posterior={"mu": mu, "sigma": sigma},
        log_likelihood={"y": norm.logpdf(rng.normal(2, 1, N), mu[..., None], sigma[..., None])},
        log_prior={"mu": norm.logpdf(mu, 0, 1), "sigma": norm.logpdf(np.log(sigma), 0, 1)},
    )
    ours = bayesij.psense(data, prior_selection=["sigma"])
    theirs = arviz_stats.psense(data, group="prior", group_var_names=["sigma"])
    for name in ("mu", "sigma"):
        assert ours.loc[name, "prior"] == pytest.approx(float(theirs[name]), rel=1e-6, abs=1e-8)


def test_power_scaled_draws_are_what_the_sequence_summarises():
    data, *_ = _conjugate(tau=0.5)
    scaled = bayesij.power_scaled_draws(data, alphas=[0.8, 1.0, 1.25])
    assert scaled.weights.shape == (3, scaled.draws.shape[0])
    np.testing.assert_allclose(scaled.weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(scaled.weights[1], 1 / scaled.draws.shape[0])  # alpha = 1
    table = bayesij.psense_sequence(data, alphas=[0.8, 1.0, 1.25])
    np.testing.assert_allclose(table["mean"], scaled.weights @ scaled.draws[:, 0])
    assert scaled.reliable.all() and list(table["pareto_k"]) == list(scaled.pareto_k)


class _ConjugateDensity:
    """log p(mu) and log p(mu | y) up to a constant for _conjugate's model, over draws of
    its one (unconstrained) quantity."""

    def __init__(self, tau, prior_mean, y):
        self.tau, self.prior_mean, self.y = tau, prior_mean, y

    def log_prior(self, theta):
        return norm.logpdf(theta[:, 0], self.prior_mean, self.tau)

    def log_prob(self, theta):
        return self.log_prior(theta) + norm.logpdf(self.y, theta[:, :1], SIGMA).sum(axis=1)


def _scaled_posterior(component, alpha, tau, prior_mean, y_sum):
    a_prior, a_lik = (alpha, 1.0) if component == "prior" else (1.0, alpha)
    precision = a_prior / tau**2 + a_lik * N / SIGMA**2
    return (a_prior * prior_mean / tau**2 + a_lik * y_sum / SIGMA**2) / precision, precision**-0.5


@pytest.mark.parametrize(
    ("component", "alphas"), [("likelihood", [0.25, 0.5, 4.0]), ("prior", [0.25, 4.0, 8.0])]
)
def test_moment_matching_reaches_scalings_that_reweighting_cannot(component, alphas):
    tau, prior_mean = 0.3, -1.0
    data, *_ = _conjugate(tau, prior_mean=prior_mean)
    y = np.random.default_rng(3).normal(2.0, SIGMA, N)  # the data _conjugate drew
    density = _ConjugateDensity(tau, prior_mean, y)
    plain = bayesij.psense_sequence(data, component=component, alphas=alphas)
    matched = bayesij.psense_sequence(
        data, component=component, alphas=alphas, moment_match=density
    )
    assert not plain["reliable"].all()  # plain reweighting cannot reach these scalings
    for alpha in alphas:
        mean, sd = _scaled_posterior(component, alpha, tau, prior_mean, y.sum())
        row = matched.set_index("alpha").loc[alpha]
        assert row["reliable"]
        assert row["mean"] == pytest.approx(mean, abs=4 * sd / np.sqrt(1000))
        assert row["sd"] == pytest.approx(sd, rel=0.06)
    scaled = bayesij.power_scaled_draws(
        data, component=component, alphas=alphas, moment_match=density
    )
    assert any(moved is not None for moved in scaled.moved)


def test_psense_with_moment_matching_equals_exact_draws_of_the_scaled_posteriors():
    """With alphas far from 1 the PSIS weights fail; moment matching gives the distances
    that exact independent draws of the scaled posteriors (closed-form normals) give."""
    from bayesij.array.power_scaling import cjs_two_sample

    tau, prior_mean = 0.3, -1.0
    data, *_ = _conjugate(tau, prior_mean=prior_mean)
    y = np.random.default_rng(3).normal(2.0, SIGMA, N)
    density = _ConjugateDensity(tau, prior_mean, y)
    alphas = (0.25, 4.0)
    with pytest.warns(UserWarning, match="Pareto k-hat"):
        plain = bayesij.psense(data, alphas=alphas)
    table = bayesij.psense(data, alphas=alphas, moment_match=density)
    x = data["posterior"]["mu"].values.reshape(-1, 1)
    uniform = np.full(x.shape[0], 1 / x.shape[0])
    rng = np.random.default_rng(9)
    for component in ("prior", "likelihood"):
        gradients = []
        for alpha in alphas:
            m, s = _scaled_posterior(component, alpha, tau, prior_mean, y.sum())
            exact = rng.normal(m, s, size=x.shape)
            distance = max(cjs_two_sample(x, exact, uniform), cjs_two_sample(-x, -exact, uniform))
            gradients.append(distance / abs(np.log2(alpha)))
        # The distances weigh the tails, where a few thousand weighted draws err by some
        # percent; the plain weights (k-hat 2-3) are off by 40 %.
        exact = np.mean(gradients)
        assert table.loc["mu", component] == pytest.approx(exact, rel=0.12)
        error, plain_error = (abs(t.loc["mu", component] - exact) for t in (table, plain))
        assert error < 0.5 * plain_error
        assert table.loc["mu", f"{component}_khat"] < 0.7 < plain.loc["mu", f"{component}_khat"]


def test_two_sample_cjs_of_the_same_draws_is_the_one_sample_distance():
    from bayesij.array.power_scaling import cjs_two_sample

    rng = np.random.default_rng(10)
    x = rng.normal(size=(500, 2))
    w = rng.dirichlet(np.ones(500))
    np.testing.assert_allclose(cjs_two_sample(x, x, w), cjs_distance(x, w), atol=1e-12)
    assert np.all(cjs_two_sample(x, x, np.full(500, 1 / 500)) < 1e-6)


def test_the_wasserstein_sensitivity_equals_the_closed_form_scaled_posteriors():
    """Under p(mu)^alpha p(y | mu) the posterior stays normal (precision alpha / tau^2 +
    N / sigma^2): the 1-Wasserstein distance of each scaled posterior from the posterior,
    int |F_alpha - F_1| by quadrature, per unit of log2 alpha, is what psense measures with
    div_measure="ws_dist" from reweighted draws."""
    from scipy.integrate import quad

    tau = 0.5
    data, mean, precision, _ = _conjugate(tau)
    rng = np.random.default_rng(3)
    y = rng.normal(2.0, SIGMA, N)

    def scaled(alpha):
        p = alpha / tau**2 + N / SIGMA**2
        return norm(y.sum() / SIGMA**2 / p, p**-0.5)

    base = scaled(1.0)
    expected = 0.0
    for alpha in (0.99, 1.01):
        other = scaled(alpha)
        gap = quad(lambda z, o=other: abs(o.cdf(z) - base.cdf(z)), mean - 3, mean + 3)[0]
        expected += 0.5 * gap / abs(np.log2(alpha))
    table = bayesij.psense(data, div_measure="ws_dist")
    assert table.loc["mu", "prior"] == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize(
    "measure", ["js_dist", "js_div", "hellinger_dist", "kl_dist", "kl_div", "ws_dist", "ks_dist"]
)
def test_every_divergence_measure_tells_a_strong_prior_from_a_vague_one(measure):
    strong = bayesij.psense(_conjugate(0.3)[0], div_measure=measure).loc["mu", "prior"]
    vague = bayesij.psense(_conjugate(30.0)[0], div_measure=measure).loc["mu", "prior"]
    assert strong > 10 * vague > 0


def test_an_unknown_divergence_measure_is_refused():
    with pytest.raises(ValueError, match=r"^div_measure: found 'tv_dist'; expected one of"):
        bayesij.psense(_conjugate(1.0)[0], div_measure="tv_dist")


def test_the_auto_alpha_range_ends_where_the_scalings_stop_being_reliable():
    """Scaling the likelihood by 0.2 asks the draws for a posterior more than twice as wide
    (k-hat far above the threshold): the range narrows at that end to the power where k-hat
    reaches the threshold, every scaling in it is reliable, and just beyond that end it is
    not; an end that was reliable stays where it was."""
    from bayesij.array.power_scaling import power_scaling_weights
    from bayesij.array.psis import pareto_k_threshold

    rng = np.random.default_rng(0)
    y = rng.normal(2.0, 1.0, 200)
    mu = rng.normal(y.mean(), 1 / np.sqrt(200), size=(4, 1000))
    log_lik = norm.logpdf(y, mu[..., None], 1.0)
    log_prior = norm.logpdf(mu, 0, 10)
    data = from_dict(
        posterior={"mu": mu}, log_likelihood={"y": log_lik}, log_prior={"mu": log_prior}
    )
    grid = np.exp(np.linspace(np.log(0.2), np.log(5.0), 11))
    options = dict(component="likelihood", alphas=grid)
    plain = bayesij.psense_sequence(data, **options)
    assert not plain["reliable"].all()
    auto = bayesij.psense_sequence(data, **options, auto_alpha_range=True)
    assert auto["reliable"].all() and auto["alpha"].nunique() == 11
    low, high = auto["alpha"].min(), auto["alpha"].max()
    total = log_lik.sum(axis=-1).ravel()
    threshold = pareto_k_threshold(total.size)
    for end, bound, beyond in ((low, 0.2, low * 0.99), (high, 5.0, high * 1.01)):
        assert power_scaling_weights(total, end)[1] <= threshold
        if not np.isclose(end, bound):
            assert power_scaling_weights(total, beyond)[1] > threshold
    assert 0.2 < low < 1
