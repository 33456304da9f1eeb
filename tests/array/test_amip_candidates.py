"""The block bootstrap restricted to candidate units: the units kept block by block hold
every unit some replicate can need, and the answers equal those of every unit's sums."""

import numpy as np
import pytest

from bayesij.array.amip import (
    draw_block_layout,
    goal_for,
    goal_influence,
    goal_rows,
    linear_paths,
    metric_block_sums,
)
from bayesij.array.amip_candidates import CandidateSums, DenseRows, RankingRows
from bayesij.array.amip_noise import bootstrap_counts, replicates_from_counts

N_CHAINS, N_DRAWS, N_UNITS, BLOCK = 4, 250, 2400, 300


@pytest.fixture(scope="module")
def regression():
    """A t(3)-noise regression's slope and sd posterior draws (normal approximation) and
    its units' log-likelihood under a normal model: heavy-tailed units whose influences
    stand out of the Monte Carlo noise, and many of similar size that do not."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=N_UNITS)
    y = 0.05 * x + rng.standard_t(3, size=N_UNITS)
    slope = 0.05 + 0.02 * rng.standard_normal((N_CHAINS, N_DRAWS))
    sigma = np.exp(0.3 + 0.015 * rng.standard_normal((N_CHAINS, N_DRAWS)))
    resid = y - slope[..., None] * x
    log_lik = -0.5 * (resid / sigma[..., None]) ** 2 - np.log(sigma[..., None])
    return [slope, sigma], log_lik


def _goals(fs):
    targets = [(0, "sign"), (0, "significance"), (1, 0.02), (1, "sign_and_significance")]
    return [fs[q] for q, _ in targets], [goal_for(fs[q], t, 1.96) for q, t in targets]


def _restricted(scores, goals, k_max):
    """CandidateSums fed block by block, as a lazy pass feeds it."""
    sizes, chains = draw_block_layout(N_CHAINS, N_DRAWS)
    candidates = CandidateSums(goals, k_max, bootstrap_counts(sizes, chains), sizes)
    for start in range(0, N_UNITS, BLOCK):
        part = slice(start, start + BLOCK)
        candidates.offer(
            start,
            scores._replace(
                psi=scores.psi[:, part],
                mcse=scores.mcse[:, part],
                block_sums=scores.block_sums[:, :, part],
            ),
        )
    units, sums = candidates.result()
    return scores._replace(block_sums=sums, block_units=units)


@pytest.mark.parametrize("k_max", [40, 240, N_UNITS])
def test_every_unit_a_replicate_can_need_is_kept(regression, k_max):
    fs, log_lik = regression
    fs, goals = _goals(fs)
    scores = goal_influence(log_lik, fs, goals, with_half=False)["all"]
    restricted = _restricted(scores, goals, k_max)
    sizes, chains = draw_block_layout(N_CHAINS, N_DRAWS)
    counts = bootstrap_counts(sizes, chains)
    for k, (full, kept) in enumerate(
        zip(goal_rows(scores, goals), goal_rows(restricted, goals), strict=True)
    ):
        direction = goals[k].direction
        sums = metric_block_sums(full.block_sums, goals[k])
        gains = -direction * replicates_from_counts(counts, sums, sizes)  # (R, U)
        # Brute force: each replicate's k_max largest positive gains, and the ranking's.
        needed = set()
        for row in gains:
            top = np.argsort(-row, kind="stable")[:k_max]
            needed.update(top[row[top] > 0].tolist())
        gain = -direction * full.psi[0]
        ranking = np.argsort(-gain, kind="stable")[:k_max]
        needed.update(ranking[gain[ranking] > 0].tolist())
        units = kept.block_units
        assert needed <= set(units.tolist())
        # Exactly those: each replicate's gains at or above its k_max-th largest (positive
        # ones), and the ranking's first k_max (ties at the k_max-th kept).
        kth_gains = np.sort(gains, axis=1)[:, -k_max : -k_max + 1]
        positive = np.sort(gain[gain > 0])
        kth = positive[-k_max] if positive.size >= k_max else 0.0
        exact = np.any((gains > 0) & (gains >= kth_gains), axis=0) | ((gain > 0) & (gain >= kth))
        np.testing.assert_array_equal(units, np.flatnonzero(exact))
        assert np.all(np.diff(units) > 0)
        if k_max < N_UNITS // 4:
            assert units.size < N_UNITS // 2  # most units let go
        np.testing.assert_array_equal(kept.block_sums, full.block_sums[:, :, units])


def _first_ranked(scores, goals, k_max):
    """RankingRows fed block by block: each goal's (units, psi, mcse)."""
    ranked = RankingRows(goals, k_max)
    for start in range(0, N_UNITS, BLOCK):
        part = slice(start, start + BLOCK)
        ranked.offer(start, scores._replace(psi=scores.psi[:, part], mcse=scores.mcse[:, part]))
    return ranked.result()


