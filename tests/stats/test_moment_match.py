"""Moment matching of PSIS-LOO against the closed-form LOO predictive of a conjugate normal
linear regression with high-leverage outliers (where PSIS's k-hat is far above 0.7)."""

from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

import bayesij

PRIOR_VAR = 100.0


@dataclass
class Regression:
    """y ~ N(X beta, 1), beta ~ N(0, 100 I): the model's density in NumPy."""

    X: np.ndarray
    y: np.ndarray

    def posterior(self, keep=None):
        keep = np.ones(len(self.y), bool) if keep is None else keep
        precision = np.eye(self.X.shape[1]) / PRIOR_VAR + self.X[keep].T @ self.X[keep]
        covariance = np.linalg.inv(precision)
        return covariance @ self.X[keep].T @ self.y[keep], covariance

    def loo_density(self, i: int) -> float:
        keep = np.arange(len(self.y)) != i
        mean, covariance = self.posterior(keep)
        sd = np.sqrt(1 + self.X[i] @ covariance @ self.X[i])
        return float(norm.logpdf(self.y[i], self.X[i] @ mean, sd))

    # the ModelDensity interface: beta is already unconstrained
    def unconstrain(self, post):
        return post.quantities.values.reshape(post.n_draws, -1)

    def log_prob(self, upars):
        prior = multivariate_normal.logpdf(upars, np.zeros(upars.shape[1]), PRIOR_VAR)
        return prior + norm.logpdf(self.y, upars @ self.X.T, 1.0).sum(axis=1)

    def log_lik_i(self, upars, i):
        return norm.logpdf(self.y[i], upars @ self.X[i], 1.0)


@pytest.fixture(scope="module")
def fit():
    rng = np.random.default_rng(2)
    x = rng.normal(size=15)
    x[:2] = [4.0, -3.5]
    model = Regression(np.column_stack([np.ones(15), x]), 0.5 + 0.8 * x + rng.normal(size=15))
    model.y[:2] = [-8.0, 6.0]
    mean, covariance = model.posterior()
    beta = rng.multivariate_normal(mean, covariance, size=(4, 500))
    log_lik = norm.logpdf(model.y, beta @ model.X.T, 1.0)
    return model, bayesij.from_arrays(beta, log_lik, quantity_names=["alpha", "beta"])


def test_moment_matching_recovers_the_exact_loo_where_psis_fails(fit):
    model, post = fit
    with pytest.warns(UserWarning, match="Pareto k-hat above"):
        psis = bayesij.loo(post)
    matched = bayesij.loo_moment_match(post, model, loo=psis)
    table, before = matched.pointwise, psis.pointwise
    high = np.flatnonzero(before["pareto_k"] > psis.k_threshold)
    assert {0, 1} <= set(high) and before["pareto_k"].iloc[0] > 1
    for i in high:
        exact = model.loo_density(i)
        error = abs(table["elpd_loo"].iloc[i] - exact)
        assert error < 4 * table["mcse_elpd_loo"].iloc[i] + 0.05, (i, error)
        psis_error = abs(before["elpd_loo"].iloc[i] - exact)
        assert error < psis_error and (i != 0 or psis_error > 10 * error)  # 0: 2.5 vs 0.02
        assert table["pareto_k"].iloc[i] < psis.k_threshold
        assert table["moment_matched"].iloc[i] and table["transformations"].iloc[i]
    rest = np.setdiff1d(np.arange(len(table)), high)
    np.testing.assert_array_equal(table["elpd_loo"].iloc[rest], before["elpd_loo"].iloc[rest])
    assert not table["moment_matched"].iloc[rest].any()
    # the k-hats before matching stay (R loo's pareto_k_influence_values): how influential
    np.testing.assert_array_equal(table["influence_pareto_k"], before["pareto_k"])
    np.testing.assert_allclose(table["p_loo"], table["lppd"] - table["elpd_loo"])
    assert matched.elpd == pytest.approx(sum(model.loo_density(i) for i in range(15)), abs=0.5)


def test_without_the_split_the_adapted_proposal_misses_the_tail(fit):
    # Paananen et al.: the moved draws alone can have a low k-hat yet miss where
    # p(y_i | theta) is large; the split mixture keeps the original draws there.
    model, post = fit
    single = bayesij.loo_moment_match(post, model, split=False).pointwise["elpd_loo"].iloc[0]
    split = bayesij.loo_moment_match(post, model).pointwise["elpd_loo"].iloc[0]
    exact = model.loo_density(0)
    assert abs(split - exact) < abs(single - exact)


def test_moment_match_arguments_are_checked(fit):
    model, post = fit

    class Short(Regression):
        def log_prob(self, upars):
            return super().log_prob(upars)[:-1]

    with pytest.raises(ValueError, match=r"model.log_prob: found shape \(1999,\); expected"):
        bayesij.loo_moment_match(post, Short(model.X, model.y))
    with pytest.raises(ValueError, match=r"loo: found .*; expected a PSIS LooResult of the same"):
        with pytest.warns(UserWarning):
            bayesij.loo_moment_match(post, model, loo=bayesij.loo(post, method="ij"))

    # A PSIS-LOO of another fit with as many observations (other draws): refused, not
    # returned as this fit's.
    other = bayesij.from_arrays(
        post.quantities.values[:, ::-1],
        post.log_lik.values[:, ::-1] - 0.5,
        quantity_names=["alpha", "beta"],
    )
    with pytest.raises(ValueError, match=r"^loo: found a LooResult of another fit"):
        with pytest.warns(UserWarning):
            bayesij.loo_moment_match(post, model, loo=bayesij.loo(other))

    class Other(Regression):  # another observation's log-likelihood
        def log_lik_i(self, upars, i):
            return super().log_lik_i(upars, i + 5)

    with pytest.raises(ValueError, match=r"model.log_lik_i: found values for observation 0"):
        bayesij.loo_moment_match(post, Other(model.X, model.y))
    with pytest.raises(ValueError, match=r"model: found a int without unconstrain, log_prob"):
        bayesij.loo_moment_match(post, 3)
    with pytest.raises(ValueError, match=r"max_iters: found 0; expected an integer >= 1"):
        bayesij.loo_moment_match(post, model, max_iters=0)
