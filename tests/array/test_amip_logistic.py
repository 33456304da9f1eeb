"""A logistic regression recovered from its draws, and a set's removal worked out in it,
against exact refits: the flat-prior posterior of a wells-like logistic regression drawn
exactly in distribution (independence Metropolis-Hastings, tests/helpers/logistic_amip.py)
with and without the set."""

import arviz as az
import numpy as np
import pytest
from logistic_amip import (
    assert_prior_known_from_the_gradient,
    linear_effects,
    log_lik,
    sample,
    wells_like,
)

from bayesij.array import amip_logistic, numeric
from bayesij.array.amip import MC_MARGIN, far_short, goal_for, metric_mcse
from bayesij.array.amip_logistic import (
    Affine,
    Removal,
    _ratios_khat,
    affine_in,
    importance_sample,
    model_ranking,
    predictors_affine,
    recover_glm,
    removal,
    sampled_moments,
    smallest_removal,
)
from peers import quiet


@pytest.fixture(scope="module")
def wells():
    X, y = wells_like(400, 3)
    beta, gradient = sample(X, y, seed=1)
    theta = beta.reshape(-1, 4)
    return X, y, theta, log_lik(X, y, theta), gradient.reshape(-1, 4)


@pytest.fixture(scope="module")
def dropped(wells):
    """The 40 observations that hold up the distance coefficient most: each one's
    switching outcome times its distance (10 % of the data; the exact coefficient moves by
    about two posterior sds without them)."""
    X, y = wells[:2]
    return np.argsort((2 * y - 1) * X[:, 1])[:40]


@pytest.fixture(scope="module")
def exact(wells, dropped):
    """Draws (20000,) of the distance coefficient's flat-prior posterior without the set."""
    X, y = wells[:2]
    weights = np.ones(y.size)
    weights[dropped] = 0
    beta, _ = sample(X, y, weights, draws=5000, seed=7)
    return beta.reshape(-1, 4)[:, 1]


def _whitened(model, theta):
    return np.linalg.lstsq(model.basis, (theta - model.mean).T, rcond=None)[0].T


def test_each_observation_is_recovered_exactly(wells):
    X, y, theta, values, _ = wells
    model = recover_glm(theta, values)
    eta = model.offsets + _whitened(model, theta) @ model.slopes
    np.testing.assert_allclose(eta, (2 * y - 1) * (theta @ X.T), rtol=1e-9, atol=1e-9)


def test_other_log_likelihoods_are_not_taken_for_a_logistic_ones(wells):
    theta = wells[2]
    rng = np.random.default_rng(0)
    y = rng.normal(size=50)
    # normal observations of sd 3: every log density below 0, but not a logit's
    normal = -0.5 * ((y - theta[:, :1]) / 3) ** 2 - np.log(3 * np.sqrt(2 * np.pi))
    assert recover_glm(theta, normal) is None
    poisson = 2 * theta[:, :1] - np.exp(theta[:, :1]) - np.log(2.0) + 0 * y
    assert recover_glm(theta, np.minimum(poisson, -1e-3)) is None
    # draws that do not vary: no direction to recover the logits in
    constant = np.ones_like(theta)
    assert recover_glm(constant, wells[3]) is None
    assert not predictors_affine(constant, wells[3])
    # a parameter no observation's logit moves (a hierarchy's scale, whose prior on the
    # others is not a fixed normal one), or a nonlinear function of the coefficients
    scale = np.column_stack([theta, rng.gamma(4.0, size=theta.shape[0])])
    assert recover_glm(scale, wells[3]) is None
    # ... though its logits are affine in them (what a lazy pass's few kept columns are
    # asked before the log-likelihood is read again), the normal ones' are not
    assert predictors_affine(scale, wells[3]) and predictors_affine(theta, wells[3][:, :30])
    assert not predictors_affine(theta, normal)
    odds = np.column_stack([theta, np.exp(theta[:, 1])])
    assert recover_glm(odds, wells[3]) is None
    assert recover_glm(theta, wells[3]) is not None
    positive = wells[3].copy()
    positive[0, 0] = 0.0  # a probability of 1 has no logit
    assert recover_glm(theta, positive) is None


