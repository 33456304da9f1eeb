"""The columns kept for the linear AMIP sets while a lazy log-likelihood is read: each
ranking's first units over all blocks, whatever block they came from."""

from types import SimpleNamespace

import numpy as np

from bayesij.array.amip import set_sums
from bayesij.array.amip_columns import KeptColumns, kept_capacity
from bayesij.array.numeric import top_positive


def _goal(direction, parts):
    return SimpleNamespace(direction=direction, parts=parts)


def test_each_ranking_keeps_its_first_units_over_all_blocks():
    rng = np.random.default_rng(3)
    log_lik = rng.normal(size=(2, 30, 90))
    goals = [_goal(-1, 1), _goal(1, 3)]  # rows: goal 0 -> 0; goal 1 -> 1, 2, 3
    psi = {"all": rng.normal(size=(4, 90)), "half": rng.normal(size=(4, 90))}
    kept = KeptColumns(goals, capacity=7)
    for start in range(0, 90, 25):  # blocks of 25, 25, 25, 15
        stop = min(start + 25, 90)
        kept.offer(
            log_lik[:, :, start:stop],
            start,
            {name: SimpleNamespace(psi=rows[:, start:stop]) for name, rows in psi.items()},
        )
    wanted = set()
    for rows in psi.values():
        for row, goal in ((0, goals[0]), (1, goals[1])):
            first = top_positive(-goal.direction * rows[row], 7)
            wanted.update(first.tolist())
            assert kept.holds(first)
    assert set(kept.columns) == wanted  # nothing else is held
    for unit, column in kept.columns.items():
        np.testing.assert_array_equal(column, log_lik[:, :, unit])
    # Sums of a set from the kept columns are the block's own, to the bit.
    units = np.array(sorted(wanted))
    inside = units[units < 25]
    sets = [inside[::-1], inside[:2]]
    np.testing.assert_array_equal(
        set_sums(kept.block(0, 25), sets, 0), set_sums(log_lik[:, :, :25], sets, 0)
    )
    assert not kept.holds(np.setdiff1d(np.arange(90), units)[:1])


def test_capacity_is_128_mib_over_the_goals_two_rankings():
    budget = 2 * 64 * 2**20
    assert kept_capacity(1, 4000) == budget // (2 * 8 * 4000)
    assert kept_capacity(21, 4000) == budget // (2 * 21 * 8 * 4000)
    assert kept_capacity(10_000, 4000) == 16


def test_large_sets_are_summed_by_one_product_as_gathered():
    # A set with many units in a block is summed by a product with its indicator (one read
    # for all such sets); equal to the gathered sums to rounding, and gathered wherever
    # -inf would meet a zero (the sum keeps its -inf, no NaN).
    from bayesij.array import amip

    rng = np.random.default_rng(4)
    log_lik = rng.normal(size=(2, 50, 4000))
    sets = [rng.choice(5000, 900, replace=False), np.arange(10), np.arange(3000, 4000)]

    def gathered(block, start):
        out = np.zeros((2, 50, len(sets)))
        for k, units in enumerate(sets):
            inside = units[(units >= start) & (units < start + block.shape[2])] - start
            out[:, :, k] = block[:, :, inside].sum(axis=2)
        return out

    for block, start in ((log_lik, 0), (log_lik[:, :, 1000:3500], 1000)):  # a view too
        np.testing.assert_allclose(
            set_sums(block, sets, start), gathered(block, start), rtol=1e-13, atol=1e-12
        )
        np.testing.assert_allclose(
            set_sums(block.astype(np.float32), sets, start),
            gathered(block.astype(np.float32).astype(float), start),
            rtol=1e-12,
            atol=1e-10,
        )
    impossible = log_lik.copy()
    impossible[0, 3, 3500] = -np.inf  # in the third set; not in the first (large) set
    first = set_sums(impossible, sets, 0)
    assert np.isneginf(first[0, 3, 2]) and np.isfinite(first[:, :, :2]).all()
    np.testing.assert_allclose(first[:, :, 0], gathered(impossible, 0)[:, :, 0], rtol=1e-13)
    assert 3500 not in sets[0]  # the first set's product met the -inf: gathered instead
    calls = []
    product = amip._indicator_sums
    amip._indicator_sums = lambda block, insides: (
        calls.append(len(insides)) or product(block, insides)
    )
    try:
        set_sums(log_lik, sets, 0)
    finally:
        amip._indicator_sums = product
    assert calls == [2]  # the two large sets in one product; the ten units gathered
