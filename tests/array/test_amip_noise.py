"""Three answers for an influential set under Monte Carlo error, against cases whose answer
is known: no noise (the replicates all agree), a target beyond every set (not reachable
even optimistically), and one within the noise (undetermined, with the draws that would
decide it by the 1 / sqrt(S) law)."""

import numpy as np
import pytest

from bayesij.array.amip_noise import (
    Replicates,
    block_bootstrap,
    draws_to_decide,
    finite_copy,
    linear_answer,
)


def test_block_sums_are_copied_as_float64_with_impossible_units_as_zero():
    # In memory the influences' block sums are float64: the copy must not zero the
    # scores' own NaN (an impossible unit) or infinite sums in place.
    sums = np.array([[1.5, np.nan, -np.inf], [2.0, 3.0, np.inf]])
    for given in (sums.copy(), sums.astype(np.float32)):
        copied = finite_copy(given)
        assert copied.dtype == np.float64 and not np.shares_memory(copied, given)
        np.testing.assert_array_equal(copied, [[1.5, 0.0, 0.0], [2.0, 3.0, 0.0]])
        assert np.isnan(given[0, 1]) and np.isinf(given[1, 2])


def test_a_gathered_copy_is_c_ordered_so_that_its_reshape_is_a_view():
    sums = np.arange(60.0).reshape(5, 2, 6).astype(np.float32)
    gathered = sums[:, :, [0, 2, 5]]  # not C-ordered: (8, 4, 40)-like strides
    assert not gathered.flags["C_CONTIGUOUS"]
    copied = finite_copy(gathered)
    assert copied.flags["C_CONTIGUOUS"] and np.shares_memory(copied.reshape(5, -1), copied)
    np.testing.assert_array_equal(copied, gathered)


def test_without_noise_every_replicate_agrees_with_the_point_estimate():
    psi = -np.array([0.5, 0.3, 0.2, 0.1, 0.0])  # dropping unit u changes the metric by -psi_u
    answer = linear_answer(psi, np.zeros(5), 1, 0.75, 4, np.array([0, 1]), 1000)
    assert answer.answer == "reached" and answer.share_reached == 1.0
    assert answer.size_interval == (2.0, 2.0)
    assert answer.change_interval == pytest.approx((0.8, 0.8))
    assert np.isnan(answer.draws_needed)
    beyond = linear_answer(psi, np.zeros(5), 1, 2.0, 4, np.arange(4), 1000)
    assert beyond.answer == "not reachable" and beyond.share_reached == 0.0
    assert beyond.size_interval == (np.inf, np.inf)


def test_a_target_within_the_noise_is_undetermined_and_more_draws_decide_it():
    psi = -np.full(10, 0.1)
    mcse = np.full(10, 0.05)
    # The most the 3 allowed units can do is 0.3 (point estimate): a target of 0.3 is a
    # coin flip over replicates.
    answer = linear_answer(psi, mcse, 1, 0.3, 3, np.arange(3), 4000, errors=Replicates(seed=1))
    assert answer.answer == "undetermined"
    assert 0.2 < answer.share_reached < 0.95
    assert answer.draws_needed > 4000
    far = linear_answer(psi, mcse, 1, 0.1, 3, np.arange(1), 4000)
    assert far.answer == "reached"


def test_the_draws_needed_follow_the_square_root_law():
    # margin 0.1, mcse 0.1 at 1000 draws: z mcse / margin = 1.96, so 1000 * 1.96^2 draws.
    assert draws_to_decide(1000, 0.1, 0.1) == np.ceil(1000 * 1.96**2)
    assert draws_to_decide(1000, 1.0, 0.1) == 1000  # already decisive: no more
    assert draws_to_decide(1000, 0.0, 0.1) == np.inf


def test_the_block_bootstrap_keeps_errors_that_units_share():
    # Block sums T_b,u = n_b (psi_u + a_b c_u): one shared block factor a_b moves every
    # unit's replicate together, in proportion to c_u, as an outlier-heavy fit's draws of
    # the noise scale do.
    rng = np.random.default_rng(0)
    sizes = np.full(40, 100.0)
    chains = np.repeat(np.arange(4), 10)
    psi, scale = np.array([0.3, 0.1, -0.2]), np.array([1.0, 2.0, -1.0])
    factor = rng.normal(size=40)
    sums = sizes[:, None] * (psi + (factor - factor.mean())[:, None] * scale * 0.01)
    replicates = np.array(list(block_bootstrap(sums, sizes, chains, 400, rng)))
    np.testing.assert_allclose(replicates.mean(axis=0), psi, atol=0.002)
    assert np.corrcoef(replicates.T)[0, 1] > 0.99 and np.corrcoef(replicates.T)[0, 2] < -0.99
    spread = replicates.std(axis=0)
    expected = 0.01 * np.abs(scale) * factor.std() / np.sqrt(40)
    np.testing.assert_allclose(spread, expected, rtol=0.2)


