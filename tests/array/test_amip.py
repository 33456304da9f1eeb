"""The array layer's AMIP pieces against exact arithmetic: the first-order path and its
Monte Carlo margin (a target counts as reached only beyond MC_MARGIN standard errors of the
predicted change; Broderick, Giordano & Meager 2020; Nguyen et al. 2024 for the Monte Carlo
error of the answer), the metric's draws and the goal."""

import numpy as np
import pytest

from bayesij.array import amip, amip_noise


def test_the_linear_path_orders_by_gain_and_stops_at_the_target():
    phi = np.array([-1.0, -3.0, 0.5, -2.0])  # dropping unit u moves the metric by -phi_u
    path = amip.linear_path(phi, direction=1, need=4.5, k_max=4)
    np.testing.assert_array_equal(path.order, [1, 3])  # gains 3 then 2: 5 >= 4.5
    np.testing.assert_allclose(path.change, [0.0, 3.0, 5.0])
    assert path.stopped == "reached"
    down = amip.linear_path(phi, direction=-1, need=0.1, k_max=4)
    np.testing.assert_array_equal(down.order, [2])  # the only unit that lowers it
    assert amip.linear_path(phi, direction=1, need=100, k_max=2).stopped == "alpha_max"


def test_the_monte_carlo_margin_is_two_and_a_half_standard_errors():
    phi = np.array([-3.0, -2.0, -1.0])
    mcse = np.full(3, 0.5)
    # Changes 3, 5, 6 against need 4.5 + 2.5 x 0.5 sqrt(k) = 5.75, 6.27, 6.67: never reached.
    path = amip.linear_path(phi, direction=1, need=4.5, k_max=3, mcse=mcse)
    assert path.stopped == "alpha_max" and path.order.size == 3
    # Less noise and the third unit reaches it (6 >= 4.5 + 2.5 x 0.3 sqrt(3) = 5.80), the
    # second not (5 < 4.5 + 2.5 x 0.3 sqrt(2) = 5.56); at a margin of 2 the second would
    # (5 >= 4.5 + 2 x 0.2 sqrt(2) = 5.07 with errors 0.2; 5 < 4.5 + 2.5 x 0.2 sqrt(2) = 5.21).
    closer = amip.linear_path(phi, direction=1, need=4.5, k_max=3, mcse=np.full(3, 0.3))
    assert closer.stopped == "reached" and closer.order.size == 3
    closest = amip.linear_path(phi, direction=1, need=4.5, k_max=3, mcse=np.full(3, 0.2))
    assert closest.stopped == "reached" and closest.order.size == 3
    assert amip.MC_MARGIN == 2.5
    # Without Monte Carlo errors the second unit already reaches it.
    assert amip.linear_path(phi, direction=1, need=4.5, k_max=3).order.size == 2


def test_a_target_no_sure_set_reaches_is_undetermined_with_the_draws_that_would_decide():
    """Replicates that reach the target each by a set of their own, none by one set of
    the ranking: undetermined, with the draws at which the largest set's Monte Carlo
    margin would clear it (errors falling as 1 / sqrt(S))."""
    from bayesij.array.amip_noise import NoiseAnswer

    f = np.random.default_rng(0).normal(size=(4, 1000))
    goal = amip.goal_for(f, 0.3, 1.96)  # raise the mean by 0.3
    reached = NoiseAnswer("reached", 0.99, (2.0, 2.0), (0.35, 0.45), np.nan, 0, 2)
    path = amip.linear_path(np.array([-0.2, 0.0, 0.0, -0.2]), 1, np.inf, 2)
    np.testing.assert_array_equal(np.sort(path.order), [0, 3])  # change 0.4 after both
    mcse = np.array([0.03, np.nan, 9.0, 0.04])  # only the set's units' errors count
    found = amip._undecided_set(reached, path, mcse, goal, 4000)
    # margin 0.4 - 0.3 = 0.1, error sqrt(0.03^2 + 0.04^2) = 0.05: 4000 (2.5 x 0.05 / 0.1)^2
    assert found.answer == "undetermined" and found.draws_needed == 6250
    assert found._replace(answer="reached", draws_needed=np.nan)[1:4] == reached[1:4]
    # Already past its margin at these draws: no more draws than these; short of the
    # target: no number of draws decides it.
    assert amip._undecided_set(reached, path, mcse / 10, goal, 4000).draws_needed == 4000
    far = amip.goal_for(f, 0.5, 1.96)
    assert amip._undecided_set(reached, path, mcse, far, 4000).draws_needed == np.inf