def test_logits_recovered_a_tile_at_a_time_are_those_recovered_at_once(wells, monkeypatch):
    theta, values = wells[2], wells[3]
    whole = recover_glm(theta, values)
    monkeypatch.setattr(amip_logistic, "TILE_COLUMNS", 64)  # 400 observations: 7 tiles
    tiled = recover_glm(theta, values)
    assert whole.counts is None and tiled.counts is None  # a logistic regression
    for name, value in whole._asdict().items():  # the same to round-off
        if name not in (*amip_logistic.MEMORY, "counts"):  # what was worked out since: nothing
            np.testing.assert_allclose(getattr(tiled, name), value, rtol=1e-12, atol=1e-12)
    other = values.copy()  # the last observation's log-likelihood a normal one's
    other[:, -1] = -0.5 * ((1.0 - theta[:, 0]) / 3) ** 2 - np.log(3 * np.sqrt(2 * np.pi))
    assert recover_glm(theta, other) is None


def test_a_removal_s_importance_sampling_is_the_same_on_any_number_of_threads(
    wells, dropped, monkeypatch
):
    theta, values = wells[2], wells[3]
    model = recover_glm(theta, values)
    monkeypatch.setattr(numeric, "CACHE_BYTES", 2**20)  # 400 observations: 7 chunks
    monkeypatch.setattr(numeric, "THREADS", 1)
    alone = importance_sample(model, dropped)
    monkeypatch.setattr(numeric, "THREADS", 2)
    shared = importance_sample(model, dropped)
    for one, two in zip(alone, shared, strict=True):  # the chunks' sums added in order
        np.testing.assert_array_equal(one, two)


def test_with_the_gradient_the_prior_is_known(wells):
    X, y, theta, values, gradient = wells
    assert_prior_known_from_the_gradient(theta, values, gradient)
    # a prior that is not normal (Cauchy scores) is not taken as known
    cauchy = gradient - 2 * theta / (1 + theta**2)
    assert recover_glm(theta, values, cauchy).batches.size > 0


def test_a_sets_removal_is_the_exact_refits(wells, dropped, exact):
    theta, values, gradient = wells[2], wells[3], wells[4]
    model = recover_glm(theta, values, gradient)
    quantity = affine_in(model, theta[:, 1], theta)
    error = exact.std() / np.sqrt(exact.size / 2)  # repeated draws: about half independent
    for sign in (0, -1, 1):
        want = exact.mean() + sign * 1.96 * exact.std()
        got = removal(model, dropped, quantity, sign, 1.96)
        assert got.band == (got.mid, got.mid)  # the prior known: no band
        assert got.mid == pytest.approx(want, abs=0.03 * exact.std() + 4 * error)
    sample = importance_sample(model, dropped)
    mean, sd, mcse = sampled_moments(sample, quantity)
    assert sample[2] < 0.5  # k-hat
    assert mean == pytest.approx(exact.mean(), abs=4 * np.hypot(mcse, error))

    assert sd == pytest.approx(exact.std(), rel=0.03)
    # The move is real: about two posterior sds, which the full data's draws do not reach.
    assert abs(exact.mean() - theta[:, 1].mean()) > 1.5 * theta[:, 1].std()


def test_from_the_draws_alone_the_priors_band_holds_the_exact_refit(wells, dropped):
    X, y, theta, values, _ = wells
    model = recover_glm(theta, values)
    # Stein's estimate of the flat prior's precision: 0 within 3.5 of its batch-means
    # standard errors (each element)
    error = model.batches.std(axis=0, ddof=1) / np.sqrt(len(model.batches))
    assert np.all(np.abs(model.precision) <= 3.5 * error)
    quantity = affine_in(model, theta[:, 1], theta)
    weights = np.ones(y.size)
    weights[dropped[:20]] = 0  # half the set: the band keeps a mode at both ends
    beta, _ = sample(X, y, weights, draws=5000, seed=8)
    exact = beta.reshape(-1, 4)[:, 1]
    full = theta[:, 1]
    for sign in (0, -1, 1):
        after = removal(model, dropped[:20], quantity, sign, 1.96)
        low, high = after.band
        want = exact.mean() + sign * 1.96 * exact.std()
        assert low < want < high
        assert high - low > 0.01 * exact.std()
        # the change from the full data's (both through the same estimate of the prior)
        # holds the exact change, give or take the full data's Monte Carlo error
        before = removal(model, np.zeros(0, dtype=int), quantity, sign, 1.96)
        low, _, high = after.change_from(before)
        error = 3 * full.std() / np.sqrt(full.size / 2)
        change = want - (full.mean() + sign * 1.96 * full.std())
        assert low - error < change < high + error


