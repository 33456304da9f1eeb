"""A normal linear regression recovered from its draws, and a set's removal worked out in
it, against exact mathematics: the flat-prior posterior of a normal regression with unknown
sd (bayesij.refit.conjugate.FlatPriorRegression) is closed-form after any drop
(tests/helpers/ols_amip.metric), and its draws are exact."""

import numpy as np
import pytest
from ols_amip import kidiq_shaped, linear_effects, mesquite_shaped, metric

from bayesij.array import amip_logistic
from bayesij.array.amip import goal_for
from bayesij.array.amip_logistic import affine_in, model_low, smallest_removal
from bayesij.array.amip_normal import recover_normal
from bayesij.refit.conjugate import FlatPriorRegression


def _draws(X, y, seed=1, n_draws=4000):
    beta, sigma = FlatPriorRegression(X, y).draws(n_draws, np.random.default_rng(seed))
    theta = np.column_stack([beta, sigma])
    resid = y[None, :] - beta @ X.T
    log_lik = (
        -0.5 * np.log(2 * np.pi) - np.log(sigma)[:, None] - 0.5 * (resid / sigma[:, None]) ** 2
    )
    return theta, log_lik


@pytest.fixture(scope="module")
def kidiq():
    X, y = kidiq_shaped()
    theta, log_lik = _draws(X, y)
    scales = np.array([False] * X.shape[1] + [True])
    model = recover_normal(theta, log_lik, scales)
    return X, y, theta, log_lik, model


def _whitened(model, theta):
    phi = model.parameters(theta)
    return np.linalg.lstsq(model.basis, (phi - model.mean).T, rcond=None)[0].T