def _parts_by_definition(f, goal, centre) -> list:
    """A goal's draws written out: ``f`` for the mean; for an interval end ``g* = f + s z
    (f - c)^2 / (2 sd)``, ``f`` and ``(f - c)^2`` (``sd`` with divisor S - 1)."""
    if goal.sign == 0:
        return [f]
    square = (f - centre) ** 2
    sd = np.sqrt(((f - f.mean()) ** 2).sum() / (f.size - 1))
    return [f + goal.sign * goal.z * square / (2 * sd), f, square]


def test_the_metric_and_the_goal():
    rng = np.random.default_rng(0)
    f = rng.normal(1.0, 0.5, size=(4, 500))
    mean, sd = f.mean(), f.std(ddof=1)
    # The metric's draws have mean mean + sign z sd (to first order in the draws).
    for sign in (-1, 1):
        g = amip.metric_draws(f, sign, 1.96)
        assert g.mean() == pytest.approx(mean + sign * 1.96 * sd / 2 * (f.size - 1) / f.size)
    sign_goal = amip.goal_for(f, "sign", 1.96)
    assert sign_goal.direction == -1 and sign_goal.need == pytest.approx(mean)
    significance = amip.goal_for(f, "significance", 1.96)
    assert significance.need == pytest.approx(mean - 1.96 * sd)  # the lower end reaches 0
    shift = amip.goal_for(f, 0.25, 1.96)
    assert shift.need == pytest.approx(0.25)


def test_a_set_s_columns_are_summed_in_pieces_as_one_gather_would():
    # A set of thousands is summed 8 MiB of columns at a time (a whole gather of it was most
    # of an audit's peak above the matrix); -inf values stay -inf.
    rng = np.random.default_rng(1)
    flat = rng.normal(size=(400, 9000))
    flat[3, 17] = -np.inf
    units = rng.permutation(9000)[:5000]
    total = amip.set_column_sum(flat, units)
    np.testing.assert_allclose(total[4:], flat[4:, units].sum(axis=1), rtol=1e-12, atol=1e-10)
    assert total[3] == -np.inf if 17 in units else np.isfinite(total[3])
    assert len(amip.obs_chunks(units.size, amip._SET_GATHER * 400)) > 1  # in pieces