def test_under_a_normal_prior_the_laplace_step_agrees_with_importance_sampling(wells, dropped):
    # A prior N(0, 0.5^2 I) on the coefficients, read from the score: strong enough to move
    # the mean and narrow the sd, so that a wrong sign of its precision or of its pull in
    # the Newton step shows.
    theta, values, gradient = wells[2], wells[3], wells[4]
    model = recover_glm(theta, values, gradient - theta / 0.25)
    quantity = affine_in(model, theta[:, 1], theta)
    sample = importance_sample(model, dropped)
    mean, sd, mcse = sampled_moments(sample, quantity)
    assert sample[2] < 0.5  # k-hat
    for sign in (0, -1, 1):
        got = removal(model, dropped, quantity, sign, 1.96).mid
        assert got == pytest.approx(mean + sign * 1.96 * sd, abs=0.05 * sd + 4 * mcse)
    flat = recover_glm(theta, values, gradient)
    moved = removal(flat, dropped, affine_in(flat, theta[:, 1], theta), 0, 1.96).mid
    assert abs(moved - mean) > 0.5 * sd  # the prior matters here


def test_a_quantity_is_read_as_an_affine_function_of_the_parameters(wells):
    theta, values = wells[2], wells[3]
    model = recover_glm(theta, values)
    quantity = affine_in(model, 2 * theta[:, 2] - theta[:, 3] + 1, theta)
    u = _whitened(model, theta)
    np.testing.assert_allclose(
        quantity.a + u @ quantity.c, 2 * theta[:, 2] - theta[:, 3] + 1, atol=1e-9
    )
    np.testing.assert_allclose(quantity.at(u), 2 * theta[:, 2] - theta[:, 3] + 1, atol=1e-9)
    assert not quantity.log and quantity.tangent(u[0]) is quantity
    assert affine_in(model, np.exp(theta[:, 1]), theta) is None
    assert affine_in(model, np.ones(theta.shape[0]), theta) is None
    # A positive quantity whose logarithm is affine, where the model's removals take it so
    odds = affine_in(model, np.exp(theta[:, 1]), theta, log=True)
    assert odds.log
    np.testing.assert_allclose(odds.at(u), np.exp(theta[:, 1]), rtol=1e-9)
    tangent = odds.tangent(u[0])  # the first order at a point: value and slope there
    assert tangent.a + u[0] @ tangent.c == pytest.approx(np.exp(theta[0, 1]), rel=1e-9)
    step = 1e-6 * odds.c / np.linalg.norm(odds.c)
    moved = odds.at((u[0] + step)[None, :])[0] - odds.at(u[0][None, :])[0]
    assert tangent.c @ step == pytest.approx(moved, rel=1e-5)
    assert affine_in(model, -np.exp(theta[:, 1]), theta, log=True) is None  # not positive


@pytest.mark.parametrize("k", [0.3, 0.7, 1.0])
def test_the_check_s_k_hat_is_the_importance_ratios(k):
    # Ratios with a Pareto tail of shape k: the check's k-hat is theirs (as ArviZ's PSIS
    # finds on the same ratios), not their logs' (an exponential tail, k-hat near 0).
    rng = np.random.default_rng(5)
    ratios = (rng.pareto(1 / k, size=2000) + 1) * 3.0
    got = _ratios_khat(ratios)
    assert got == pytest.approx(k, abs=0.2)
    arviz = pytest.importorskip("arviz")
    if hasattr(arviz, "psislw"):  # ArviZ 0.23
        want = float(arviz.psislw(np.log(ratios))[1])
    else:  # ArviZ 1.x: arviz-stats, whose psislw takes the log-likelihood (minus the log ratios)
        from arviz_stats.base import array_stats

        want = float(array_stats.psislw(-np.log(ratios), r_eff=1.0)[1])
    assert got == pytest.approx(want, abs=0.02)