def test_shared_errors_widen_the_size_interval_past_independent_ones():
    rng = np.random.default_rng(1)
    sizes = np.full(40, 100.0)
    chains = np.repeat(np.arange(4), 10)
    psi = -np.full(50, 0.1)
    factor = rng.normal(size=40)
    sums = sizes[:, None] * (psi + (factor - factor.mean())[:, None] * 0.3)  # all together
    mcse = np.full(50, 0.3 * factor.std() / np.sqrt(40))
    shared = linear_answer(
        psi, mcse, 1, 1.0, 50, np.arange(10), 4000, errors=Replicates((sums, sizes, chains))
    )
    independent = linear_answer(psi, mcse, 1, 1.0, 50, np.arange(10), 4000)
    width = {
        k: a.size_interval[1] - a.size_interval[0]
        for k, a in {"shared": shared, "independent": independent}.items()
    }
    assert width["shared"] > 2 * width["independent"], width


def test_not_reachable_needs_the_optimistic_replicates_to_fail_too():
    # Along the ranking the three best units give 0.3 < 0.31 whatever the noise (theirs is
    # 0), but seven noisy units could stand in for them: re-selected afresh, some replicates
    # reach the target, so the answer is undetermined, never "not reachable".
    psi = -np.r_[np.full(3, 0.1), np.full(7, 0.05)]
    mcse = np.r_[np.zeros(3), np.full(7, 0.1)]
    answer = linear_answer(psi, mcse, 1, 0.31, 3, None, 1000, errors=Replicates(seed=2))
    assert answer.share_reached == 0.0
    assert answer.answer == "undetermined"
    quiet = linear_answer(psi, np.zeros(10), 1, 0.31, 3, None, 1000)
    assert quiet.answer == "not reachable"


def test_replicates_are_the_block_weighted_ratio_written_out():
    """psi* = sum_b c_b T_b / sum_b c_b n_b, term by term, for the counts a seed draws;
    each chain's blocks drawn as many times as it has."""
    from bayesij.array.amip_noise import block_bootstrap_counts, replicates_from_counts

    rng = np.random.default_rng(4)
    sizes = np.array([10.0, 12.0, 9.0, 11.0, 10.0, 8.0])
    chains = np.array([0, 0, 0, 1, 1, 1])
    sums = rng.normal(size=(6, 4))
    counts = block_bootstrap_counts(sizes, chains, 7, np.random.default_rng(1))
    assert (counts[:, :3].sum(axis=1) == 3).all() and (counts[:, 3:].sum(axis=1) == 3).all()
    got = replicates_from_counts(counts, sums, sizes)
    for r in range(7):
        numerator = sum(counts[r, b] * sums[b] for b in range(6))
        denominator = sum(counts[r, b] * sizes[b] for b in range(6))
        np.testing.assert_allclose(got[r], numerator / denominator, rtol=1e-14)
    again = block_bootstrap(sums, sizes, chains, 7, np.random.default_rng(1))
    np.testing.assert_allclose(again, got, rtol=0)


def test_the_most_a_set_within_k_max_can_do_is_its_top_positive_values():
    from bayesij.array.amip_noise import _sum_of_largest

    rng = np.random.default_rng(6)
    sample = rng.normal(size=(20, 30))
    # replicates of a few large gains among many small ones (as bootstrapped influences
    # are): only the columns that can hold a row's largest are partitioned
    gains = rng.standard_t(3, size=2000) * 0.1 + 0.05 * rng.normal(size=(200, 2000))
    gains[3] = -np.abs(gains[3])  # a replicate without a positive value
    for values in (sample, gains, gains[[3]]):
        for top in (0, 1, 2, 5, 29, 30, 40, 1999):
            expected = np.sort(values, axis=1)[:, ::-1][:, :top].clip(0).sum(axis=1)
            got = _sum_of_largest(values, top)
            np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def _shared_slope_blocks(slope: float, spread: float, n_units: int = 200, seed: int = 3):
    """Block sums whose replicates move every unit's influence together: unit u's
    influence on block b is ``-(slope + a_b spread)`` for one shared block factor a_b (a
    heavy-tailed fit's outliers err together through the draws of the noise scale)."""
    rng = np.random.default_rng(seed)
    sizes = np.full(40, 100.0)
    chains = np.repeat(np.arange(4), 10)
    factor = rng.normal(size=40)
    factor = (factor - factor.mean()) / factor.std()
    per_unit = -(slope + factor[:, None] * spread * np.sqrt(40)) * np.ones(n_units)
    return sizes[:, None] * per_unit, sizes, chains


def test_a_sure_set_far_above_the_smallest_is_an_upper_bound():
    # Every unit moves the metric by 0.01 (point estimate), and the replicates' shared
    # slope spreads the smallest reaching size over roughly 1 / (0.01 -+ 2 * 0.003): the
    # sure set (about 250) is more than twice the interval's low end (about 62) plus 2.
    sums, sizes, chains = _shared_slope_blocks(0.01, 0.003)
    psi = sums.sum(axis=0) / sizes.sum()
    mcse = np.full(psi.size, 0.003)
    answer = linear_answer(
        psi, mcse, 1, 1.0, 200, None, 4000, errors=Replicates((sums, sizes, chains))
    )
    low, high = answer.size_interval
    assert answer.answer == "undetermined" and answer.bound == answer.sure_size
    assert answer.sure_size > 2 * low + 2 and high <= answer.sure_size
    assert 4000 < answer.draws_needed < np.inf
    tight = linear_answer(psi, mcse / 20, 1, 1.0, 200, None, 4000)  # independent, small
    assert tight.answer == "reached" and tight.bound == 0