def test_each_residual_is_recovered_exactly(kidiq):
    X, y, theta, _, model = kidiq
    residual = model.offsets + _whitened(model, theta) @ model.slopes
    exact = y[None, :] - theta[:, :-1] @ X.T
    # r_n is seen only squared: each observation's up to its sign
    signs = np.sign(np.sum(residual * exact, axis=0))
    np.testing.assert_allclose(residual * signs, exact, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("far", [1e3, 1e4, 1e5])
def test_an_outlier_s_residual_is_recovered_exactly(kidiq, far):
    # An observation `far` sds off the fit: its q = r^2 varies by a small share of its
    # size, and the pivot column's c = v'b / 2v'v carries the small quadratic's round-off
    # into c^2 (10^-8 of q's spread left over at 10^5 sds: the whole regression was refused
    # as not normal; 10^-12 at 30 sds under NumPy 2.5's BLAS). Its residual, of one sign at
    # every draw, is fitted again as the root of q, affine in the draws.
    X, y, _, _, _ = kidiq
    y = y.copy()
    y[:3] += far * np.array([1.0, -1.0, 1.0]) * np.std(y)
    theta, log_lik = _draws(X, y)
    scales = np.array([False] * X.shape[1] + [True])
    model = recover_normal(theta, log_lik, scales)
    assert model is not None

    def blocks(rows):  # read as a lazy log-likelihood is: 100 observations at a time
        return (log_lik[rows, s : s + 100] for s in range(0, log_lik.shape[1], 100))

    lazily = recover_normal(theta, blocks, scales)
    assert lazily is not None
    np.testing.assert_allclose(lazily.offsets, model.offsets, rtol=1e-12)
    np.testing.assert_allclose(lazily.slopes, model.slopes, rtol=1e-12, atol=1e-12)
    residual = model.offsets + _whitened(model, theta) @ model.slopes
    exact = y[None, :] - theta[:, :-1] @ X.T
    signs = np.sign(np.sum(residual * exact, axis=0))
    # every residual to the draws' whitening's round-off (at 10^5 sds, with sigma 10^4
    # times the others' spread: 5e-9 of a residual's spread over the draws)
    error = np.abs(residual * signs - exact).max(axis=0)
    assert np.all(error < 1e-7 * exact.std(axis=0))


def test_other_log_likelihoods_are_not_taken_for_a_normal_regression_s(kidiq):
    X, y, theta, log_lik, _ = kidiq
    scales = np.array([False] * X.shape[1] + [True])
    sigma = theta[:, -1:]
    resid = (y[None, :] - theta[:, :-1] @ X.T) / sigma
    student = -np.log(sigma) - 2.5 * np.log1p(resid**2 / 4)  # t(4) up to a constant
    assert recover_normal(theta, student, scales) is None
    # no quantity marked as the scale, or the scale not the likelihood's
    assert recover_normal(theta, log_lik, np.zeros(X.shape[1] + 1, dtype=bool)) is None
    doubled = theta.copy()
    doubled[:, -1] *= 2
    assert recover_normal(doubled, log_lik, scales) is None
    # a quantity marked as the scale that is not positive at every draw is no sd
    negative = theta.copy()
    negative[5, -1] = -negative[5, -1]
    assert recover_normal(negative, log_lik, scales) is None
    # a parameter no observation moves (a hierarchy's scale): its prior is not fixed
    rng = np.random.default_rng(0)
    extra = np.column_stack([theta, rng.gamma(4.0, size=theta.shape[0])])
    assert recover_normal(extra, log_lik, np.append(scales, False)) is None
    assert recover_normal(theta, log_lik, scales) is not None


def test_observations_recovered_a_tile_at_a_time_are_those_recovered_at_once(kidiq, monkeypatch):
    X, y, theta, log_lik, whole = kidiq
    scales = np.array([False] * X.shape[1] + [True])
    monkeypatch.setattr(amip_logistic, "TILE_COLUMNS", 100)  # 434 observations: 5 tiles
    tiled = recover_normal(theta, log_lik, scales)
    for name, value in whole._asdict().items():  # the same to round-off
        if name == "totals":  # sums over the observations: round-off of their size
            for mine, theirs in zip(tiled.totals, value, strict=True):
                np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12 * X.shape[0])
        elif name != "samples":  # the samples drawn since: none yet
            np.testing.assert_allclose(getattr(tiled, name), value, rtol=1e-12, atol=1e-12)
    # an observation of another family in the last tile is seen there
    sigma = theta[:, -1]
    resid = (y[-1] - theta[:, :-1] @ X[-1]) / sigma
    other = log_lik.copy()
    other[:, -1] = -np.log(sigma) - 2.5 * np.log1p(resid**2 / 4)
    assert recover_normal(theta, other, scales) is None