def test_the_prior_s_error_common_to_both_metrics_leaves_the_change():
    # A change between two metrics that the prior's estimate moves alike is free of it;
    # moved oppositely, its error is the difference's: the batch-means error of the
    # differenced moves (its upper 95 % bound: 19 degrees of freedom, x 1.37).
    moves = np.random.default_rng(3).normal(size=20)
    before, after = Removal(0.5, moves), Removal(2.0, moves.copy())
    assert after.change_from(before) == (1.5, 1.5, 1.5)
    low, mid, high = Removal(2.0, -moves).change_from(before)
    from scipy.stats import chi2

    bound = np.sqrt(19 / chi2.ppf(0.05, 19))  # 1.37
    half = MC_MARGIN * bound * np.std(2 * moves, ddof=1) / np.sqrt(20)
    assert mid == 1.5 and high - mid == pytest.approx(half, rel=1e-12)
    assert after.band == pytest.approx((2.0 - half / 2, 2.0 + half / 2), rel=1e-12)
    assert Removal(1.0, np.zeros(0)).band == (1.0, 1.0)  # the prior known


def test_a_set_s_importance_weights_are_those_of_the_logistic_posterior(wells, dropped):
    """The importance sample of a set's removal weighted by the posterior without the set
    over the t proposal, ``exp(sum log expit(eta_n) - u'Pu/2 + pull'u - log q(u))``
    (written out here in double precision; the check sums the log-likelihood in single)."""
    from scipy.special import log_expit

    theta, values, gradient = wells[2], wells[3], wells[4]
    model = recover_glm(theta, values, gradient - theta / 4)
    u, w, _ = importance_sample(model, dropped[:20])
    keep = np.ones(model.offsets.size, dtype=bool)
    keep[dropped[:20]] = False
    mode, cov = amip_logistic._laplace(model, *amip_logistic._kept(model, dropped[:20]))
    drawn, proposal = amip_logistic.t_proposal(mode, cov, amip_logistic.CHECK_DRAWS, 0)
    np.testing.assert_array_equal(u, drawn)
    eta = model.offsets[keep] + u @ model.slopes[:, keep]
    prior = u @ model.pull - 0.5 * np.einsum("si,ij,sj->s", u, model.precision, u)
    log_w = log_expit(eta).sum(axis=1) + prior - proposal
    want = np.exp(log_w - log_w.max())
    np.testing.assert_allclose(w, want / want.sum(), rtol=1e-4, atol=1e-12)


def test_the_removal_s_moves_are_its_derivatives_in_the_prior_s_precision(wells, dropped):
    # The sensitivity toward each batch's estimate of the prior (the implicit function
    # theorem at the mode, the likelihood's third derivative included) against finite
    # differences of the removal worked out anew at the moved precision.
    theta, values = wells[2], wells[3]
    model = recover_glm(theta, values)
    quantity = affine_in(model, theta[:, 1], theta)
    step = 1e-5
    for sign in (0, 1):
        got = removal(model, dropped[:20], quantity, sign, 1.96)
        for b in (0, 7, 19):
            toward = model.batches[b] - model.precision
            moved = model._replace(
                precision=model.precision + step * toward, batches=np.zeros((0, 4, 4))
            )
            again = removal(moved, dropped[:20], quantity, sign, 1.96)
            assert again.moves.size == 0
            want = (again.mid - got.mid) / step
            assert got.moves[b] == pytest.approx(want, rel=1e-3, abs=1e-6)


@pytest.fixture(scope="module")
def distance_removal(wells, dropped):
    """The recovered model (prior from the score), the distance coefficient's draws
    (4, S / 4) and its affine form, and the Laplace change of removing the whole set."""
    theta, values, gradient = wells[2], wells[3], wells[4]
    model = recover_glm(theta, values, gradient)
    quantity = affine_in(model, theta[:, 1], theta)
    start = removal(model, np.zeros(0, dtype=int), quantity, 0, 1.96)
    whole = removal(model, dropped, quantity, 0, 1.96).change_from(start)[1]
    return model, theta[:, 1].reshape(4, -1), quantity, whole