def test_the_draws_to_settle_a_size_are_the_first_grid_point_that_settles_it():
    # Replicates along a shared slope: path_r(k) = (0.01 + e_r) k with need 1. Shrinking
    # the deviations by sqrt(m) gives slopes 0.01 + e_r / sqrt(m); written out with the
    # same quantile rules, the first m of the 1.25^j grid where the sure size is at most
    # twice the low end plus 2.
    from bayesij.array.amip_noise import draws_to_settle_size, size_settled

    rng = np.random.default_rng(5)
    e = rng.normal(scale=0.004, size=200)
    k = np.arange(1, 401)
    point = 0.01 * k
    paths = point + e[:, None] * k
    got = draws_to_settle_size(point, paths, 1.0, 1000)

    def settled(m):
        slopes = 0.01 + e / np.sqrt(m)
        sizes = np.where(slopes > 0, np.ceil(1 / np.where(slopes > 0, slopes, 1) - 1e-12), np.inf)
        sizes[sizes > 400] = np.inf
        low = np.quantile(sizes, 0.025, method="inverted_cdf")
        lower_path = np.quantile(point + e[:, None] * k / np.sqrt(m), 0.025, axis=0)
        sure = np.flatnonzero(lower_path >= 1.0)
        return sure.size > 0 and size_settled(int(sure[0] + 1), low)

    grid = 1.25 ** np.arange(1, 63)
    first = next(m for m in grid if settled(m))
    assert got == np.ceil(1000 * first)
    assert not settled(1.0)


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_each_replicate_re_estimates_the_metric_it_must_move(scale):
    # The need of a sign target is the mean's distance from 0: on a replicate that draws
    # only chain 0's blocks, the need is chain 0's mean (and its sd for an interval end),
    # in the quantity's own units (a quantity of sd 2e-4: no floor under its variance).
    from bayesij.array.amip import _start, draw_block_layout, goal_for

    rng = np.random.default_rng(8)
    f = rng.normal(0.3, 0.2, size=(4, 500)) * scale
    for target in ("sign", "significance"):
        goal = goal_for(f, target, 1.96)
        start = _start(f, goal)
        sizes, chains = draw_block_layout(*f.shape)
        everything = np.ones((1, sizes.size))
        np.testing.assert_allclose(start.needs(everything, sizes), goal.need, rtol=1e-12)
        chain0 = (chains == 0).astype(float)[None, :] * 4  # chain 0's blocks, 4 times each
        # The replicate holds 2000 draws (chain 0's, four times): its sd has divisor 1999.
        mean, sd = f[0].mean(), f[0].std() * np.sqrt(2000 / 1999)
        value = mean + goal.sign * 1.96 * sd
        np.testing.assert_allclose(start.needs(chain0, sizes), -goal.direction * value, rtol=1e-10)


def test_a_sure_set_settles_the_size_up_to_twice_the_low_end_plus_two():
    from bayesij.array.amip_noise import size_settled

    assert size_settled(12, 5.0) and not size_settled(13, 5.0)
    assert size_settled(2, 0.0) and not size_settled(3, 0.0)
    assert size_settled(4, 1.0) and not size_settled(5, 1.0)


def test_the_ranking_s_answer_from_the_same_replicates_is_that_of_a_call_of_its_own():
    # The reweighted search asks for its set's answer and the ranking's sure set's: one
    # bootstrap gives both, equal to two calls (same seed, same replicates).
    n_units, psi, blocks = _twenty_influential_of_300()
    mcse = np.full(n_units, 0.0005)
    args = (psi, mcse, -1, 0.03, 60)
    options = {"errors": Replicates(blocks, seed=2)}
    chosen = np.argsort(psi)[::-1][:7]
    given, ranking = linear_answer(*args, chosen, 4000, ranking_too=True, **options)
    alone = linear_answer(*args, None, 4000, **options)
    assert given == linear_answer(*args, chosen, 4000, **options)
    assert ranking == alone
    assert given.chosen_size == 0 and ranking.chosen_size == alone.chosen_size > 0


def test_reached_needs_the_pessimistic_end_of_the_linearisation_band():
    # No Monte Carlo error; the quadratic model says the change is half the first-order
    # one (the set holds precision the other way). First order reaches 0.75 with 2 units,
    # half of it never within 4: a refit decides, and "reached" is not said.
    psi = -np.array([0.5, 0.3, 0.2, 0.1, 0.0])
    halved = _constant_model(0.5)
    answer = linear_answer(psi, np.zeros(5), 1, 0.75, 4, None, 1000, nonlinearity=halved)
    assert answer.answer == "undetermined" and answer.undetermined_by == "linearisation"
    assert answer.share_reached == 0.0 and answer.sure_size == 0
    assert answer.size_interval == (2.0, np.inf)
    plain = linear_answer(psi, np.zeros(5), 1, 0.75, 4, None, 1000)
    assert plain.answer == "reached" and plain.size_interval == (2.0, 2.0)