def test_a_unit_without_finite_influence_adds_nothing_to_any_bootstrap_replicate():
    # A unit impossible under some draws has NaN (or infinite) block sums: in the block
    # bootstrap it must count as no influence at all (0), not as a number, for the mean's
    # rows and the interval end's moments alike; float32 sums are resampled in float64.
    from bayesij.array import InfluenceScores

    rng = np.random.default_rng(2)
    sums = rng.normal(size=(50, 2, 6)).astype(np.float32)  # the mean's and the square's
    sums[:, :, 4] = np.nan
    sums[7, 1, 2] = np.inf
    scores = InfluenceScores(rng.normal(size=(3, 6)), np.ones((3, 6)), sums)
    f = rng.normal(size=(4, 1000))
    goal = amip.goal_for(f, "significance", 1.96)
    blocks, sizes, _ = amip._bootstrap_blocks(scores, f, goal)
    assert blocks.dtype == np.float64 and sizes.sum() == f.size
    np.testing.assert_array_equal(blocks[:, 4], 0.0)
    square = np.where(np.isfinite(sums[:, 1]), sums[:, 1], 0.0).astype(float)
    expected = sums[:, 0].astype(float) + goal.sign * goal.z / (2 * goal.sd) * square
    np.testing.assert_array_equal(blocks[:, :4], expected[:, :4])
    mean_goal = amip.goal_for(f, "sign", 1.96)
    mean_blocks, _, _ = amip._bootstrap_blocks(
        scores._replace(block_sums=sums[:, :1]), f, mean_goal
    )
    np.testing.assert_array_equal(mean_blocks[:, :4], sums[:, 0, :4].astype(float))
    # The moments keep the scores' sums (no float64 copy of every unit's): a path takes
    # its units' columns, in float64, with the non-finite ones as 0.
    moments = amip._moments(scores, goal)
    assert np.shares_memory(moments.block_sums, sums)
    counts = rng.multinomial(50, np.full(50, 1 / 50), size=8).astype(float)
    sizes = np.full(50, 80.0)  # the 50 blocks of these sums
    along = amip_noise._moment_paths(moments, goal.direction, (None, sizes, None), counts)
    units = np.array([4, 2, 0])
    zeroed = np.where(np.isfinite(sums[:, :2]), sums[:, :2], 0.0).astype(float)[:, :, units]
    rep = counts @ zeroed.reshape(50, -1) / (counts @ sizes)[:, None]
    rep = rep.reshape(-1, 2, units.size)
    d_mean, d_var = np.cumsum(-rep[:, 0], axis=1), np.cumsum(-rep[:, 1], axis=1)
    expected = goal.direction * np.asarray(goal.change_from(d_mean, d_var), dtype=float)
    np.testing.assert_allclose(along(slice(0, 8), units), expected, rtol=1e-13)
    assert np.isfinite(expected).all()
    assert sums.dtype == np.float32 and np.isnan(sums[0, 0, 4])  # the scores are not changed


@pytest.mark.parametrize("control_variates", [False, True])
def test_the_metric_s_block_sums_follow_from_the_mean_s_and_the_square_s(control_variates):
    """An interval end's ``g*`` is linear in the quantity and its centred square, and so
    are block sums (with control variates too: their fit is a projection): the block sums
    kept for the mean's and the square's rows give ``g*``'s as ``g*``'s own would be."""
    from bayesij.array.control_variates import zero_variance_influence
    from bayesij.array.influence import influence_scores

    rng = np.random.default_rng(4)
    theta = rng.normal(size=(4, 500, 2))
    y = rng.normal(size=30)
    log_lik = -0.5 * (y - theta[..., :1] - 0.3 * theta[..., 1:]) ** 2
    fs = [theta[..., 0], theta[..., 1]]
    goals = [amip.goal_for(fs[0], "sign", 1.96), amip.goal_for(fs[1], "significance", 1.96)]
    grad = -theta if control_variates else None
    kept = amip.metrics_influence(fs, log_lik, goals, grad, keep_blocks=True)
    assert kept.block_sums.shape[1:] == (3, 30)  # g*'s rows are not kept
    centres = amip.goal_centres(fs, goals, grad)
    parts = np.stack(
        [
            p
            for f, g, c in zip(fs, goals, centres, strict=True)
            for p in _parts_by_definition(f, g, c)
        ],
        -1,
    )
    whole = (
        zero_variance_influence(parts, log_lik, grad, keep_blocks=True)
        if control_variates
        else influence_scores(parts, log_lik, keep_blocks=True)
    )
    # the parts written out here; without control variates g*'s influence is combined
    # from the quantity's and the square's moments (one product each): equal to rounding
    np.testing.assert_allclose(kept.psi, whole.psi, rtol=1e-11, atol=1e-15)
    np.testing.assert_allclose(kept.mcse, whole.mcse, rtol=1e-10, atol=1e-15)
    for goal, rows, metric_row in zip(goals, amip.goal_rows(kept, goals), (0, 1), strict=True):
        derived = amip.metric_block_sums(rows.block_sums, goal)
        np.testing.assert_allclose(
            derived,
            whole.block_sums[:, metric_row],
            rtol=1e-5 if not control_variates else 1e-10,
            atol=1e-5,
        )