def test_a_set_s_statistics_are_those_of_the_observations_kept(kidiq):
    """Every observation's sufficient statistics less the set's (each unit once, however
    often it is named) are those summed over the observations kept."""
    from bayesij.array.amip_normal import _kept_stats

    model = kidiq[-1]
    for dropped in ([], [3], [5, 400, 5, 17], list(range(0, 434, 3))):
        keep = np.ones(model.offsets.size, dtype=bool)
        keep[dropped] = False
        c, v = model.offsets[keep], model.slopes[:, keep]
        direct = (keep.sum(), np.sum(c * c), (v * c).sum(axis=1), np.einsum("in,jn->ij", v, v))
        found = _kept_stats(model, np.array(dropped, dtype=int))
        for ours, exact in zip(found, direct, strict=True):
            np.testing.assert_allclose(ours, exact, rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("sign", [0, -1, 1])
def test_a_sets_removal_is_the_exact_refits(kidiq, sign):
    # The 30 observations that hold up the high-school coefficient most (its first-order
    # ranking): their removal moves it by over a posterior sd; the model's metric without
    # them, within its band through the prior and its Monte Carlo error, is the exact
    # flat-prior posterior's.
    X, y, theta, _, model = kidiq
    dropped = np.argsort(-linear_effects(X, y, 1, 0, 1.96))[:30]
    _assert_removal_is_the_exact_refits((X, y, theta, model), dropped, 1, sign, moved=1.0)


def _assert_removal_is_the_exact_refits(fit, dropped, k: int, sign: int, moved: float):
    """The removal of ``dropped`` in the recovered model of ``fit`` (design, response,
    draws, model) moves coefficient ``k``'s metric by over ``moved`` posterior sds, and
    within its band through the prior and 2 % of a sd (its value within 5 %) as the exact
    flat-prior refit does; its importance sample's k-hat is below 0.5."""
    X, y, theta, model = fit
    quantity = affine_in(model, theta[:, k], model.parameters(theta))
    start = model.removal(np.zeros(0, dtype=int), quantity, sign, 1.96)
    after = model.removal(dropped, quantity, sign, 1.96)
    keep = np.ones(y.size)
    keep[dropped] = 0
    exact = metric(X, y, keep, k, sign, 1.96) - metric(X, y, np.ones(y.size), k, sign, 1.96)
    low, change, high = after.change_from(start)
    sd = theta[:, k].std()
    assert abs(exact) > moved * sd
    assert low - 0.02 * sd <= exact <= high + 0.02 * sd
    assert abs(change - exact) < 0.05 * sd
    assert model.importance_sample(dropped)[2] < 0.5  # k-hat


@pytest.mark.parametrize("target", ["sign", "significance"])
@pytest.mark.parametrize("k", [1, 2])
def test_the_model_s_first_order_changes_are_the_ols_influences(kidiq, k, target):
    # At the Laplace mode, under a flat prior, the coefficients are OLS's and uncorrelated
    # with log sigma, so the first-order change of a coefficient's mean is (X'X)^-1 x_n e_n
    # and the model ranks the observations as the OLS-AMIP does
    # (tests/helpers/ols_amip.linear_effects), none of it from the draws' covariances.
    # The prior is estimated from the draws (off a flat one by its Monte Carlo error), and
    # the sd is the mode's (sigma^2 = RSS / N, not RSS / (nu - 2)): within 6 % of the
    # largest change for a mean, 12 % for an interval's end; the first 40 units nearly
    # the same.
    X, y, theta, _, model = kidiq
    f = theta[:, k].reshape(4, -1)
    goal = goal_for(f, target, 1.96)
    quantity = affine_in(model, theta[:, k], model.parameters(theta))
    got = model.first_order(quantity, goal)
    want = linear_effects(X, y, k, goal.sign, 1.96)
    tolerance = 0.06 if target == "sign" else 0.12
    assert np.max(np.abs(got - want)) < tolerance * np.max(np.abs(want))
    first = model.ranking(quantity, goal, 40)
    assert len(set(first) & set(np.argsort(-goal.direction * want)[:40])) >= 37


def test_the_smallest_removal_and_its_low_end_hold_the_exact_smallest_prefix(kidiq):
    # The high-school coefficient's sign: along the model's ranking, the smallest prefix
    # whose removal the model says reaches (past the Monte Carlo margin) reaches on the
    # exact refit, and the low end (the optimistic end of the band) is at most the exact
    # smallest prefix of that ranking.
    X, y, theta, _, model = kidiq
    f = theta[:, 1].reshape(4, -1)
    goal = goal_for(f, "sign", 1.96)
    quantity = affine_in(model, theta[:, 1], model.parameters(theta))
    order = model.ranking(quantity, goal, 43)
    found = smallest_removal(model, order, quantity, goal, f)
    assert found is not None
    keep = np.ones(y.size)
    keep[order[: found.size]] = 0
    assert metric(X, y, keep, 1, 0, 1.96) * f.mean() < 0  # the exact refit's sign flipped
    exact = next(
        size
        for size in range(1, order.size + 1)
        if metric(X, y, np.where(np.isin(np.arange(y.size), order[:size]), 0.0, 1.0), 1, 0, 1.96)
        * f.mean()
        < 0
    )
    low = model_low(model, order, quantity, goal, f)
    assert low <= exact <= found.size <= 1.5 * exact  # the prior's band: a margin


@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("target", ["sign", "significance"])
def test_the_low_end_is_the_first_prefix_the_model_says_may_reach(kidiq, k, target):
    # model_low bisects the ranking; a scan of every prefix finds the same first one whose
    # removal's optimistic end, widened by the importance-sampling check's spread, reaches
    # the goal's need (a bisection off by one, or one that skips the spread, is caught).
    X, y, theta, _, model = kidiq
    f = theta[:, k].reshape(4, -1)
    goal = goal_for(f, target, 1.96)
    quantity = affine_in(model, theta[:, k], model.parameters(theta))
    order = model.ranking(quantity, goal, 130)
    start = model.removal(np.zeros(0, dtype=int), quantity, goal.sign, goal.z)

    def optimistic(size: int) -> float:
        after = model.removal(order[:size], quantity, goal.sign, goal.z)
        if after is None:  # no mode without them: cannot be ruled out, as model_low says
            return np.inf
        low, _, high = after.change_from(start)
        return max(goal.direction * low, goal.direction * high)

    ends = np.array([optimistic(size) for size in range(order.size + 1)])
    unwidened = int(np.argmax(ends >= goal.need))
    spread = amip_logistic._check_spread(model, order[:unwidened], quantity, goal, f, start)
    assert 0 < spread < 0.5 * np.std(f)
    scanned = int(np.argmax(ends + spread >= goal.need))
    assert 0 < scanned <= unwidened
    assert model_low(model, order, quantity, goal, f) == scanned


def test_a_small_regression_with_heavy_tails_is_recovered_and_its_removals_hold(kidiq):
    # N = 46, seven coefficients, t(4) noise fitted by a normal model: every observation's
    # residual is still recovered, and the removal of its most influential observation
    # lies within the band of the exact refit's.
    X, y = mesquite_shaped()
    theta, log_lik = _draws(X, y, seed=3)
    model = recover_normal(theta, log_lik, np.array([False] * X.shape[1] + [True]))
    assert model is not None
    quantity = affine_in(model, theta[:, 4], model.parameters(theta))
    unit = int(np.argmax(np.abs(linear_effects(X, y, 4, -1, 1.96))))
    start = model.removal(np.zeros(0, dtype=int), quantity, -1, 1.96)
    low, _, high = model.removal(np.array([unit]), quantity, -1, 1.96).change_from(start)
    keep = np.ones(y.size)
    keep[unit] = 0
    exact = metric(X, y, keep, 4, -1, 1.96) - metric(X, y, np.ones(y.size), 4, -1, 1.96)
    slack = 0.05 * theta[:, 4].std()
    assert low - slack <= exact <= high + slack


def _conjugate_draws(X, y, prior_sd: float, seed=1, n_draws=4000):
    """Exact draws of the posterior under the conjugate prior beta | sigma ~ N(0, sigma^2
    prior_sd^2 I), p(sigma^2) ∝ 1 / sigma^2 (normal-inverse-gamma; BDA3, section 14.8)."""
    rng = np.random.default_rng(seed)
    precision = X.T @ X + np.eye(X.shape[1]) / prior_sd**2
    cov = np.linalg.inv(precision)
    mean = cov @ X.T @ y
    shape, rate = y.size / 2, 0.5 * (y @ y - mean @ precision @ mean)
    sigma = np.sqrt(rate / rng.gamma(shape, size=n_draws))
    beta = (
        mean
        + sigma[:, None] * rng.standard_normal((n_draws, X.shape[1])) @ np.linalg.cholesky(cov).T
    )
    resid = y[None, :] - beta @ X.T
    log_lik = (
        -0.5 * np.log(2 * np.pi) - np.log(sigma)[:, None] - 0.5 * (resid / sigma[:, None]) ** 2
    )
    return np.column_stack([beta, sigma]), log_lik


def test_a_prior_that_scales_the_coefficients_by_the_sd_is_not_taken_for_an_independent_one():
    # The conjugate prior beta | sigma ~ N(0, (0.1 sigma)^2 I) couples the coefficients and
    # the residual sd: Stein's estimate finds the coupling past 5 of its batch errors (the
    # high-school coefficient's), and the model, which takes the prior's sd and
    # coefficients apart, is not recovered. A flat prior's estimate has no coupling beyond
    # its error. (A prior sd of 0.3 sigma couples them by 2 errors only: not seen; the
    # guide says what that costs.)
    X, y = kidiq_shaped()
    scales = np.array([False] * X.shape[1] + [True])
    theta, log_lik = _conjugate_draws(X, y, prior_sd=0.1)
    assert recover_normal(theta, log_lik, scales) is None
    theta, log_lik = _conjugate_draws(X, y, prior_sd=1e4)  # as good as flat
    assert recover_normal(theta, log_lik, scales) is not None


@pytest.mark.parametrize("sign", [0, 1])
def test_a_removal_s_moves_through_the_prior_are_its_derivatives(kidiq, sign):
    # Removal.moves: the metric's derivative as the prior's precision moves toward each
    # batch's estimate, against central differences of the importance-sampling estimate
    # reweighted by the moved prior (the proposal held: the same draws u).
    X, y, theta, _, model = kidiq
    quantity = affine_in(model, theta[:, 1], model.parameters(theta))
    dropped = np.arange(20)
    found = model.removal(dropped, quantity, sign, 1.96)
    u, w, _ = model.importance_sample(dropped)
    f = quantity[0] + u @ quantity[1]

    def metric_at(step, toward):
        moved = w * np.exp(-0.5 * step * np.einsum("mi,ij,mj->m", u, toward, u))
        moved /= moved.sum()
        mean = moved @ f
        return mean + sign * 1.96 * np.sqrt(moved @ (f - mean) ** 2)

    step = 1e-4
    for b in (0, 7, len(model.batches) - 1):
        toward = model.batches[b] - model.precision
        slope = (metric_at(step, toward) - metric_at(-step, toward)) / (2 * step)
        assert found.moves[b] == pytest.approx(slope, rel=1e-5, abs=1e-12)


@pytest.fixture(scope="module")
def grunfeld():
    # Grunfeld's investment regression (N = 220, public domain): firm-years of General
    # Motors and US Steel hold up capital's coefficient.
    from public_data import design

    X, y = design("grunfeld.csv", "invest", ["value", "capital"])
    theta, log_lik = _draws(X, y, seed=2)
    model = recover_normal(theta, log_lik, np.array([False, False, False, True]))
    return X, y, theta, model


@pytest.mark.parametrize("size", [50, 55])
@pytest.mark.parametrize("sign", [0, -1])
def test_a_removal_from_where_the_log_posterior_is_not_concave_is_the_exact_refits(
    grunfeld, size, sign
):
    # The firm-years that hold up capital's significance most, 50 or 55 of them, move its
    # coefficient by several posterior sds, and at the full data's coefficients the log
    # posterior without them is not concave in the coefficients and the log sd: Newton's
    # method from there found no maximum, and the removal was "no mode" (from 44 of them
    # on; from 55, its full steps overshoot and climbing needs them halved). With the
    # Hessian shifted where it is not negative definite and the steps halved until they
    # climb, it finds the mode: the removal is the exact flat-prior refit's.
    from bayesij.array import amip_normal

    X, y, theta, model = grunfeld
    dropped = np.argsort(-linear_effects(X, y, 2, -1, 1.96))[:size]
    stats = amip_normal._kept_stats(model, dropped)
    assert _newton_leaves_concavity(amip_normal, model, stats)
    _assert_removal_is_the_exact_refits(grunfeld, dropped, 2, sign, moved=3.0)


def _newton_leaves_concavity(amip_normal, model, stats) -> bool:
    """Whether Newton's own full steps from the draws' mean reach a point where the log
    posterior is not concave (where the method alone finds no maximum)."""
    u = np.zeros(model.basis.shape[1])
    for _ in range(20):
        gradient, hessian = amip_normal._derivatives(model, stats, u)
        if np.linalg.eigvalsh(hessian)[-1] >= 0:
            return True
        u = u - np.linalg.solve(hessian, gradient)
    return False


def test_the_climb_to_the_mode_goes_up_where_newton_s_step_goes_down(grunfeld):
    # From points where the Hessian is indefinite and Newton's step lowers the log
    # posterior (the gradient against it), the shifted steps reach the mode, from every
    # such start among 60 drawn around the draws' mean.
    from bayesij.array import amip_normal
    from bayesij.array.newton import laplace_mode

    X, y, _, model = grunfeld
    stats = amip_normal._kept_stats(model, np.argsort(-linear_effects(X, y, 2, -1, 1.96))[:50])
    mode, _ = amip_normal._laplace(model, stats)
    tried = 0
    for u in np.random.default_rng(0).normal(size=(60, 4)) * 3:
        gradient, hessian = amip_normal._derivatives(model, stats, u)
        if np.linalg.eigvalsh(hessian)[-1] < 0 or gradient @ np.linalg.solve(hessian, gradient) < 0:
            continue  # concave, or Newton's step climbs: not the case tested
        found = laplace_mode(
            lambda v: amip_normal._log_posterior(model, stats, v[None, :])[0],
            lambda v: amip_normal._derivatives(model, stats, v),
            u,
        )
        np.testing.assert_allclose(found[0], mode, atol=1e-8)
        tried += 1
    assert tried >= 3


def test_the_residual_sd_s_removal_is_the_exact_refits(grunfeld):
    # The model holds the residual sd by its logarithm: the sd is no affine function of
    # its parameters but the exponential of one, and its removals are importance samples,
    # which take it as it is. Dropping the 22 largest residuals moves its posterior mean
    # as the exact flat-prior refit does (sqrt(RSS / 2) Gamma((nu - 1) / 2) / Gamma(nu /
    # 2)); dropping one unit, its first order (at the mode, through the logarithm's
    # tangent) is within 6 % of the exact change for all but the most extreme unit.
    from ols_amip import mean_sd

    X, y, theta, model = grunfeld
    parameters = model.parameters(theta)
    assert affine_in(model, theta[:, 3], parameters, log=False) is None
    quantity = affine_in(model, theta[:, 3], parameters)  # the model takes it by its log
    assert model.log_quantities and quantity.log
    ones = np.ones(y.size)
    largest = np.argsort(-np.abs(y - X @ np.linalg.lstsq(X, y, rcond=None)[0]))[:22]
    start = model.removal(np.zeros(0, dtype=int), quantity, 0, 1.96)
    low, change, high = model.removal(largest, quantity, 0, 1.96).change_from(start)
    keep = ones.copy()
    keep[largest] = 0
    exact = mean_sd(X, y, keep) - mean_sd(X, y, ones)
    sd = theta[:, 3].std()
    assert exact < -9 * sd
    assert low - 0.02 * sd <= exact <= high + 0.02 * sd
    assert abs(change - exact) < 0.05 * sd
    first = model.first_order(quantity, goal_for(theta[:, 3].reshape(4, -1), -40.0, 1.96))
    for unit in np.argsort(-np.abs(first))[1:6]:
        keep = ones.copy()
        keep[unit] = 0
        assert first[unit] == pytest.approx(mean_sd(X, y, keep) - mean_sd(X, y, ones), rel=0.06)


def test_a_feed_offered_the_blocks_fits_as_recover_normal_reads_them():
    # The lazy pass's RegressionFeed: blocks of 3000 and 2000 observations (each cut into
    # pieces of whole tiles) give the offsets and slopes that reading the same blocks gives
    # (as a lazy source was read again for them), to the bit, and reading the matrix
    # whole to round-off (its tiles start elsewhere past the first block: BLAS may round
    # a tile's product in another order); the logistic family fails on the first probe.
    from bayesij.array.amip_logistic import row_pieces
    from bayesij.array.amip_normal import RegressionFeed

    rng = np.random.default_rng(5)
    X = np.column_stack([np.ones(5000), rng.normal(size=(5000, 2))])
    y = X @ np.array([0.3, 0.1, -0.2]) + rng.standard_t(4, 5000)
    theta, log_lik = _draws(X, y)
    scales = np.array([False, False, False, True])
    feed = RegressionFeed(theta, theta, scales)
    for part in (slice(0, 3000), slice(3000, 5000)):
        feed.offer(log_lik[:, part].reshape(4, 1000, -1))
    assert feed.glm() is False

    def blocks(rows):
        for part in (slice(0, 3000), slice(3000, 5000)):
            yield from row_pieces(log_lik[:, part], rows)

    fed, read = (
        recover_normal(theta, None, scales, fitted=feed.normal()),
        recover_normal(theta, blocks, scales),
    )
    np.testing.assert_array_equal(fed.offsets, read.offsets)
    np.testing.assert_array_equal(fed.slopes, read.slopes)
    np.testing.assert_array_equal(fed.precision, read.precision)
    whole = recover_normal(theta, log_lik, scales)
    np.testing.assert_allclose(fed.offsets, whole.offsets, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fed.slopes, whole.slopes, rtol=1e-12, atol=1e-12)
    # an observation that is not a normal one: no model, from the feed as from the matrix
    log_lik[:, 4321] = np.log(np.abs(log_lik[:, 4321]))
    feed = RegressionFeed(theta, theta, scales)
    feed.offer(log_lik.reshape(4, 1000, -1))
    assert recover_normal(theta, None, scales, fitted=feed.normal()) is None
    assert recover_normal(theta, log_lik, scales) is None


def test_the_prior_known_from_the_gradient_does_not_depend_on_the_gradient_s_parameters():
    # The score moves into the model's parameters by the chain rule: given in
    # theta' = 2 theta + 1 (and so half as large), the prior is the same to round-off. A
    # score in parameters not affine in the model's (the sd itself) leaves Stein's
    # estimate; a known prior that couples the sd and the coefficients is not recovered.
    from public_data import design

    from bayesij import refit

    X, y = design("grunfeld.csv", "invest", ["value", "capital"])
    post, score, theta = refit.FlatPriorRegressionBackend(
        X, y, draws=4000, seed=11
    ).fit_with_gradient(np.ones(y.size))
    draws = post.quantities.values.reshape(-1, 4)
    log_lik = post.log_lik.values.reshape(-1, y.size)
    score, theta = (np.reshape(a, (draws.shape[0], -1)) for a in (score, theta))
    scales = np.array([False, False, False, True])
    known = recover_normal(draws, log_lik, scales, score=(score, theta))
    moved = recover_normal(draws, log_lik, scales, score=(score / 2, 2 * theta + 1))
    assert len(known.batches) == len(moved.batches) == 0
    np.testing.assert_allclose(moved.precision, known.precision, atol=1e-8)
    np.testing.assert_allclose(moved.pull, known.pull, atol=1e-8)
    sd = np.exp(theta[:, 3])  # the score in (beta, sigma), its density's Jacobian apart
    in_sd = np.column_stack([score[:, :3], (score[:, 3] - 1) / sd])
    stein = recover_normal(
        draws, log_lik, scales, score=(in_sd, np.column_stack([theta[:, :3], sd]))
    )
    assert len(stein.batches)
    coupled = score.copy()  # the log posterior plus 0.5 beta_2 log sigma
    coupled[:, 1] += 0.5 * theta[:, 3]
    coupled[:, 3] += 0.5 * theta[:, 1]
    assert recover_normal(draws, log_lik, scales, score=(coupled, theta)) is None
