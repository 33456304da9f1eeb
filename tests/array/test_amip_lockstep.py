"""Many reweighted AMIP searches sharing their passes over the draws: the products the
searches ask for are plain matrix products, and a search run beside others makes the same
choices and predictions as the search run alone (the greedy growth of Broderick, Giordano &
Meager 2020, reweighted as in Nguyen et al. 2024)."""

import itertools
from dataclasses import replace

import numpy as np
import pytest

from bayesij.array import amip
from bayesij.array.amip_lockstep import influence_products, run_in_lockstep


def _heavy_tailed_draws(n_units=150, seed=3):
    """Draws of a location-scale model's mean and sd and the pointwise normal
    log-likelihood of t(3) data: a few units carry most of the residual sum of squares."""
    rng = np.random.default_rng(seed)
    y = 0.2 + rng.standard_t(3, size=n_units)
    mu = y.mean() + y.std() / np.sqrt(n_units) * rng.normal(size=(4, 400))
    sigma = y.std() * np.sqrt(rng.chisquare(n_units - 1, size=(4, 400)) / (n_units - 1))
    log_lik = -0.5 * ((y - mu[..., None]) / sigma[..., None]) ** 2 - np.log(sigma)[..., None]
    return mu, sigma, log_lik


def test_the_products_are_matrix_products_with_nan_where_not_finite():
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(40, 7))
    vectors = rng.normal(size=(40, 3))
    np.testing.assert_allclose(influence_products(matrix, vectors), vectors.T @ matrix, 1e-13)
    matrix[5, 2] = -np.inf
    products = influence_products(matrix, vectors)
    assert np.isnan(products[:, 2]).all() and np.isfinite(np.delete(products, 2, 1)).all()
    single = matrix.astype(np.float32)  # converted a chunk at a time, the same numbers
    expected = vectors.T @ single.astype(np.float64)
    np.testing.assert_allclose(
        influence_products(single, vectors)[:, [0, 1, 3]], expected[:, [0, 1, 3]], 1e-13
    )