def test_the_smallest_removal_reaching_a_change_is_confirmed_by_the_exact_refit(
    wells, dropped, distance_removal
):
    # A move of one posterior sd of the distance coefficient, in the direction the whole
    # set moves it: the smallest prefix the recovered model says reaches it (past the
    # Monte Carlo margin, checked by importance sampling) reaches it on the exact refit,
    # whose change lies in the band claimed.
    X, y = wells[:2]
    model, f, quantity, whole = distance_removal
    goal = goal_for(f, np.sign(whole) * f.std(), 1.96)
    found = smallest_removal(model, dropped, quantity, goal, f)
    assert found is not None and 1 < found.size < dropped.size
    low, high = found.band
    assert goal.direction * min(low, high) >= goal.need  # its pessimistic end reaches
    weights = np.ones(y.size)
    weights[dropped[: found.size]] = 0
    beta, _ = sample(X, y, weights, draws=5000, seed=9)
    after = beta.reshape(-1, 4)[:, 1]
    exact = after.mean() - f.mean()
    # repeated draws of the independence sampler: about half independent
    error = 3 * np.hypot(f.std() / np.sqrt(f.size / 2), after.std() / np.sqrt(after.size / 2))
    assert goal.direction * exact > goal.need - error
    assert low - error < exact < high + error  # the band holds the exact change
    # another order's smaller set: no search; a larger one: the same answer
    assert smallest_removal(model, dropped, quantity, goal, f, below=found.size) is None
    again = smallest_removal(model, dropped, quantity, goal, f, below=found.size + 1)
    assert again == found


def test_no_removal_is_claimed_where_the_whole_set_falls_short(dropped, distance_removal):
    model, f, quantity, whole = distance_removal
    goal = goal_for(f, 1.5 * whole, 1.96)  # half again beyond the whole set's change
    assert smallest_removal(model, dropped, quantity, goal, f) is None


def test_no_removal_is_claimed_where_the_check_s_k_hat_passes_its_threshold(
    dropped, distance_removal, monkeypatch
):
    # The importance-sampling check of the prefix's removal is what the band rests on:
    # where its k-hat passes PSIS's threshold for CHECK_DRAWS draws the check cannot
    # evaluate the removal, and no prefix is claimed (the same sample at k-hat 0.3 is).
    import bayesij.array.amip_logistic as logistic

    model, f, quantity, whole = distance_removal
    goal = goal_for(f, np.sign(whole) * f.std(), 1.96)
    sample = logistic.importance_sample

    def with_k_hat(k):
        monkeypatch.setattr(logistic, "importance_sample", lambda *a: (*sample(*a)[:2], k))
        model.samples.clear()  # drawn again, with this k-hat (and forgotten after)
        try:
            return smallest_removal(model, dropped, quantity, goal, f)
        finally:
            model.samples.clear()

    assert with_k_hat(0.3) is not None
    assert with_k_hat(0.9) is None