@pytest.mark.parametrize("k_max", [40, 240])
def test_restricted_answers_equal_those_of_every_unit(regression, k_max):
    fs, log_lik = regression
    fs, goals = _goals(fs)
    scores = goal_influence(log_lik, fs, goals, with_half=True)
    restricted = _restricted(scores["all"], goals, k_max)
    ranked = _first_ranked(scores["all"], goals, k_max)
    dense = DenseRows(ranked, restricted.block_units, restricted.block_sums, N_UNITS)
    halves = goal_rows(scores["half"], goals)
    kept_halves = _first_ranked(scores["half"], goals, k_max)
    answers = set()
    for k, (f, goal, full, kept, half, (units, psi, mcse)) in enumerate(
        zip(
            fs,
            goals,
            goal_rows(scores["all"], goals),
            [dense[g] for g in range(len(dense))],
            halves,
            kept_halves,
            strict=True,
        )
    ):
        assert np.count_nonzero(kept.psi[0]) <= k_max + 1  # the ranking's rows only
        rank_units = ranked[k][0]
        for name in ("psi", "mcse"):  # as every unit's there, 0 elsewhere
            ours_rows, full_rows = getattr(kept, name), getattr(full, name)
            np.testing.assert_array_equal(ours_rows[:, rank_units], full_rows[:, rank_units])
            assert not np.delete(ours_rows, rank_units, axis=1).any()
        assert units.size < N_UNITS // 4  # the first half's ranking: its first k_max kept
        first = half._replace(psi=psi, mcse=mcse)
        ours = linear_paths(f, goal, kept, first, k_max, half_units=units)
        theirs = linear_paths(f, goal, full, half, k_max)
        np.testing.assert_array_equal(ours.path.order, theirs.path.order)
        assert ours.chosen is not None and theirs.chosen is not None
        np.testing.assert_array_equal(ours.chosen.order, theirs.chosen.order)
        np.testing.assert_allclose(ours.chosen.change, theirs.chosen.change, rtol=1e-12)
        for mine, exact in zip(ours.answer, theirs.answer, strict=True):
            if isinstance(exact, str):
                assert mine == exact
            else:
                np.testing.assert_allclose(mine, exact, rtol=1e-12)
        answers.add(theirs.answer.answer)
    # Reached and not-reached answers both (a replicate falling short re-selects its
    # largest gains: the units only the restriction's criterion keeps).
    assert "reached" in answers and answers - {"reached"}


def test_a_ranking_unit_missing_from_the_sums_is_refused(regression):
    fs, log_lik = regression
    fs, goals = _goals(fs)
    scores = goal_influence(log_lik, fs, goals, with_half=False)["all"]
    restricted = _restricted(scores, goals, 40)
    full, kept = goal_rows(scores, goals)[0], goal_rows(restricted, goals)[0]
    first = np.argmax(-goals[0].direction * full.psi[0])  # the ranking's first unit
    left = kept.block_units != first
    short = kept._replace(
        block_sums=kept.block_sums[:, :, left], block_units=kept.block_units[left]
    )
    with pytest.raises(ValueError, match="units: the block sums lack"):
        linear_paths(fs[0], goals[0], short, None, 40)
    assert full.block_units is None