def test_a_set_s_sums_from_held_rows_are_its_columns_up_to_a_constant():
    # A set's log-likelihood at the draws from the store's centred rows (contiguous)
    # instead of its columns: the same up to a constant, which changes neither the
    # importance weights nor covariances with the draws; a unit impossible at a draw
    # keeps its -inf (no sum from rows where it must), a unit not held gives no sum.
    from bayesij.array.amip_curvature import CentredColumns

    rng = np.random.default_rng(8)
    log_lik = rng.normal(size=(4, 500, 30)) * 0.3 - 1.0
    log_lik[2, 9, 7] = -np.inf
    flat = log_lik.reshape(2000, 30)
    store = CentredColumns(2000, matrix=flat, units=np.arange(30))

    def same_up_to_a_constant(ours, theirs):
        assert np.ptp(ours - theirs) < 1e-12

    whole, first, rest = amip.held_sums(store, np.array([3, 12, 20, 7]), 3, 2000, whole=True)
    assert whole is None  # unit 7 is impossible at a draw
    same_up_to_a_constant(first, amip.set_column_sum(flat, np.array([3, 12, 20])))
    same_up_to_a_constant(rest, amip.finite_column_sum(flat, np.array([7])))
    whole, first, rest = amip.held_sums(store, np.array([7, 3, 12]), 1, 2000, whole=True)
    assert whole is None and first is None
    same_up_to_a_constant(rest, amip.finite_column_sum(flat, np.array([3, 12])))
    whole, _, _ = amip.held_sums(store, np.array([3, 12]), 2, 2000, whole=True)
    same_up_to_a_constant(whole, amip.set_column_sum(flat, np.array([3, 12])))
    # a unit joining a reweighted set: from its row up to a constant, or with its -inf
    same_up_to_a_constant(
        amip._joining_sum(flat, np.array([3, 12]), store), flat[:, [3, 12]].sum(1)
    )
    joined = amip._joining_sum(flat[:1000], np.array([3, 7]), store)
    assert joined.shape == (1000,) and np.isneginf(joined).sum() == 0  # -inf in the 2nd half
    joined = amip._joining_sum(flat, np.array([3, 7]), store)
    np.testing.assert_array_equal(np.isneginf(joined), np.isneginf(flat[:, 7]))
    short = CentredColumns(1000, matrix=flat[:1000], units=np.arange(30))
    assert all(total is None for total in amip.held_sums(short, np.array([12, 15]), 1, 2000))
    # units not held: their columns read from the matrix (a set's tail beyond the rows),
    # with the same rules; a store of rows alone, or of none of the set, gives no sum
    some = CentredColumns(2000, matrix=flat, units=np.arange(10))
    whole, first, rest = amip.held_sums(some, np.array([3, 12, 5, 7, 15]), 3, 2000, whole=True)
    assert whole is None  # unit 7, not held, is impossible at a draw
    same_up_to_a_constant(first, amip.set_column_sum(flat, np.array([3, 12, 5])))
    same_up_to_a_constant(rest, amip.finite_column_sum(flat, np.array([7, 15])))
    whole, *_ = amip.held_sums(some, np.array([3, 12, 15]), 3, 2000, whole=True)
    same_up_to_a_constant(whole, amip.set_column_sum(flat, np.array([3, 12, 15])))
    assert all(total is None for total in amip.held_sums(some, np.array([12, 15]), 1, 2000, True))
    rows_alone = CentredColumns(2000, rows=store.rows[:10].copy(), units=np.arange(10))
    assert amip.held_sums(rows_alone, np.array([3, 12]), 2, 2000, whole=True)[0] is None

    f = rng.normal(size=(4, 500))
    reliable, extra = np.array([3, 12, 20]), np.array([7, 25])
    _, *sums = amip.held_sums(store, np.concatenate([reliable, extra]), 3, 2000)
    metrics = [(0, 1.0), (1, 1.96), (-1, 1.0)]
    np.testing.assert_allclose(
        amip.hybrid_changes(f, log_lik, reliable, extra, metrics, sums),
        amip.hybrid_changes(f, log_lik, reliable, extra, metrics),
        rtol=1e-12,
    )
    whole, _, _ = amip.held_sums(store, reliable, 3, 2000, whole=True)
    np.testing.assert_allclose(
        amip.linear_set_change(f, log_lik, reliable, 1, 1.96, whole),
        amip.linear_set_change(f, log_lik, reliable, 1, 1.96),
        rtol=1e-12,
    )


