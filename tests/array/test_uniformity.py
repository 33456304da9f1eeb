"""The pointwise uniformity tests' parts against exact mathematics: the Shapley values of
the mean game by enumerating coalitions, the order statistics' Beta law and the rank
counts' binomial and hypergeometric laws by simulation."""

import itertools
import math

import numpy as np
import pytest
from scipy.stats import beta

from bayesij.array.uniformity import (
    cauchy_combination,
    chain_rank_p_values,
    pointwise_p_values,
    shapley_of_mean,
)


def test_the_closed_form_shapley_values_are_the_enumerated_ones():
    """phi_i = sum over coalitions S without i of |S|! (n - |S| - 1)! / n! (v(S + i) - v(S))
    with v(S) the mean of the values in S (0 for the empty set)."""
    values = np.array([1.7, -0.4, 3.1, 0.2, -2.5])
    n = values.size

    def v(members):
        return float(np.mean(values[list(members)])) if members else 0.0

    enumerated = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            for members in itertools.combinations(others, size):
                weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
                enumerated[i] += weight * (v((*members, i)) - v(members))
    np.testing.assert_allclose(shapley_of_mean(values), enumerated, rtol=1e-12)
    assert shapley_of_mean(values).sum() == pytest.approx(values.mean())  # efficiency


def test_the_order_statistic_p_values_are_the_beta_laws():
    u = np.sort(np.random.default_rng(0).uniform(size=7))
    k = np.arange(1, 8)
    cdf = beta.cdf(u, k, 8 - k)
    np.testing.assert_allclose(pointwise_p_values(u, "pot_c"), 2 * np.minimum(cdf, 1 - cdf))


def test_pointwise_p_values_are_uniform_under_the_null():
    """Each order statistic's Beta test is exact and its rank test conservative: for
    uniform values, P(p <= 0.1) is 0.1 (at most 0.1) at every position, up to simulation
    error; the values' own test ("piet_c") is uniform over the values."""
    rng = np.random.default_rng(1)
    tolerance = 4 * np.sqrt(0.09 / 4000)
    samples = np.sort(rng.uniform(size=(4000, 20)), axis=1)
    for method in ("pot_c", "prit_c", "piet_c"):
        p = np.array([pointwise_p_values(row, method) for row in samples])
        share = (p <= 0.1).mean(axis=0)
        if method == "piet_c":
            assert (p <= 0.1).mean() == pytest.approx(0.1, abs=tolerance / 4)
        elif method == "prit_c":
            assert np.all(share <= 0.1 + tolerance)
        else:
            np.testing.assert_allclose(share, 0.1, atol=tolerance)


def test_the_cauchy_combination_of_one_p_value_is_that_p_value():
    for p in (0.01, 0.3, 0.7):
        combined, _ = cauchy_combination(np.array([p]), truncate=False)
        assert combined == pytest.approx(p, abs=1e-12)
    combined, _ = cauchy_combination(np.array([0.7, 0.9]), truncate=True)
    assert combined == 0.5  # every term truncated: a statistic of 0


def test_chain_rank_p_values_are_the_hypergeometric_mid_p_values_by_counting():
    """Two chains of 3 draws, ranks 1..6: a chain's count of ranks below z_j among the k_j
    pooled ranks below it has P(c) = C(3, c) C(3, k - c) / C(6, k); the mid-p value is
    P(X < c) + P(X = c) / 2, two-sided 2 min(mid, 1 - mid)."""
    ranks = np.array([[1, 2, 5], [3, 4, 6]]) / 6
    got = chain_rank_p_values(ranks)
    for j, z in enumerate(np.arange(1, 4) / 4):
        k = int(np.floor(z * 6))
        for chain in range(2):
            c = int(np.sum(ranks[chain] <= z))
            pmf = [math.comb(3, x) * math.comb(3, k - x) / math.comb(6, k) for x in range(k + 1)]
            mid = sum(pmf[:c]) + pmf[c] / 2
            assert got[j, chain] == pytest.approx(2 * min(mid, 1 - mid), abs=1e-12)