@pytest.mark.parametrize("target", ["sign", "significance", "sign_and_significance"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_model_s_ranking_is_the_estimating_equation_s_at_the_mle(wells, target, k):
    # With the flat prior known (the gradient), the Laplace mode is the MLE and its
    # inverse Hessian the inverse information: the recovered model ranks the observations
    # by the first-order change of beta_k + sign z se_k that the estimating equation gives
    # from X and y (tests/helpers/logistic_amip.linear_effects), none of it from the draws.
    X, y, theta, values, gradient = wells
    model = recover_glm(theta, values, gradient)
    f = theta[:, k].reshape(4, -1)
    goal = goal_for(f, target, 1.96)
    order = model_ranking(model, affine_in(model, theta[:, k], theta), goal, 40)
    gain = goal.direction * linear_effects(X, y, None, k, goal.sign, 1.96)
    want = np.argsort(-gain, kind="stable")[: min(40, int(np.sum(gain > 0)))]
    assert order.size == want.size > 0
    np.testing.assert_array_equal(order, want)


def _counted(monkeypatch, name: str):
    """The calls of ``amip_logistic``'s function ``name`` from now on (a list of their
    arguments, filled as they come), and the function itself."""
    calls, function = [], getattr(amip_logistic, name)
    monkeypatch.setattr(amip_logistic, name, lambda *a: calls.append(a) or function(*a))
    return calls, function


def test_a_set_s_importance_sample_is_drawn_once_and_the_oldest_forgotten(
    wells, dropped, monkeypatch
):
    # The model remembers its latest samples by set (in its order) and seed: the same set
    # again is the same sample, another seed or another order is drawn, and past
    # REMEMBERED the oldest is drawn again; a model without its memory draws every time.
    import bayesij.array.amip_logistic as logistic

    model = recover_glm(wells[2], wells[3], wells[4])
    drawn, sample = _counted(monkeypatch, "importance_sample")
    first = model.importance_sample(dropped)
    assert model.importance_sample(dropped.copy()) is first and len(drawn) == 1
    model.importance_sample(dropped, seed=1)
    model.importance_sample(dropped[::-1])
    assert len(drawn) == 3
    np.testing.assert_allclose(first[1], sample(model, dropped)[1], rtol=0, atol=0)
    monkeypatch.setattr(logistic, "REMEMBERED", 3)
    model.importance_sample(dropped[:5])  # the fourth: the first is forgotten
    assert model.importance_sample(dropped) is not first and len(drawn) == 5
    forgetful = model._replace(samples=None)
    forgetful.importance_sample(dropped)
    forgetful.importance_sample(dropped)
    assert len(drawn) == 7
    # a model made by _replace shares the dict, not its samples: another prior, its own
    remembered = model.importance_sample(dropped)
    moved = model._replace(precision=model.precision + np.eye(model.precision.shape[0]))
    own = moved.importance_sample(dropped)
    assert len(drawn) == 8 and own is not remembered
    np.testing.assert_allclose(own[1], sample(moved, dropped)[1], rtol=0, atol=0)
    assert np.max(np.abs(own[0] - remembered[0])) > 1e-6  # drawn at another mode


def test_a_set_s_laplace_approximation_is_worked_out_once_per_set_and_prior(
    wells, dropped, monkeypatch
):
    # The model remembers the Laplace approximation of each set's removal (whatever the
    # set's order), worked out as without memory; a model made by _replace with another
    # prior works out its own, and one without memory works it out every time.
    import bayesij.array.amip_logistic as logistic

    model = recover_glm(wells[2], wells[3], wells[4])
    fitted, laplace = _counted(monkeypatch, "_laplace")
    first = logistic._laplace_without(model, dropped)
    again = logistic._laplace_without(model, dropped[::-1].copy())
    assert again is first and len(fitted) == 1
    fresh = laplace(model, *logistic._kept(model, dropped))
    for mine, theirs in zip(first, fresh, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    logistic._laplace_without(model, dropped[:5])
    assert len(fitted) == 2
    moved = model._replace(precision=model.precision + np.eye(model.precision.shape[0]))
    own = logistic._laplace_without(moved, dropped)
    assert len(fitted) == 3 and np.max(np.abs(own[0] - first[0])) > 1e-6
    back = logistic._laplace_without(model, dropped)  # the shared dict held the other's
    assert len(fitted) == 4 and np.array_equal(back[0], first[0])
    taken, _ = _counted(monkeypatch, "_kept")  # a remembered one copies no observations
    assert logistic._laplace_without(model, dropped) is back and not taken
    forgetful = model._replace(modes=None)
    forgetful.removal(dropped, Affine(0.0, np.ones(model.precision.shape[0])), 0, 1.96)
    forgetful.removal(dropped, Affine(0.0, np.ones(model.precision.shape[0])), 0, 1.96)
    assert len(fitted) == 6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_expit_is_scipy_s_at_both_ends_and_min_x_0_to_the_bit(dtype):
    # log expit(x) = min(x, 0) - log(1 + exp(-|x|)); min(x, 0) is worked out as
    # (x - |x|) / 2, which must be the same to the bit (the importance sample's sums).
    from scipy.special import log_expit

    x = np.concatenate(
        [[-1e30, -80.0, -1.0, -0.0, 0.0, 1e-8, 1.0, 80.0, 1e30], np.linspace(-40, 40, 1001)]
    )
    x = x.astype(dtype)
    want = log_expit(x.astype(np.float64))
    got = amip_logistic._log_expit(x.copy())
    assert got.dtype == dtype
    tolerance = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    low = np.minimum(x, 0) - np.log(1 + np.exp(-np.abs(x)))
    np.testing.assert_array_equal(got, low)


def test_a_set_whose_laplace_band_is_not_far_short_is_not_checked(
    wells, dropped, distance_removal, monkeypatch
):
    # "Not reachable" needs the largest sets' checked bands far short of the target; the
    # check only widens the Laplace band, so where that band is not far short the answer
    # stays the influences' and no importance sample is drawn. Where it is far short, the
    # checked band decides (drawn).
    from types import SimpleNamespace

    import bayesij.array.amip_logistic as logistic
    import bayesij.stats.amip as stats_amip

    model, f, quantity, whole = distance_removal
    drawn, _ = _counted(monkeypatch, "importance_sample")
    orders = [dropped, dropped[::-1].copy(), np.sort(dropped)]
    result = SimpleNamespace(_limit=lambda: dropped.size)
    given = quantity, None
    mcse = metric_mcse(f, goal_for(f, np.sign(whole) * f.std(), 1.96))
    reachable = goal_for(f, 0.5 * whole, 1.96)  # half the whole set's change
    assert not amip_logistic.laplace_far_short(model, dropped, quantity, reachable, mcse)
    model.samples.clear()
    assert stats_amip._unreachable_in(result, reachable, orders, f, model, given) is result
    assert not drawn
    far = goal_for(f, 3.0 * whole, 1.96)  # three times it: far short, checked or not
    assert amip_logistic.laplace_far_short(model, dropped, quantity, far, mcse)
    checked = logistic.checked_removal(model, dropped, quantity, far, f)
    optimistic = max(checked.band, key=lambda end: far.direction * end)
    assert far_short(far, optimistic, mcse) and drawn


def test_orders_checked_from_the_smallest_laplace_prefix_answer_as_checking_every_order(
    monkeypatch,
):
    # smallest_settled checks a question's orders from the smallest Laplace prefix and
    # skips one that cannot beat the best so far (a check only grows the prefix); its
    # answer is that of checking every order in turn: the smallest sure set, the first
    # order's of equal ones (whether it settles how few is the caller's to say). A
    # stand-in for LaplacePrefixes gives each order a Laplace prefix and a checked size at
    # least that large (or no check).
    from types import SimpleNamespace

    rng = np.random.default_rng(5)
    table: dict = {}
    checked: list = []

    class Prefixes:
        def __init__(self, model, order, quantity, goal, f):
            self.index = int(order[0]) // 100
            self.hit, self.size = table[int(order[0])]

        def first_reaching(self, low):
            return self.hit

        def settled(self, hit, below=np.inf):
            checked.append((hit, self.index, below))
            if hit is None or self.size is None or self.size >= below:
                return None
            return SimpleNamespace(size=self.size)

    monkeypatch.setattr(amip_logistic, "LaplacePrefixes", Prefixes)
    saved = 0
    for case in range(400):
        orders = [np.arange(30) + 100 * k for k in range(3)]
        for k in range(3):
            hit = None if rng.random() < 0.15 else int(rng.integers(1, 12))
            grown = None if rng.random() < 0.15 else int(rng.integers(0, 4)) * (rng.random() < 0.6)
            table[100 * k] = hit, None if hit is None or grown is None else hit + grown
        low = float(rng.integers(0, 8))
        checked.clear()
        got = amip_logistic.smallest_settled(None, orders, None, None, None, low)
        every = [  # each order checked in turn: (size, index) of its sure set
            (table[100 * k][1], k)
            for k in range(3)
            if table[100 * k][0] is not None and table[100 * k][1] is not None
        ]
        if not every:
            assert got is None, case
            continue
        size, k = min(every)
        assert got is not None and got[0] is orders[k] and got[1].size == size, case
        # from the smallest Laplace prefix up (the first order's of equal ones), and only
        # where the order may still win
        assert [c[:2] for c in checked] == sorted(c[:2] for c in checked), case
        assert all(hit < below for hit, _, below in checked), case
        saved += sum(t[0] is not None for t in (table[100 * j] for j in range(3))) - len(checked)
    assert saved > 50  # orders that could not win were not checked


def test_the_draws_moments_are_measured_as_a_check_s_sampled_ones(distance_removal):
    # A check's departure compares the sampled mean and sd without a set with the draws'
    # own: both must be the same estimators (equal weights give the draws' moments), or
    # a removal of nothing would depart from itself.
    model, f, quantity, _ = distance_removal
    draws = f.reshape(-1)
    u = np.zeros((draws.size, 1))
    u[:, 0] = draws
    uniform = np.full(draws.size, 1.0 / draws.size)
    mean, sd, _ = amip_logistic.sampled_moments((u, uniform, 0.0), Affine(0.0, np.ones(1)))
    drawn = amip_logistic._drawn_moments(f)
    np.testing.assert_allclose(drawn[:2], (mean, sd), rtol=1e-12)
    # the mean's Monte Carlo error is ArviZ's (split chains, either generation)
    reference = quiet(az.mcse, az.convert_to_dataset(np.asarray(f)), method="mean")
    assert drawn[2] == pytest.approx(float(reference["x"]), rel=1e-12)
