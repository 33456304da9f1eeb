"""Whether each observation's log-likelihood moves with one level of a variable, on models
whose posteriors are exact: a hierarchy's group effects do, a regression's coefficients
and draws the log-likelihood does not depend on do not."""

import numpy as np
import pytest

from bayesij.array import locality
from bayesij.array.locality import MIN_LEVELS, one_level_each
from conjugate import ConjugateNormal, hierarchical_normal


def _each(levels, columns):
    """:func:`one_level_each` of draws laid out (S, L, E), in one chunk."""
    return one_level_each([levels], columns)


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


def test_levels_read_a_chunk_at_a_time_give_the_same_answer(monkeypatch):
    """The levels come in chunks of at most CHUNK_BYTES of draws (one level each here), in
    any order: the same answers as in one chunk."""
    theta, log_lik, _ = _hierarchy()
    alpha = theta[:, 1:, None]
    monkeypatch.setattr(locality, "CHUNK_BYTES", 1)
    parts = locality.level_chunks(12, 1, 4000)
    assert len(parts) == 12 and parts[-1] == slice(11, 12)
    assert one_level_each((alpha[:, part] for part in parts), log_lik[:, :64])
    shuffled = alpha[:, np.random.default_rng(8).permutation(12)]
    assert one_level_each((shuffled[:, part] for part in parts), log_lik[:, :64])
    noise = np.random.default_rng(9).normal(size=(4000, 12, 1))
    assert not one_level_each((noise[:, part] for part in parts), log_lik[:, :64])
    assert not one_level_each([alpha[:, :1]], log_lik[:, :64])  # one level in all
    monkeypatch.undo()
    assert locality.level_chunks(12, 1, 4000) == [slice(0, 12)]


def _bernoulli_log_lik(eta, y):
    """log p(y | logit^-1(eta)), (S, n)."""
    return y * eta - np.logaddexp(0.0, eta)


def test_a_logistic_hierarchy_s_effects_are_found_and_its_coefficients_are_not():
    """Logistic links: varying intercepts of 12 groups of 20 Bernoulli outcomes (draws of
    each alpha_g around its group's logit with the Laplace sd, a shared mu shifting them
    all) move one observation each; 12 coefficients of a dense logistic regression do not."""
    rng = np.random.default_rng(10)
    groups = np.repeat(np.arange(12), 20)
    y = (rng.random(groups.size) < 1 / (1 + np.exp(-rng.normal(0, 1, 12)[groups]))).astype(float)
    rate = np.clip(np.bincount(groups, weights=y) / 20, 0.1, 0.9)
    centre, sd = np.log(rate / (1 - rate)), 1 / np.sqrt(20 * rate * (1 - rate))
    mu = rng.normal(0, 0.2, size=(4000, 1))
    alpha = centre + mu + sd * rng.normal(size=(4000, 12))
    order = rng.permutation(groups.size)[:64]
    log_lik = _bernoulli_log_lik(alpha[:, groups[order]], y[order])
    assert _each(alpha[:, :, None], log_lik)
    X = rng.normal(size=(200, 12))
    beta = rng.normal(0, 0.5, 12) + 0.1 * rng.normal(size=(4000, 12))
    outcome = (rng.random(200) < 1 / (1 + np.exp(-X @ beta[0]))).astype(float)
    dense = _bernoulli_log_lik(beta @ X[:64].T, outcome[:64])
    assert not _each(beta[:, :, None], dense)


def test_an_index_agrees_with_the_levels_the_log_likelihood_moves_with():
    """Exact draws of a hierarchy: the true group index agrees with the group effects; the
    same index shuffled, or shifted by one level (a 1-based index read as 0-based), does
    not; draws the log-likelihood does not depend on cannot tell."""
    from bayesij.array.locality import indexed_levels

    theta, log_lik, groups = _hierarchy(n_per_group=5)
    alpha, columns = theta[:, 1:, None], log_lik[:, :64]
    codes = np.asarray(groups)[:64]
    assert indexed_levels([alpha], columns, codes) is True
    shuffled = np.random.default_rng(2).permutation(codes)
    assert indexed_levels([alpha], columns, shuffled) is False
    assert indexed_levels([alpha], columns, (codes + 1) % alpha.shape[1]) is False
    noise = np.random.default_rng(3).normal(size=alpha.shape)
    assert indexed_levels([noise], columns, codes) is None


def test_coefficients_move_each_observation_with_several_levels_and_group_effects_do_not():
    """Three coefficients of a normal regression (every observation's log-likelihood moves
    with all three): several levels each. Group effects with little pooling (each
    observation with its own group's): not; nor draws the log-likelihood ignores."""
    from bayesij.array.locality import several_levels_each

    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    y = X @ [0.5, -0.3, 0.2] + rng.normal(size=64)
    beta = rng.normal([0.5, -0.3, 0.2], 0.07, size=(4000, 3))
    log_lik = -0.5 * (y - beta @ X.T) ** 2
    assert several_levels_each([beta[:, :, None]], log_lik)
    assert not _each(beta[:, :, None], log_lik)
    groups = np.repeat(np.arange(8), 8)
    alpha = rng.normal(size=8) + 0.3 * rng.normal(size=(4000, 8))
    grouped = -0.5 * (rng.normal(size=64) + alpha[:, groups].mean(axis=0) - alpha[:, groups]) ** 2
    assert not several_levels_each([alpha[:, :, None]], grouped)
    assert _each(alpha[:, :, None], grouped)
    assert not several_levels_each([rng.normal(size=(4000, 3, 1))], log_lik)
