"""The GLMM recovered from its draws (bayesij.array.recovered_glmm): the family, counts,
predictors and loadings against the model that made the log-likelihood; the effects' prior
recognised by Stein's identity on draws whose effects are exact conditional posterior
draws; the integrated terms against SciPy's log-pmf integrated by the array-level
quadrature."""

import numpy as np
import pytest
from scipy.special import log_expit
from scipy.stats import poisson

from bayesij.array.hierarchy import intercept_group_log_lik
from bayesij.array.recovered_glmm import effect_prior, recover_glmm, recovered_group_log_lik
from tests.helpers.glmm_draws import conditional_effects, group_sums, poisson_glmm

N_GROUPS, PER_GROUP, N_DRAWS = 12, 5, 2000


def _design(seed: int = 0):
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(N_GROUPS), PER_GROUP)
    return rng, codes, rng.normal(size=codes.size)


def _globals(rng):
    """Draws of (b0, b1, sd_u): any distribution; the effects are drawn given them."""
    b0 = rng.normal(0.4, 0.1, N_DRAWS)
    b1 = rng.normal(0.3, 0.05, N_DRAWS)
    sd_u = np.exp(rng.normal(np.log(0.7), 0.1, N_DRAWS))
    return np.column_stack([b0, b1, sd_u])


@pytest.fixture(scope="module")
def poisson_fit():
    return poisson_glmm()


def test_a_poisson_glmm_is_recovered_with_its_counts_predictors_and_scale(poisson_fit):
    codes, x, y, theta, z, log_lik = poisson_fit
    model = recover_glmm(log_lik, codes, theta, z)
    assert model.family == "poisson" and model.multiplied_by == 2  # sd_u * z
    np.testing.assert_array_equal(model.counts, y)
    eta = theta[:, [0]] + theta[:, [1]] * x + theta[:, [2]] * z[:, codes]
    np.testing.assert_allclose(model.eta(slice(None)), eta, atol=1e-7)
    np.testing.assert_allclose(model.loading, 1.0, atol=1e-7)


def test_the_prior_of_a_non_centred_effect_is_recognised_and_a_wrong_one_refused(poisson_fit):
    codes, _, _, theta, z, log_lik = poisson_fit
    model = recover_glmm(log_lik, codes, theta, z)
    mean, sd, columns = effect_prior(model, theta)
    assert columns == (None, None)
    np.testing.assert_array_equal(mean, 0.0)
    np.testing.assert_array_equal(sd, 1.0)
    # the same model's effects drawn under z ~ N(0, 2^2): N(0, 1) is not their prior
    codes, _, _, theta, z, log_lik = poisson_glmm(prior_sd_z=2.0)
    assert effect_prior(recover_glmm(log_lik, codes, theta, z), theta) is None


def test_the_integrated_terms_are_scipy_s_poisson_integrated_by_quadrature(poisson_fit):
    codes, x, y, theta, z, log_lik = poisson_fit
    model = recover_glmm(log_lik, codes, theta, z)
    mean, sd, _ = effect_prior(model, theta)
    terms = recovered_group_log_lik(model, mean, sd)
    fixed = (theta[:, [0]] + theta[:, [1]] * x)[None]

    def log_lik_at(a):  # the intercept a = sd_u z ~ N(0, sd_u^2)
        return poisson.logpmf(y, np.exp(fixed + a))

    expected = intercept_group_log_lik(log_lik_at, codes, theta[None, :, 2])[0]
    np.testing.assert_allclose(terms, expected, rtol=1e-9, atol=1e-9)


def test_a_centred_logistic_glmm_with_a_random_slope_s_loading_and_prior():
    # eta = b1 x + u_g x (a random slope, loading x), u ~ N(b0, sd_u^2): the loading is the
    # covariate, the prior's mean and sd are the fit's columns b0 and sd_u.
    rng, codes, x = _design(3)
    theta = _globals(rng)
    y = rng.uniform(size=codes.size) < 0.5
    sign = np.where(y, 1.0, -1.0)

    def log_lik_of(u):
        return group_sums(log_expit(sign * (theta[:, [1]] * x + u[:, codes] * x)), codes, N_GROUPS)

    u = conditional_effects(rng, log_lik_of, theta[:, 0], theta[:, 2], N_GROUPS)
    log_lik = log_expit(sign * (theta[:, [1]] * x + u[:, codes] * x))
    model = recover_glmm(log_lik, codes, theta, u)
    assert model.family == "bernoulli" and model.multiplied_by is None
    np.testing.assert_allclose(np.abs(model.loading), np.abs(x), atol=1e-7)
    mean, sd, columns = effect_prior(model, theta)
    assert columns == (0, 2)
    # the slope u ~ N(b0, sd_u^2) integrated out: SciPy's log-expit, the generic quadrature
    fixed = (theta[:, [1]] * x)[None]

    def log_lik_at(a):  # a: each observation's group slope less its mean b0
        return log_expit(sign * (fixed + (theta[None, :, [0]] + a) * x))

    expected = intercept_group_log_lik(log_lik_at, codes, theta[None, :, 2])[0]
    np.testing.assert_allclose(recovered_group_log_lik(model, mean, sd), expected, rtol=1e-8)