@pytest.mark.parametrize("replicates", [200, 37, 1])
def test_the_sure_prefix_counted_by_chunks_is_numpy_s_quantile_rule(replicates):
    # The linear answer counts, a chunk of replicates at a time, how many fall short of
    # their need after each prefix, instead of keeping every replicate's band (3 x 200 x
    # k_max floats: 480 MB at N = 10^6): the smallest prefix whose tail quantile
    # (inverted_cdf) of the excess is at least 0, NaN never sure, as np.quantile says.
    from bayesij.array.amip_noise import _Short

    rng = np.random.default_rng(replicates)
    k = 60
    paths = np.cumsum(rng.normal(0.1, 1.0, size=(replicates, k)), axis=1)
    needs = rng.normal(2.0, 0.5, size=replicates)
    paths[:, 20] = needs + 1.0  # every replicate reaches, but one gain is NaN: not sure
    paths[rng.integers(replicates), 20] = np.nan
    paths[:, 55] = needs  # ties: an excess of exactly 0 reaches
    found = []
    for tail in (0.025, 0.1, 0.5):
        excess = paths - needs[:, None]
        quantile = np.quantile(excess, tail, axis=0, method="inverted_cdf")
        sure = np.flatnonzero(quantile >= 0)
        expected = int(sure[0] + 1) if sure.size else 0
        counted = _Short(k)
        for start in range(0, replicates, 16):
            counted.add(paths[start : start + 16], needs[start : start + 16])
        assert counted.sure_prefix(tail) == expected
        found.append(expected)
    assert 21 not in found and (len(set(found)) > 1 or replicates == 1)
    assert _Short(0).sure_prefix(0.025) == 0


def test_the_ranking_s_set_is_judged_by_the_band_at_its_own_size():
    # The sure set's change interval comes from the replicates' band after that set's
    # units, with the second-order factors at that size: factors further along the
    # ranking (a wider band past the set) change neither the set nor its interval.
    n_units, psi, blocks = _twenty_influential_of_300()
    options = {"errors": Replicates(blocks, seed=2)}

    def factors(near: float, far: float, at: int):
        def nonlinearity(units):
            share = np.where(np.arange(units.size) < at, near, far)
            return np.stack([np.full(units.size, 1.1), share])

        return nonlinearity

    def answer(nonlinearity):
        args = (psi, np.full(n_units, 0.0005), -1, 0.001, 60, None, 4000)
        return linear_answer(*args, nonlinearity=nonlinearity, **options)

    narrow, wider_past = answer(factors(0.05, 0.05, 0)), answer(factors(0.05, 3.0, 30))
    assert 0 < narrow.sure_size < 30 and narrow.chosen_size == narrow.sure_size
    assert wider_past.chosen_size == narrow.chosen_size
    assert wider_past.change_interval == narrow.change_interval
    wide = answer(factors(3.0, 3.0, 0))
    assert wide.change_interval != narrow.change_interval  # the band is felt