def test_searches_in_lockstep_choose_what_each_chooses_alone():
    mu, sigma, log_lik = _heavy_tailed_draws()
    questions = [(mu, "sign"), (mu, "significance"), (sigma, 0.3), (mu, "sign_and_significance")]
    goals = [amip.goal_for(f, target, 1.96) for f, target in questions]
    fs = [f for f, _ in questions]
    scores = [
        amip.metric_influence(f, log_lik, g, keep_blocks=True)
        for f, g in zip(fs, goals, strict=True)
    ]
    together = amip.reweighted_searches(fs, log_lik, goals, scores, 15, 0.7)
    for f, goal, score, found in zip(fs, goals, scores, together, strict=True):
        alone = amip.reweighted_search(f, log_lik, goal, score, 15, 0.7)
        np.testing.assert_array_equal(found.path.order, alone.path.order)
        np.testing.assert_allclose(found.path.change, alone.path.change, rtol=1e-12)
        assert found.path.stopped == alone.path.stopped
        assert found.answer == alone.answer
        assert found.monte_carlo.keys() == alone.monte_carlo.keys()
        if found.monte_carlo:
            assert found.monte_carlo["split"] == pytest.approx(alone.monte_carlo["split"], 1e-12)
    # The runner itself: each search asks for v @ log_lik and gets exactly that product.
    flat = log_lik.reshape(-1, log_lik.shape[-1])

    def asks(vector):
        product = yield vector
        return product

    vectors = [np.arange(flat.shape[0], dtype=float), np.ones(flat.shape[0] // 2)]
    answers = run_in_lockstep(flat, [asks(v) for v in vectors])
    np.testing.assert_allclose(answers[0], vectors[0] @ flat, rtol=1e-12)
    np.testing.assert_allclose(answers[1], vectors[1] @ flat[: flat.shape[0] // 2], rtol=1e-12)


def test_a_greedy_step_is_the_exact_reweighted_ranking():
    """After one unit is dropped, the next is the unit with the largest gain under the
    PSIS weights of that drop, computed here directly as a weighted covariance."""
    mu, _, log_lik = _heavy_tailed_draws(seed=8)
    goal = amip.goal_for(mu, "sign", 1.96)
    path = amip.reweighted_path(mu, log_lik, replace(goal, need=1e9), 2, 0.7)
    flat_f, flat_l = mu.reshape(-1), log_lik.reshape(mu.size, -1)
    first_gain = -goal.direction * (np.cov(flat_f, flat_l.T, bias=True)[0, 1:])
    assert path.order[0] == np.argmax(first_gain)
    weights, _ = amip.set_weights(flat_l[:, path.order[0]], mu.shape)
    centred_f = flat_f - weights @ flat_f
    phi = (weights * centred_f) @ (flat_l - weights @ flat_l)
    gain = -goal.direction * phi
    gain[path.order[0]] = -np.inf
    assert path.order[1] == np.argmax(gain)


def test_the_columns_of_a_large_set_are_summed_as_those_of_a_small_one():
    rng = np.random.default_rng(1)
    flat = rng.normal(size=(30, 64))
    units = np.arange(0, 64, 2)  # half the units: summed by one product
    np.testing.assert_allclose(amip.finite_column_sum(flat, units), flat[:, units].sum(1), 1e-13)
    flat[3, 4] = -np.inf  # impossible at one draw: counted as 0 there (gathered)
    expected = np.where(np.isfinite(flat[:, units]), flat[:, units], 0).sum(1)
    np.testing.assert_allclose(amip.finite_column_sum(flat, units), expected, 1e-13)
    mu, sigma, log_lik = _heavy_tailed_draws()
    both = amip.hybrid_changes(mu, log_lik, np.array([3]), np.array([5, 9]), [(0, 1.0), (1, 2.0)])
    assert both == [
        pytest.approx(
            amip.hybrid_changes(mu, log_lik, np.array([3]), np.array([5, 9]), [m])[0], 1e-12
        )
        for m in [(0, 1.0), (1, 2.0)]
    ]


def _continuation(mu, log_lik, goal) -> tuple:
    """The linear continuation from the full posterior, written out: the units by gain
    (those of positive gain), the change along them, its error by the importance-sampling
    formula for independent draws sqrt(mcse_g^2 + sum_u mcse_u^2), mcse_g and each unit's
    mcse_u^2 = sum_s w_s^2 (a_s (l_su - lbar_u) - phi_u)^2."""
    flat_f, flat_l = mu.reshape(-1), log_lik.reshape(mu.size, -1)
    w = np.full(flat_f.size, 1 / flat_f.size)
    a = flat_f - flat_f.mean()
    centred = flat_l - flat_l.mean(axis=0)
    phi = (w * a) @ centred
    per_unit = np.sqrt((w**2) @ (a[:, None] * centred - phi) ** 2)
    mcse_g = np.sqrt(np.sum((w * a) ** 2))
    order = np.argsort(goal.direction * phi, kind="stable")
    order = order[-goal.direction * phi[order] > 0]
    noise = np.sqrt(mcse_g**2 + np.cumsum(per_unit[order] ** 2))
    return order, np.cumsum(-phi[order]), noise, mcse_g, per_unit


def test_the_linear_continuation_stops_the_margin_s_monte_carlo_errors_past_the_target():
    """With no reweighting trusted (k-hat threshold below any k-hat) the path continues
    linearly from the full posterior: units by gain, the target reached at the first prefix
    whose change passes it by MC_MARGIN standard errors sqrt(mcse_g^2 + sum_u mcse_u^2), each
    unit's
    from the importance-sampling formula sum_s w_s^2 (a_s (l_su - lbar_u) - phi_u)^2."""
    mu, _, log_lik = _heavy_tailed_draws(seed=4)
    goal = amip.goal_for(mu, "sign", 1.96)
    order, change, noise, mcse_g, per_unit = _continuation(mu, log_lik, goal)
    margin = amip.MC_MARGIN  # its value: test_amip's test_the_monte_carlo_margin
    # A need that a prefix reaches just past the margin and that a shorter one would reach if
    # the units' errors counted for half: the per-unit errors decide the answer.
    laxer = np.sqrt(mcse_g**2 + 0.5 * np.cumsum(per_unit[order] ** 2))
    for j in range(1, order.size):
        tight = goal.direction * change[j] - margin * noise[j] - 1e-9
        first = np.flatnonzero(goal.direction * change >= tight + margin * noise)[0]
        if first == j and np.flatnonzero(goal.direction * change >= tight + margin * laxer)[0] < j:
            break
    else:
        pytest.fail("no need separates the two error rules on these draws")
    for need in (0.3 * goal.need, goal.need, tight):
        reached = np.flatnonzero(goal.direction * change >= need + margin * noise)
        path = amip.reweighted_path(mu, log_lik, replace(goal, need=need), 150, -1.0)
        assert path.reliable == 0 and set(path.how[1:]) == {"linear continuation"}
        expected = reached[0] + 1 if reached.size else min(order.size, 150)
        assert path.order.size == expected
        np.testing.assert_array_equal(path.order, order[:expected])
        assert path.stopped == ("reached" if reached.size else "alpha_max")


def test_the_linear_continuation_s_errors_are_those_over_the_chains():
    # Each draw repeated four times: the formula for independent draws halves every error,
    # the chains' effective sample size quarters the draws (chain_inflation: about 2), and
    # the continuation stops where the errors over the chains put it, not where the
    # formula would.
    mu, _, log_lik = _heavy_tailed_draws(seed=4)
    mu, log_lik = np.repeat(mu, 4, axis=1), np.repeat(log_lik, 4, axis=1)
    inflation = amip.chain_inflation(mu, 0, 1.96)
    assert 1.8 < inflation < 2.2
    goal = amip.goal_for(mu, "sign", 1.96)
    order, change, formula, _, _ = _continuation(mu, log_lik, goal)
    change = goal.direction * change
    margin = amip.MC_MARGIN
    j = order.size - 1  # the need its last unit reaches, past the errors over the chains
    need = change[j] - margin * inflation * formula[j] - 1e-9
    assert np.argmax(change >= need + margin * formula) < j - 5  # the formula's: sooner
    path = amip.reweighted_path(mu, log_lik, replace(goal, need=need), 150, -1.0)
    assert path.reliable == 0 and path.stopped == "reached"
    expected = int(np.argmax(change >= need + margin * inflation * formula)) + 1
    assert path.order.size == expected <= j + 1
    np.testing.assert_array_equal(path.order, order[:expected])


def test_questions_finished_on_threads_answer_as_finished_one_by_one(monkeypatch):
    # The reweighted audit finishes its questions (bootstrap, second-order band along a
    # store of rows and terms shared by the questions of one quantity, split-draw check)
    # on threads, and (OVERLAP_VALUES reached) while the other questions still step, on
    # the screen and the same store: the same answers, sets and intervals as one question
    # at a time after every search has stepped.
    import threading

    import bayesij
    from bayesij.array import numeric

    mu, sigma, log_lik = _heavy_tailed_draws(n_units=200, seed=5)
    post = bayesij.from_arrays(
        np.stack([mu, sigma], axis=-1), log_lik, quantity_names=["mu", "sigma"]
    )
    finished_on = []
    finish = amip._finished_search

    def recorded(*args, **kwargs):
        finished_on.append(threading.current_thread() is threading.main_thread())
        return finish(*args, **kwargs)

    monkeypatch.setattr(amip, "_finished_search", recorded)
    found, on_main = {}, {}
    overlap_from = amip.OVERLAP_VALUES
    assert log_lik.size < overlap_from  # by default, each finished after all stepped
    runs = [(threads, overlap) for overlap in (False, True) for threads in (1, 2)]
    for threads, overlap in runs:
        monkeypatch.setattr(numeric, "THREADS", threads)
        monkeypatch.setattr(amip, "OVERLAP_VALUES", 0 if overlap else overlap_from)
        finished_on.clear()
        found[threads, overlap] = bayesij.audit(post, settings={"method": "reweighted"}).amip
        on_main[threads, overlap] = set(finished_on)
    # one thread: each finished here; two: on the pool's threads
    assert on_main == {run: {run[0] == 1} for run in runs}
    one_by_one = found[1, False]
    assert len(one_by_one) >= 3
    for (key, one), run in itertools.product(one_by_one.items(), runs[1:]):
        assert found[run].keys() == one_by_one.keys()
        two = found[run][key]
        assert (one.answer, one.n_drop, one.upper_bound) == (
            two.answer,
            two.n_drop,
            two.upper_bound,
        )
        np.testing.assert_array_equal(one.drop_ids, two.drop_ids)
        assert one.size_interval == two.size_interval
        np.testing.assert_allclose(one.change_interval, two.change_interval, rtol=1e-12)
        assert one.predicted_change == pytest.approx(two.predicted_change, rel=1e-12)


def test_each_search_is_handed_on_as_it_returns():
    """``run_in_lockstep`` hands each search's result to ``done`` as it returns, the
    shorter search first, and returns them all in order."""
    _, _, log_lik = _heavy_tailed_draws(seed=5)
    flat = log_lik.reshape(-1, log_lik.shape[-1])

    def steps(vector, n):
        for _ in range(n):
            yield vector
        return n

    handed = []
    vector = np.ones(flat.shape[0])
    results = run_in_lockstep(
        flat, [steps(vector, 3), steps(vector, 1)], done=lambda i, r: handed.append((i, r))
    )
    assert results == [3, 1] and handed == [(1, 1), (0, 3)]