def test_goals_on_one_quantity_share_its_draws_and_square():
    # The sign and both interval ends of one quantity read its draws once and its square
    # once: two columns for their seven rows, each row the goal's part it stands for.
    rng = np.random.default_rng(9)
    f = rng.normal(1.0, 0.5, size=(4, 300))
    other = rng.normal(size=(4, 300))
    fs = [f, f.copy(), f, other]
    goals = [amip.goal_for(f, "sign", 1.96), amip.goal_for(f, "significance", 1.96)]
    goals += [amip.Goal("mean - 1.96 sd", -1, 1, 1.0, 0.0, 1.96, 0.5), goals[0]]
    centres = amip.goal_centres(fs, goals)
    draws, (first, second, coef) = amip._shared_parts(fs, goals, centres)
    assert draws.shape == (4, 300, 3)
    parts = [
        part
        for q, g, c in zip(fs, goals, centres, strict=True)
        for part in _parts_by_definition(q, g, c)
    ]
    assert len(parts) == first.size == 8
    for row, part in enumerate(parts):
        np.testing.assert_allclose(
            draws[..., first[row]] + coef[row] * draws[..., second[row]], part, rtol=1e-13
        )


def test_each_unit_s_k_hat_is_that_of_its_own_removal():
    # A normal mean's draws and three units, two weak (noise sds 10 and 3) and one as
    # strong as the posterior, far off: the k-hat of exp(-l_u) that ArviZ's PSIS finds for
    # each (the last one's removal lies beyond the draws).
    rng = np.random.default_rng(2)
    theta = rng.normal(size=(4, 1000, 1))
    log_lik = -0.5 * ((np.array([0.0, 2.0, 6.0]) - theta) / np.array([10.0, 3.0, 1.0])) ** 2
    got = amip.unit_khats(log_lik.reshape(-1, 3).T, 4)
    arviz = pytest.importorskip("arviz")
    flat = log_lik.reshape(-1, 3)
    if hasattr(arviz, "psislw"):  # ArviZ 0.23: the log ratios, one column a unit
        want = np.array([float(arviz.psislw(-flat[:, u], reff=1.0)[1]) for u in range(3)])
    else:  # ArviZ 1.x: arviz-stats, which takes the log-likelihood
        from arviz_stats.base import array_stats

        want = np.array([float(array_stats.psislw(flat[:, u], r_eff=1.0)[1]) for u in range(3)])
    np.testing.assert_allclose(got, want, atol=0.05)
    assert got[2] > 1.0 > got[1]


