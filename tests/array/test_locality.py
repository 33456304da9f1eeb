"""Whether each observation's log-likelihood moves with one level of a variable, on models
whose posteriors are exact: a hierarchy's group effects do, a regression's coefficients
and draws the log-likelihood does not depend on do not."""

import numpy as np
import pytest

from bayesij.array import locality
from bayesij.array.locality import MIN_LEVELS, one_level_each
from conjugate import ConjugateNormal, hierarchical_normal


def _each(levels, columns):
    """:func:`one_level_each` of draws laid out (S, L, E)."""
    n_draws, n_levels, n_elements = levels.shape
    index = np.arange(n_levels * n_elements).reshape(n_levels, n_elements)
    return one_level_each(levels.reshape(n_draws, -1), index, columns)


def _hierarchy(n_groups=12, n_per_group=5, seed=0):
    model, groups = hierarchical_normal(n_groups, n_per_group, np.random.default_rng(seed))
    theta = model.draws(4000, np.random.default_rng(seed + 1))
    return theta, model.log_lik(theta), groups


def _regression(n_coef=12, n_obs=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_obs, n_coef))
    model = ConjugateNormal(X, X @ rng.normal(size=n_coef) + rng.normal(size=n_obs))
    beta = model.draws(4000, np.random.default_rng(seed + 1))
    return beta, model.log_lik(beta)


@pytest.mark.parametrize("per_group", [2, 5, 40])
def test_a_hierarchy_s_group_effects_move_one_observation_each(per_group):
    """Exact draws of (mu, alpha_1..12): each observation moves with its group's alpha
    (however strongly the groups are pooled), in any order of the observations; mu is
    not a vector of levels."""
    theta, log_lik, groups = _hierarchy(n_per_group=per_group)
    alpha = theta[:, 1:, None]
    assert _each(alpha, log_lik[:, :64])
    order = np.argsort(groups, kind="stable")  # the first observations all in group 0
    assert _each(alpha, log_lik[:, order[:64]])
    assert not _each(theta[:, :1, None], log_lik[:, :64])  # one level: no


def test_a_regression_s_coefficients_and_unrelated_draws_do_not():
    beta, log_lik = _regression()
    assert not _each(beta[:, :, None], log_lik[:, :64])
    noise = np.random.default_rng(3).normal(size=(4000, 30, 1))
    assert not _each(noise, log_lik[:, :64])
    theta, hierarchy, _ = _hierarchy()
    assert not _each(noise[:, :12], hierarchy[:, :64])


def test_a_level_of_several_elements_is_summed():
    """Varying intercepts and slopes (each group's two elements together) are one level
    per group; each element alone is also found, the pair split across levels is not."""
    rng = np.random.default_rng(4)
    n_groups, per = 12, 20
    groups = np.repeat(np.arange(n_groups), per)
    x = rng.normal(size=groups.size)
    X = np.zeros((groups.size, 2 * n_groups))
    X[np.arange(groups.size), 2 * groups], X[np.arange(groups.size), 2 * groups + 1] = 1.0, x
    model = ConjugateNormal(X, X @ rng.normal(size=2 * n_groups) + rng.normal(size=groups.size))
    beta = model.draws(4000, np.random.default_rng(5))
    log_lik = model.log_lik(beta)[:, rng.permutation(groups.size)[:64]]
    assert _each(beta.reshape(4000, n_groups, 2), log_lik)
    assert _each(beta[:, 0::2, None], log_lik)
    # Levels made of one group's intercept and the next group's slope: two levels each.
    mixed = np.stack([beta[:, 0::2], np.roll(beta[:, 1::2], 1, axis=1)], axis=2)
    assert not _each(mixed, log_lik)


def test_columns_that_are_not_finite_are_left_out():
    theta, log_lik, _ = _hierarchy()
    columns = log_lik[:, :64].copy()
    columns[5, :40] = -np.inf
    assert _each(theta[:, 1:, None], columns)  # 24 finite columns decide
    columns[5, :] = -np.inf
    assert not _each(theta[:, 1:, None], columns)
    assert MIN_LEVELS == 10


def test_levels_are_read_from_the_draws_a_chunk_at_a_time(monkeypatch):
    """The draws' columns are named by ``levels`` (in any order among other quantities)
    and standardised a chunk at a time: the same answer with one column a chunk."""
    theta, log_lik, _ = _hierarchy()
    rng = np.random.default_rng(8)
    others = rng.normal(size=(4000, 5))
    draws = np.column_stack([others, theta[:, ::-1]])  # alpha_12 .. alpha_1, mu last
    index = np.arange(5, 17).reshape(12, 1)
    assert one_level_each(draws, index, log_lik[:, :64])
    monkeypatch.setattr(locality, "_CHUNK_BYTES", 1)
    assert one_level_each(draws, index, log_lik[:, :64])
    assert not one_level_each(draws, np.arange(5).reshape(5, 1), log_lik[:, :64])
    shuffled = index[rng.permutation(12)]  # levels in another order: the same
    assert one_level_each(draws, shuffled, log_lik[:, :64])