def test_what_is_not_such_a_glmm_is_not_recovered(poisson_fit):
    codes, x, y, theta, z, log_lik = poisson_fit
    rng = np.random.default_rng(5)
    heavy = -2.0 * np.log1p((y - (theta[:, [0]] + theta[:, [2]] * z[:, codes])) ** 2 / 3.0)
    assert recover_glmm(heavy, codes, theta, z) is None  # a Student-t likelihood
    residual = y - (theta[:, [0]] + theta[:, [2]] * z[:, codes])
    tilted = -0.5 * residual**2 + 0.1 * theta[:, [0]]  # a normal's, tilted along b0
    assert recover_glmm(tilted, codes, theta, z) is None
    noisy = log_lik + 1e-3 * rng.normal(size=log_lik.shape)
    assert recover_glmm(noisy, codes, theta, z) is None  # not a Poisson's at any predictor
    fixed = poisson.logpmf(y, np.exp(theta[:, [0]] + theta[:, [1]] * x))
    assert recover_glmm(fixed, codes, theta, z) is None  # the effects move no observation


def test_a_normal_hierarchy_is_recovered_and_integrates_to_its_closed_form():
    # y ~ N(b0 + b1 x + sd_u z_g, sigma^2), z ~ N(0, 1): the residual sd is found among the
    # positive columns, the residuals' signs do not matter, and the integrated terms are
    # log N(r_g | 0, sigma^2 I + sd_u^2 11^T) (closed form, normal_group_log_lik).
    from bayesij.array.hierarchy import normal_group_log_lik
    from tests.helpers.glmm_draws import normal_hierarchy

    codes, x, y, theta, z, log_lik = normal_hierarchy()
    model = recover_glmm(log_lik, codes, theta, z)
    assert (model.family, model.multiplied_by, model.sd_column) == ("normal", 2, 3)
    np.testing.assert_allclose(np.abs(model.loading), 1.0, atol=1e-7)
    mean, sd, columns = effect_prior(model, theta)
    assert columns == (None, None)
    residuals = (y - theta[:, [0]] - theta[:, [1]] * x)[None]
    expected = normal_group_log_lik(residuals, codes, theta[None, :, 2], theta[None, :, 3])[0]
    np.testing.assert_allclose(recovered_group_log_lik(model, mean, sd), expected, rtol=1e-9)


def test_stein_s_z_score_is_the_mean_over_its_standard_error():
    # iid draws: the batch-means standard error is sd / sqrt(S), so a mean of 0.05 over
    # 4000 draws of sd 1 is about 3.2 standard errors from 0 (and 0 for a mean of 0).
    from bayesij.array.recovered_glmm import _z_score

    rng = np.random.default_rng(2)
    shifted = [_z_score(rng.normal(0.05, 1.0, 4000)) for _ in range(20)]
    assert 2.0 < np.median(shifted) < 4.5
    centred = [_z_score(rng.normal(0.0, 1.0, 4000)) for _ in range(200)]
    assert 0.7 < np.std(centred) < 1.4  # about standard normal


def test_a_prior_two_candidates_satisfy_is_not_chosen(poisson_fit):
    # The effects read as a centred u = sd_u z, u ~ N(0, sd_u^2): with 12 groups Stein's
    # identity cannot tell sd_u's draws (0.7 +- 0.07) from b0's (0.4 +- 0.1) as the prior's
    # sd, so the prior is not guessed between them; without b0 among the candidates it is
    # sd_u.
    codes, _, _, theta, z, log_lik = poisson_fit
    scaled = z * theta[:, [2]]
    model = recover_glmm(log_lik, codes, theta, scaled)
    assert model.multiplied_by is None
    assert effect_prior(model, theta) is None
    assert effect_prior(model, theta[:, 1:])[2] == (None, 1)


def test_a_likelihood_the_central_draws_fit_but_others_do_not_is_refused(poisson_fit):
    # The predictors are fitted on the draws nearest the centre; a log-likelihood that
    # leaves them only at the draws farthest out is caught by the check at every draw.
    codes, _, _, theta, z, log_lik = poisson_fit
    far = np.argsort(-np.abs(theta[:, 0] - theta[:, 0].mean()))[:5]
    changed = log_lik.copy()
    changed[far] -= 0.01
    assert recover_glmm(log_lik, codes, theta, z) is not None
    assert recover_glmm(changed, codes, theta, z) is None