def test_one_chain_s_split_check_chooses_on_its_first_half_and_estimates_on_its_second():
    # One chain: the set is chosen on the first half of its draws (the k_max = 4 units of
    # largest Cov(mu, l_n) there, to lower the mean) and its first-order change of the
    # mean, -sum_n Cov(mu, l_n) (divisor S - 1), estimated on each half; the interval is
    # the second half's estimate +- 1.96 of its error. With fewer than 4 draws in a half
    # there is no check, and the answer is still given.
    import bayesij

    rng = np.random.default_rng(0)
    y = rng.standard_t(3, size=40) + 1
    mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(1, 400, 1))
    log_lik = -0.5 * (y - mu) ** 2
    check = bayesij.amip(
        bayesij.from_arrays(mu, log_lik, quantity_names=["mu"]), "mu", "sign", method="linear"
    ).monte_carlo
    few = bayesij.amip(
        bayesij.from_arrays(mu[:, :6], log_lik[:, :6], quantity_names=["mu"]), "mu", "sign"
    )

    def covariances(draws):
        f, lik = mu[0, draws, 0], log_lik[0, draws]
        return (f - f.mean()) @ (lik - lik.mean(axis=0)) / (f.size - 1)

    first, second = covariances(slice(0, 200)), covariances(slice(200, 400))
    chosen = np.argsort(-first)[:4]
    assert check["how"] == "selected on the first half of the draws, estimated on the second"
    assert check["n_drop"] == 4
    assert check["naive"] == pytest.approx(-first[chosen].sum(), rel=1e-10)
    assert check["split"] == pytest.approx(-second[chosen].sum(), rel=1e-10)
    low, high = check["interval"]
    assert (low + high) / 2 == pytest.approx(check["split"], rel=1e-10)
    assert (high - low) / 2 == pytest.approx(1.96 * check["mcse"], rel=1e-10)
    assert few.monte_carlo == {}
    # exactly, the posterior mean without the 4 largest observations is still positive
    assert np.sort(y)[:-4].mean() > 0 and few.answer != "reached"


@pytest.mark.parametrize("chain_shape", [(4, 250), (2, 5)])
def test_a_set_impossible_at_every_draw_has_no_weights_and_infinite_k_hat(chain_shape):
    # Without the set the posterior is the full one divided by the set's likelihood where
    # the set is possible: a draw where it is not gets weight 0, and with none left the
    # weights are NaN and k-hat infinite (compiled chains and short ones alike).
    n_draws = chain_shape[0] * chain_shape[1]
    weights, k_hat = amip.set_weights(np.full(n_draws, -np.inf), chain_shape)
    assert np.isnan(weights).all() and k_hat == np.inf
    set_lik = np.random.default_rng(0).normal(size=n_draws)
    set_lik[3] = -np.inf
    weights, _ = amip.set_weights(set_lik, chain_shape)
    assert weights[3] == 0 and weights.sum() == pytest.approx(1.0, rel=1e-12)
    if chain_shape == (2, 5):  # too short to smooth: the plain ratios exp(-set_lik)
        ratios = np.where(np.isinf(set_lik), 0.0, np.exp(-set_lik))
        np.testing.assert_allclose(weights, ratios / ratios.sum(), rtol=1e-12)


@pytest.mark.parametrize("rho", [0.0, 0.6, -0.5])
def test_a_weighted_estimate_s_error_grows_with_the_chains_autocorrelation(rho):
    # AR(1) chains of autocorrelation rho hold (1 - rho) / (1 + rho) of their draws in
    # effective draws: an average's error is sqrt((1 + rho) / (1 - rho)) times the
    # independent draws' formula (2 at 0.6). An interval end's draws g* = f + z (f -
    # mean)^2 / (2 sd) mix faster (their square's autocorrelation is rho^2): their
    # inflation is ArviZ's effective sample size's. Antithetic chains are not credited
    # with a smaller error than independent draws.
    import arviz
    from scipy.signal import lfilter

    noise = np.random.default_rng(3).normal(size=(4, 20_000))
    f = lfilter([np.sqrt(1 - rho**2)], [1.0, -rho], noise, axis=1)  # f_t = rho f_t-1 + e_t
    expected = max(1.0, np.sqrt((1 + rho) / (1 - rho)))
    assert amip.chain_inflation(f, 0, 1.96) == pytest.approx(expected, rel=0.05)
    g_star = f + 1.96 * (f - f.mean()) ** 2 / (2 * f.std(ddof=1))
    ess = float(arviz.ess(g_star, method="mean"))
    ratio = g_star.std(ddof=1) / np.sqrt(ess) / (g_star.std() / np.sqrt(f.size))
    assert amip.chain_inflation(f, 1, 1.96) == pytest.approx(max(1.0, ratio), rel=1e-4)