def _twenty_influential_of_300():
    """300 units whose first 20 move the metric, as block sums over 50 blocks of draws
    (4 chains): the number of units, their influence and the block bootstrap's blocks."""
    rng = np.random.default_rng(5)
    n_units, n_blocks = 300, 50
    sums = rng.normal(0.002, 0.02, size=(n_blocks, n_units)) + 0.004 * (np.arange(n_units) < 20)
    sizes = np.full(n_blocks, 80.0)
    chains = np.repeat(np.arange(4), n_blocks // 4 + 1)[:n_blocks]
    return n_units, sums.sum(axis=0) / sizes.sum(), (sums, sizes, chains)


def test_a_chunk_s_gains_are_the_block_bootstrap_s_wherever_read():
    # The replicates' gains of a ranking's columns come from their block sums alone, every
    # unit's only when asked for: both are the block bootstrap's replicates of -direction psi.
    from bayesij.array.amip_noise import _replicate_gains, block_bootstrap_counts

    rng = np.random.default_rng(3)
    sums = rng.normal(size=(12, 40))
    sizes = np.full(12, 25.0)
    chains = np.repeat(np.arange(3), 4)
    counts = block_bootstrap_counts(sizes, chains, 30, np.random.default_rng(1))
    expected = -(counts @ sums) / (counts @ sizes)[:, None]  # direction +1
    draw = _replicate_gains(None, None, 1, None, (sums, sizes, chains), counts)
    chunk = draw(slice(5, 17))
    units = np.array([7, 3, 39])
    np.testing.assert_allclose(chunk.columns(units), expected[5:17][:, units], rtol=1e-12)
    np.testing.assert_allclose(chunk.whole(), expected[5:17], rtol=1e-12)
    assert chunk.whole() is chunk.whole()  # computed once


def test_the_block_sums_taken_once_or_per_chunk_give_the_same_answer(monkeypatch):
    # A ranking's block sums are kept for all chunks of bootstrap replicates where they
    # are small, and taken again for each chunk where they are not (TAKEN_BYTES): the
    # replicates, and so the answer, are the same either way (a mean's sign: its gains
    # are the block sums' replicates, not the moments').
    from ols_amip import kidiq_shaped

    import bayesij
    import bayesij.array.amip_noise as amip_noise
    from bayesij import refit

    X, y = kidiq_shaped()
    post = refit.FlatPriorRegressionBackend(X, y, draws=4000, seed=1).fit(np.ones(y.size))
    kept = bayesij.amip(post, "beta[2]", "sign", method="linear")
    monkeypatch.setattr(amip_noise, "TAKEN_BYTES", 0)
    each = bayesij.amip(post, "beta[2]", "sign", method="linear")
    for field in ("answer", "drop_ids", "size_interval", "change_interval", "share_reached"):
        assert getattr(kept, field) == getattr(each, field), field


def test_a_replicate_takes_its_units_in_the_order_of_its_own_gains():
    # Along the ranking (first-order paths, one replicate a row) the first reaches 5 at
    # its third unit, but its third unit alone does; the second replicate reaches only
    # with two; no set within ``within`` units reaches the third's need.
    from bayesij.array.amip_noise import _reselected_reach

    first = np.cumsum([[1.0, 1.0, 5.0], [3.0, 1.0, 2.5], [1.0, 1.0, 1.0]], axis=1)
    plain = np.stack([np.ones(3), np.zeros(3), np.zeros(3)])  # first order, no band
    reach = _reselected_reach(first, plain, np.array([5.0, 5.0, 5.0]), within=3)
    np.testing.assert_array_equal(reach, [1.0, 2.0, np.inf])
    assert _reselected_reach(first, plain, np.array([6.0, 5.0, 5.0]), within=1)[0] == np.inf


def test_a_unit_that_moves_the_metric_more_alone_reaches_before_the_ranking_s_first():
    # Second in the ranking by first order (0.25 after 0.3), the second unit alone moves
    # the metric three times its first order (a high-leverage unit): the smallest set's
    # size interval starts at 1 although the ranking's prefixes need three units.
    from bayesij.array.amip_noise import _reselected_reach

    class Model:
        def __call__(self, units):  # the ranking's prefixes: the first order
            return np.stack([np.ones(units.size), np.zeros(units.size), np.zeros(units.size)])

        def each_alone(self, units):
            factors = self(units)
            factors[0, units == 1] = 3.0
            return factors

    psi = -np.array([0.3, 0.25, 0.2, 0.1, 0.05])
    ranking_only = linear_answer(psi, np.zeros(5), 1, 0.6, 5, np.arange(3), 1000)
    assert ranking_only.size_interval == (3.0, 3.0)
    answer = linear_answer(psi, np.zeros(5), 1, 0.6, 5, np.arange(3), 1000, nonlinearity=Model())
    assert answer.answer == "reached" and answer.size_interval == (1.0, 3.0)
    one = _reselected_reach(
        np.cumsum([[0.3, 0.25]], axis=1), Model().each_alone(np.arange(2)), np.array([0.6]), 2
    )
    assert one[0] == 1.0
    # a need only the two together meet: their gains summed along the re-selected order
    two = _reselected_reach(
        np.cumsum([[0.3, 0.25]], axis=1), Model().each_alone(np.arange(2)), np.array([1.0]), 2
    )
    assert two[0] == 2.0


def test_a_unit_without_an_influence_or_an_error_counts_as_none():
    # An influence that is NaN (a unit whose log-likelihood is not finite somewhere)
    # moves nothing: the answer is that of the influence 0, whose unit is never in a set
    # (no positive gain). An error that is NaN is no noise: the answer is that of error 0.
    n_units, psi, _ = _twenty_influential_of_300()
    mcse = np.full(n_units, 0.0005)
    top = int(np.argmax(psi))
    args = (-1, 0.03, 200, None, 4000)
    quiet = psi.copy()
    quiet[-1] = 0.0
    without = psi.copy()
    without[-1] = np.nan
    assert linear_answer(without, mcse, *args) == linear_answer(quiet, mcse, *args)
    exact, unknown = mcse.copy(), mcse.copy()
    exact[top], unknown[top] = 0.0, np.nan
    answer = linear_answer(psi, unknown, *args)
    assert answer == linear_answer(psi, exact, *args)
    assert answer.chosen_size > 0  # the set reported holds the unit of unknown error


def test_a_set_a_replicate_re_selects_is_widened_as_the_ranking_s_band_is():
    # Three units move the metric; 507 move it by nothing but carry Monte Carlo error. On
    # a replicate, the best 100 units by its own gains (re-selected: optimistic) move the
    # metric about 7.4, the ranking's own three units 0.5. With a second-order model that
    # puts the change at 1.5 times its first order along the ranking, a set within k_max
    # may reach a need of 10 (7.4 x 1.5): undetermined, by the linearisation (without the
    # model it is not reachable); a need of 14 is beyond even the widened best set.
    n_units = 510
    psi = np.zeros(n_units)
    psi[:3] = 0.5 / 3
    mcse = np.full(n_units, 0.05)
    mcse[:3] = 0.001
    widened = _constant_model(1.5)
    args = (psi, mcse, -1)
    assert linear_answer(*args, 10.0, 100, None, 4000).answer == "not reachable"
    answer = linear_answer(*args, 10.0, 100, None, 4000, nonlinearity=widened)
    assert (answer.answer, answer.undetermined_by) == ("undetermined", "linearisation")
    answer = linear_answer(*args, 14.0, 100, None, 4000, nonlinearity=widened)
    assert answer.answer == "not reachable"


def test_the_draws_needed_are_those_of_the_ranking_s_sum_and_its_error():
    # Three units of gain 0.1 and error 0.05 each: their sum has mean 0.3 and error
    # 0.05 sqrt(3); a need of 0.27 is decided at 1.96 errors from it: 4000 (1.96 x 0.0866
    # / 0.03)^2 draws (2000 replicates estimate the mean and the error: within 25 %).
    psi, mcse = -np.full(10, 0.1), np.full(10, 0.05)
    errors = Replicates(n_replicates=2000, seed=1)
    answer = linear_answer(psi, mcse, 1, 0.27, 3, np.arange(3), 4000, errors=errors)
    assert (answer.answer, answer.undetermined_by) == ("undetermined", "Monte Carlo error")
    expected = draws_to_decide(4000, 0.03, 0.05 * np.sqrt(3))
    assert answer.draws_needed == pytest.approx(expected, rel=0.25)


def test_the_ranking_s_reported_set_has_the_interval_of_the_same_set_given():
    # A second-order model whose ratio grows with the set's size (1 + k / 100): the
    # ranking's prefix of k units is read at its k-th factors, as the set given alone is.
    n_units, psi, blocks = _twenty_influential_of_300()
    mcse = np.full(n_units, 0.0005)

    def growing(units):
        k = np.arange(1, len(units) + 1)
        return np.stack([1 + k / 100, np.full(k.size, 0.05), np.zeros(k.size)])

    args = (psi, mcse, -1, 0.0008, 60)
    options = {"errors": Replicates(blocks, seed=2), "nonlinearity": growing}
    ranking = linear_answer(*args, None, 4000, **options)
    size = ranking.chosen_size
    assert 0 < size < 60
    order = np.argsort(-psi, kind="stable")[:size]
    given = linear_answer(*args, order, 4000, **options)
    np.testing.assert_allclose(ranking.change_interval, given.change_interval, rtol=1e-12)
    assert ranking.change == pytest.approx(-psi[order].sum() * (1 + size / 100), rel=1e-12)


def test_no_unit_that_moves_the_metric_reports_an_empty_set_of_no_change():
    # a gain is -direction psi: direction -1 with negative psi, every gain is negative
    answer = linear_answer(np.full(8, -0.1), np.full(8, 0.01), -1, 0.5, 4, None, 4000)
    assert answer.answer == "not reachable"
    assert (answer.chosen_size, answer.change) == (0, 0.0)
    assert answer.change_interval == (0.0, 0.0)  # an empty set changes nothing
    assert answer.smaller == 0  # only a search of sets beyond the ranking finds a smaller one


def test_the_reported_change_is_the_second_order_one_and_the_first_order_reaching_is_said():
    # Four units of gain 0.1: the first order reaches 0.35 with all four (0.4), surely;
    # a second-order model puts every change at 0.8 of its first order (0.32), which
    # falls short: the linearisation, not the Monte Carlo error, leaves it undetermined.
    psi = -np.full(6, 0.1)
    mcse = np.full(6, 0.001)
    shrunk = _constant_model(0.8, 0.1)
    chosen = np.arange(4)
    plain = linear_answer(psi, mcse, 1, 0.35, 4, chosen, 4000)
    assert plain.answer == "reached" and plain.change == pytest.approx(0.4)
    answer = linear_answer(psi, mcse, 1, 0.35, 4, chosen, 4000, nonlinearity=shrunk)
    assert answer.change == pytest.approx(0.8 * 0.4)
    assert (answer.answer, answer.undetermined_by) == ("undetermined", "linearisation")


def test_a_unit_missing_from_the_block_sums_is_refused():
    from bayesij.array.amip_noise import _column_positions

    at = _column_positions(np.array([1, 3, 5]))
    np.testing.assert_array_equal(at(np.array([5, 1])), [2, 0])
    for ids in ([1, 4], [7]):  # between two units; past the last
        with pytest.raises(ValueError, match="lack some unit"):
            at(np.array(ids))


def test_a_sure_prefix_is_where_the_tail_quantile_of_the_excess_is_not_below_zero():
    # NumPy's inverted_cdf quantile of each prefix's excess over the need, from counts
    # gathered a chunk of replicates at a time: 5 of 200 short is the 2.5 % quantile
    # below 0 (not sure), 4 of 200 is not.
    from bayesij.array.amip_noise import _Short

    rng = np.random.default_rng(4)
    excess = rng.uniform(0.1, 1.0, size=(200, 3))
    excess[:5, 0] = -0.1
    excess[:4, 1] = -0.1
    short = _Short(3)
    for rows in (slice(0, 120), slice(120, 200)):
        short.add(excess[rows] + 2.0, np.full(rows.stop - rows.start, 2.0))
    quantiles = np.quantile(excess, 0.025, axis=0, method="inverted_cdf")
    assert quantiles[0] < 0 <= quantiles[1]
    assert short.sure_prefix(0.025) == 2


@pytest.mark.parametrize("direction", [1, -1])
def test_independent_errors_give_the_change_plus_minus_z_times_the_set_s_error(direction):
    # Without blocks the set's change interval is its change +- z sqrt(sum mcse^2).
    from scipy.stats import norm

    psi = -direction * np.array([0.3, 0.2, 0.1, 0.05, 0.0])
    mcse = np.array([0.02, 0.01, 0.03, 0.04, 0.05])
    chosen = np.array([0, 2])
    answer = linear_answer(psi, mcse, direction, 0.35, 4, chosen, 4000)
    change = -psi[chosen].sum()
    half = norm.ppf(0.975) * np.sqrt(0.02**2 + 0.03**2)
    assert answer.change == pytest.approx(change)
    assert answer.change_interval == pytest.approx((change - half, change + half), rel=1e-12)


def _first_settling_factor(down: float) -> tuple[float, float]:
    """The point estimate gains 0.1 a unit; 120 replicates lie 0.37 above it, 80 lie
    ``down`` below. Shrinking the deviations by sqrt(f) on the grid 1.25^k, the sure set
    (the 2.5 % quantile of the shrunk gains reaching 0.555) must be at most twice the
    size interval's low end (each replicate's first prefix reaching it, 2.5 % quantile)
    plus 2: the first factor where that holds, found by walking the whole grid, and
    :func:`draws_to_settle_size`'s draws for 4000 now."""
    from bayesij.array.amip_noise import draws_to_settle_size, size_settled

    point = 0.1 * np.arange(1, 11)
    deviation = np.r_[np.full(120, 0.37), np.full(80, -down)][:, None]
    paths = point + deviation * np.ones(10)

    def settled(f):
        shrunk = point + (paths - point) / np.sqrt(f)
        reach = shrunk >= 0.555
        sizes = np.where(reach.any(axis=1), reach.argmax(axis=1) + 1.0, np.inf)
        low = np.quantile(sizes, 0.025, method="inverted_cdf")
        sure = np.flatnonzero(np.quantile(shrunk, 0.025, axis=0) >= 0.555)
        return sure.size > 0 and size_settled(int(sure[0]) + 1, low)

    assert not settled(1.0)
    first = next(f for f in 1.25 ** np.arange(1, 63) if settled(f))
    return first, draws_to_settle_size(point, paths, 0.555, 4000)


@pytest.mark.parametrize("down", [0.27, 0.31])
def test_the_draws_that_settle_a_size_are_the_first_factor_whose_shrunk_replicates_do(down):
    # The grid's first factor (1.25) and its third.
    first, draws = _first_settling_factor(down)
    assert draws == np.ceil(4000 * first)
    assert first == {0.27: 1.25, 0.31: 1.25**3}[down]


def test_the_draws_that_settle_a_size_are_found_wherever_on_the_grid_they_lie():
    # The bisection over the grid finds the first settling factor at every position from
    # the 1st to the 18th (a search that stopped one step early returned a later one).
    positions = set()
    for down in np.arange(0.27, 3.0, 0.1):
        first, draws = _first_settling_factor(down)
        assert draws == np.ceil(4000 * first), down
        positions.add(round(np.log(first) / np.log(1.25)))
    assert positions >= {1, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}


def test_the_grid_s_last_factors_settle_and_past_them_none_does():
    # The grid ends at 1.25^62 (10^6 times the draws): a size settled only there is found
    # there (a bisection starting one below the top returned 1.25^61), and one that even
    # the top does not settle needs more draws than the grid holds (inf).
    from bayesij.array.amip_noise import draws_to_settle_size

    for down, position in ((400.0, 61), (420.0, 62)):
        first, draws = _first_settling_factor(down)
        assert round(np.log(first) / np.log(1.25)) == position
        assert draws == np.ceil(4000 * first)
    point = 0.1 * np.arange(1, 11)
    paths = point + np.r_[np.full(120, 0.37), np.full(80, -450.0)][:, None] * np.ones(10)
    assert draws_to_settle_size(point, paths, 0.555, 4000) == np.inf


def _constant_model(ratio: float, share: float = 0.0):
    """A second-order model (``nonlinearity``) that puts every prefix's change at ``ratio``
    times its first order, the band widened by ``share`` of it beyond, no near end."""

    def factors(units):
        k = len(units)
        return np.stack([np.full(k, ratio), np.full(k, share), np.zeros(k)])

    return factors


def _chunk_inputs(n_blocks: int = 12, n_units: int = 40, replicates: int = 30):
    """Block sums of influences (B, U) and of a mean's and a variance's influences
    (B, 2, U), blocks of 25 draws in 3 chains, and block-bootstrap counts (R, B)."""
    from bayesij.array.amip_noise import block_bootstrap_counts

    rng = np.random.default_rng(3)
    sums, moment_sums = (
        rng.normal(size=(n_blocks, n_units)),
        rng.normal(size=(n_blocks, 2, n_units)),
    )
    sizes, chains = np.full(n_blocks, 25.0), np.repeat(np.arange(3), n_blocks // 3)
    counts = block_bootstrap_counts(sizes, chains, replicates, np.random.default_rng(1))
    return sums, moment_sums, sizes, chains, counts


def test_a_chunk_s_gains_stay_the_bootstrap_s_when_its_oldest_set_is_let_go():
    # A chunk keeps the block sums of the two sets last asked for: a third lets the oldest
    # go, and asking for it again takes them anew. Every answer is the block bootstrap's
    # -direction psi* (direction -1 here).
    from bayesij.array.amip_noise import _replicate_gains

    sums, _, sizes, chains, counts = _chunk_inputs()
    expected = (counts @ sums) / (counts @ sizes)[:, None]
    chunk = _replicate_gains(None, None, -1, None, (sums, sizes, chains), counts)(slice(4, 20))
    for units in ([1, 2], [5], [9, 0, 3], [1, 2], [5]):
        units = np.array(units)
        np.testing.assert_allclose(chunk.columns(units), expected[4:20][:, units], rtol=1e-12)


@pytest.mark.parametrize("direction", [1, -1])
def test_a_mean_s_replicate_paths_are_its_bootstrap_influences_summed_along_the_set(direction):
    # For a mean (change_from returns d_mean) each replicate's gain after the first j units
    # of a set is -direction times the sum of their bootstrap mean influences psi*; an
    # empty set has no columns; three sets in turn (the oldest's block sums let go) and
    # the first again give the same.
    from bayesij.array.amip_noise import Moments, _moment_paths

    _, moment_sums, sizes, chains, counts = _chunk_inputs()
    moments = Moments(np.zeros((2, 40)), moment_sums, lambda d_mean, d_var: d_mean)
    along = _moment_paths(moments, direction, (None, sizes, chains), counts)
    psi_mean = (counts @ moment_sums[:, 0, :]) / (counts @ sizes)[:, None]
    rows = slice(3, 17)
    assert along(rows, np.zeros(0, dtype=int)).shape == (14, 0)
    for units in ([6, 1, 30], [2], [39, 0], [6, 1, 30]):
        units = np.array(units)
        expected = -direction * np.cumsum(psi_mean[rows][:, units], axis=1)
        np.testing.assert_allclose(along(rows, units), expected, rtol=1e-12)


def test_a_size_no_grid_point_settles_needs_infinitely_many_draws():
    # Replicates whose paths never reach the need along the ranking, however far their
    # deviations shrink (the point estimate falls short): no number of draws settles it.
    from bayesij.array.amip_noise import draws_to_settle_size

    k = np.arange(1, 101)
    point = 0.001 * k  # at most 0.1, the need is 1
    paths = point + np.random.default_rng(2).normal(scale=0.01, size=(200, 1)) * k
    assert draws_to_settle_size(point, paths, 1.0, 4000) == np.inf


def test_the_shared_bootstrap_counts_are_drawn_once_and_read_only():
    # Every question of an audit reuses one draw of the block counts: the same array,
    # which no caller may change in place.
    from bayesij.array.amip_noise import bootstrap_counts

    sizes, chains = np.full(8, 50), np.repeat(np.arange(2), 4)
    counts = bootstrap_counts(sizes, chains, replicates=20)
    assert bootstrap_counts(sizes.copy(), chains.copy(), replicates=20) is counts
    with pytest.raises(ValueError, match="read-only"):
        counts[0, 0] = 3


@pytest.mark.parametrize("replicates", [1, 7, 2000, 2001])
@pytest.mark.parametrize("n_units", [1, 300, 10**6])
def test_replicates_are_read_in_chunks_that_cover_each_once(replicates, n_units):
    # In order, each replicate in one chunk and none past the last; a chunk's float64
    # gains (replicates x units) within a sixteenth of CHUNK_BYTES (a few temporaries of
    # that size beside an audit's matrix), unless it is a single replicate.
    from bayesij.array.amip_noise import CHUNK_BYTES, _replicate_chunks

    chunks = _replicate_chunks(replicates, n_units)
    covered = np.concatenate([np.arange(replicates)[chunk] for chunk in chunks])
    np.testing.assert_array_equal(covered, np.arange(replicates))
    assert all(chunk.stop <= replicates for chunk in chunks)
    rows = [chunk.stop - chunk.start for chunk in chunks]
    assert all(r == 1 or 8 * r * n_units <= CHUNK_BYTES / 16 for r in rows)


def test_a_replicate_short_on_the_ranking_is_judged_by_its_own_largest_gains():
    # Three units gain 1.0 each (Monte Carlo SE 0.15), thirty others 0.8 (SE 0.3), k_max 3,
    # the target 3.6: the ranking's sum reaches it in 1.5 % of the replicates (under the 2.5
    # % tail: not "reached"), and a replicate whose ranking falls short may still reach with
    # its own three largest gains (re-selected among the thirty). That keeps the answer open
    # whichever replicates' rankings reach: re-selecting only when all of them fall short
    # (a mutant no test noticed) said "not reachable", as the three units alone do.
    gain = np.concatenate([np.full(3, 1.0), np.full(30, 0.8)])
    mcse = np.concatenate([np.full(3, 0.15), np.full(30, 0.3)])
    answer = linear_answer(-gain, mcse, 1, 3.6, 3, None, 4000)
    assert 0 < answer.share_reached <= 0.025
    assert answer.answer == "undetermined"
    alone = linear_answer(-gain[:3], mcse[:3], 1, 3.6, 3, None, 4000)
    assert alone.answer == "not reachable"


def test_a_block_sum_that_is_nan_counts_as_zero():
    # A unit impossible in some block of draws has a NaN block sum there; the replicates
    # read it as 0 (np.nan_to_num), as the point influence reads a NaN psi, whatever the
    # other values (a check that let the sums through where any value was finite went
    # unnoticed: the NaN reached the answer).
    n_units, psi, (sums, sizes, chains) = _twenty_influential_of_300()
    args = (psi, np.full(n_units, 0.0005), -1, 0.03, 60, None, 4000)
    zeroed, broken = sums.copy(), sums.copy()
    zeroed[3, 0] = zeroed[7, 5] = 0.0
    broken[3, 0] = broken[7, 5] = np.nan
    expected = linear_answer(*args, errors=Replicates((zeroed, sizes, chains), seed=2))
    answer = linear_answer(*args, errors=Replicates((broken, sizes, chains), seed=2))
    assert answer == expected
    assert np.isfinite(answer.change_interval).all()