def test_a_normal_hierarchy_far_from_zero_integrates_without_cancellation():
    # b0's draws moved by 1e5: the recovered residuals are 1e5 less 1e5. The closed form
    # summed over each group's observations (Sherman-Morrison on the model's own
    # residuals) is matched to round-off; from the groups' Gram matrices about 0 instead
    # of about each group's mean row, the squares would lose about 1e-6 of it.
    from tests.helpers.glmm_draws import normal_hierarchy

    codes, _, _, theta, z, log_lik = normal_hierarchy()
    far = theta.copy()
    far[:, 0] += 1e5
    model = recover_glmm(log_lik, codes, far, z)
    mean, sd, _ = effect_prior(model, far)
    m = model.multiplier[:, None]
    r = model.fixed(slice(None)) + model.loading * m * mean[:, None]  # (S, N)
    c = model.loading * m
    cc, cr, rr = (group_sums(v, codes, codes.max() + 1) for v in (c**2, c * r, r**2))
    var, v = far[:, [3]] ** 2, sd[:, None] ** 2
    joint = var + v * cc
    count = np.bincount(codes)
    expected = -0.5 * (count * np.log(2 * np.pi * var) + np.log(joint / var))
    expected -= 0.5 * (rr - v * cr**2 / joint) / var
    np.testing.assert_allclose(recovered_group_log_lik(model, mean, sd), expected, rtol=1e-10)


def test_a_level_without_observations_has_no_score_and_leaves_the_others_alone():
    # An effect column for a group no observation belongs to (the last): its likelihood
    # score is 0 at every draw, and the other groups' terms are those without it.
    from tests.helpers.glmm_draws import normal_hierarchy

    codes, _, _, theta, z, log_lik = normal_hierarchy()
    rng = np.random.default_rng(8)
    wider = np.column_stack([z, rng.normal(size=z.shape[0])])
    model, alone = (
        recover_glmm(log_lik, codes, theta, wider),
        recover_glmm(log_lik, codes, theta, z),
    )
    assert np.all(model.effect_score()[:, -1] == 0.0)
    np.testing.assert_allclose(model.effect_score()[:, :-1], alone.effect_score(), rtol=1e-12)
    ones, zeros = np.ones(z.shape[0]), np.zeros(z.shape[0])
    np.testing.assert_allclose(
        recovered_group_log_lik(model, zeros, ones)[:, :-1],
        recovered_group_log_lik(alone, zeros, ones),
        rtol=1e-12,
    )


@pytest.mark.parametrize("fixed_sd", [False, True])
def test_observations_in_any_order_are_recovered_alike(fixed_sd):
    # The model sorts the observations by group for its sums and compares them with the
    # draws' where they lie: shuffled observations give the same model, score and terms.
    from tests.helpers.glmm_draws import fixed_sd_hierarchy, normal_hierarchy

    if fixed_sd:
        codes, _, _, _, theta, z, log_lik = fixed_sd_hierarchy()
    else:
        codes, _, _, theta, z, log_lik = normal_hierarchy()
    shuffle = np.random.default_rng(9).permutation(codes.size)
    model = recover_glmm(log_lik, codes, theta, z)
    shuffled = recover_glmm(log_lik[:, shuffle], codes[shuffle], theta, z)
    np.testing.assert_allclose(shuffled.offsets, model.offsets[shuffle], atol=1e-9)
    np.testing.assert_allclose(shuffled.effect_score(), model.effect_score(), rtol=1e-10)
    mean, sd, _ = effect_prior(model, theta)
    np.testing.assert_allclose(
        recovered_group_log_lik(shuffled, mean, sd),
        recovered_group_log_lik(model, mean, sd),
        rtol=1e-12,
    )


def test_a_normal_hierarchy_with_sds_fixed_in_the_model_integrates_to_its_closed_form():
    # y_n ~ N(b0 + b1 x_n + sd_u z_g, s_n^2) with each s_n a constant of the model (no
    # column of the draws): the residual over s_n and log s_n are recovered from the
    # log-likelihood's quadratic, and each group's term is log N(r_g | 0, diag(s_g^2) +
    # sd_u^2 11^T), computed here by a dense solve and log-determinant at every draw.
    from tests.helpers.glmm_draws import dense_normal_terms, fixed_sd_hierarchy

    codes, x, y, s, theta, z, log_lik = fixed_sd_hierarchy()
    model = recover_glmm(log_lik, codes, theta, z)
    assert (model.family, model.multiplied_by, model.sd_column) == ("normal", 2, None)
    np.testing.assert_allclose(model.log_sd, np.log(s), atol=1e-8)
    mean, sd, columns = effect_prior(model, theta)
    assert columns == (None, None)
    residuals = y - theta[:, [0]] - theta[:, [1]] * x  # (S, N)
    expected = dense_normal_terms(residuals, codes, s, theta[:, 2])
    np.testing.assert_allclose(recovered_group_log_lik(model, mean, sd), expected, rtol=1e-9)