def test_the_ranking_is_kept_whatever_its_replicates_say(regression):
    """A unit whose point gain ranks it first is kept even when no replicate's gain would
    (the point estimate is not one of the replicates)."""
    fs, log_lik = regression
    fs, goals = _goals(fs)
    scores = goal_influence(log_lik, fs[:1], goals[:1], with_half=False)["all"]
    psi = scores.psi.copy()
    gain = -goals[0].direction * psi[0]
    last = np.argsort(-gain, kind="stable")[39]
    psi[0, 7] = psi[0, last]  # tied with the ranking's last unit
    sums = scores.block_sums.copy()
    sums[:, 0, 7] = 0.0  # and no gain in any replicate
    restricted = _restricted(scores._replace(psi=psi, block_sums=sums), goals[:1], 40)
    assert 7 in restricted.block_units[0] and last in restricted.block_units[0]


def test_blocks_out_of_order_are_refused(regression):
    fs, log_lik = regression
    fs, goals = _goals(fs)
    scores = goal_influence(log_lik[..., :20], fs[:1], goals[:1], with_half=False)["all"]
    sizes, chains = draw_block_layout(N_CHAINS, N_DRAWS)
    candidates = CandidateSums(goals[:1], 5, bootstrap_counts(sizes, chains), sizes)
    candidates.offer(100, scores)
    with pytest.raises(ValueError, match=r"start: found 110, expected at least 120"):
        candidates.offer(110, scores)


def test_impossible_units_count_as_the_bootstrap_counts_them(regression):
    """Units with -inf at some draw (NaN influence and block sums) have no gain in any
    replicate (the bootstrap takes their sums as 0): they change no threshold."""
    fs, log_lik = regression
    fs, goals = _goals(fs)
    scores = goal_influence(log_lik, fs, goals, with_half=False)["all"]
    impossible = np.arange(0, N_UNITS, 7)
    psi, sums = scores.psi.copy(), scores.block_sums.copy()
    psi[:, impossible], sums[:, :, impossible] = np.nan, np.nan
    with_nan = _restricted(scores._replace(psi=psi, block_sums=sums), goals, 240)
    psi[:, impossible], sums[:, :, impossible] = 0.0, 0.0
    with_zero = _restricted(scores._replace(psi=psi, block_sums=sums), goals, 240)
    for ours, theirs in zip(with_nan.block_units, with_zero.block_units, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_what_is_kept_stays_near_what_is_needed(regression):
    """Pruned whenever a quarter of k_max more units are kept: never much more than the
    units the final thresholds keep (pruned only when they doubled, 1.5-1.9 times)."""
    fs, log_lik = regression
    fs, goals = _goals(fs)
    scores = goal_influence(log_lik, fs, goals, with_half=False)["all"]
    sizes, chains = draw_block_layout(N_CHAINS, N_DRAWS)
    k_max, block = 240, 50
    candidates = CandidateSums(goals, k_max, bootstrap_counts(sizes, chains), sizes)
    most = np.zeros(len(goals), dtype=int)
    for start in range(0, N_UNITS, block):
        part = slice(start, start + block)
        candidates.offer(
            start,
            scores._replace(psi=scores.psi[:, part], block_sums=scores.block_sums[:, :, part]),
        )
        most = np.maximum(most, candidates._kept._count)
    for k in range(len(goals)):  # what the final thresholds keep, before the exact cut
        candidates._kept.prune(k)
    final = np.array(candidates._kept._count)
    assert np.all(final > k_max)  # more candidates than the ranking
    # The thresholds of the units seen so far are lower than the final ones: some drift.
    assert np.all(most <= 1.2 * final + k_max // 4 + block)
