"""WAIC's per-observation terms against their definitions, computed here with plain NumPy
and SciPy on few draws (where a divisor n - 1 instead of n is a 10 % error): the compiled
kernel's rows and the NumPy rows it leaves (log-likelihood ranges above 700, impossible
observations) alike. References: Watanabe (2010), JMLR 11, Remark 6 and Theorem 1."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesij.array import waic as info

N_DRAWS = 9  # few draws: every divisor shows


def _definitions(column: np.ndarray, beta: float) -> np.ndarray:
    """lppd, mean, central moments 2-4 (divisor n) and the CV term of one column."""
    n = column.size
    mean = column.sum() / n
    central = [((column - mean) ** k).sum() / n for k in (2, 3, 4)]
    lppd = logsumexp(column) - np.log(n)
    cv = (logsumexp(-beta * column) - np.log(n)) - (logsumexp((1 - beta) * column) - np.log(n))
    return np.array([lppd, mean, *central, cv])


@pytest.fixture(scope="module")
def matrix():
    rng = np.random.default_rng(3)
    values = rng.normal(-2.0, 1.5, size=(N_DRAWS, 40)) + rng.standard_t(3, size=(N_DRAWS, 40))
    values[:, 5] *= 400  # a range above 700: the NumPy rows
    return values


@pytest.mark.parametrize("beta", [1.0, 0.7])
def test_moments_and_cv_term_are_their_definitions(matrix, beta):
    moments, cv = info.waic_terms(matrix, beta)
    ours = np.vstack([moments.lppd, moments.mean, *moments[2:5], cv])
    expected = np.column_stack([_definitions(matrix[:, n], beta) for n in range(40)])
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)
    assert moments.n_draws == N_DRAWS
    parts = info.waic_parts(matrix, beta)
    np.testing.assert_array_equal(parts.central4, moments.central4)
    np.testing.assert_array_equal(parts.cv_term, cv)


def test_variance_divisor_and_the_functional_cumulants(matrix):
    moments, _ = info.waic_terms(matrix)
    np.testing.assert_allclose(moments.variance(0), matrix.var(axis=0), rtol=1e-12)
    np.testing.assert_allclose(moments.variance(1), matrix.var(axis=0, ddof=1), rtol=1e-12)
    y = info.functional_cumulants(moments)
    central = matrix - matrix.mean(axis=0)
    expected = [
        matrix.mean(),
        (central**2).mean(),
        (central**3).mean(),
        ((central**4).mean(axis=0) - 3 * (central**2).mean(axis=0) ** 2).mean(),
    ]
    np.testing.assert_allclose(y, expected, rtol=1e-12)


def test_an_impossible_observation_has_infinite_moments():
    with np.errstate(divide="ignore"):
        column = np.log(np.array([0.5, 0.2, 0.0, 0.3, 0.1, 0.4]))[:, None]  # -inf at one draw
    moments, cv = info.waic_terms(np.hstack([column, np.zeros((6, 1))]))
    assert moments.lppd[0] == pytest.approx(np.log(1.5 / 6), rel=1e-14)
    assert moments.central2[0] == np.inf and moments.central4[0] == np.inf
    assert cv[0] == np.inf and cv[1] == 0.0


def test_log_mean_exp_and_the_predicted_gap(matrix):
    for alpha in (-1.0, 0.0, 0.5, 2.0):
        expected = logsumexp(alpha * matrix, axis=0) - np.log(N_DRAWS)
        np.testing.assert_allclose(info.log_mean_exp(matrix, alpha), expected, rtol=1e-12)
    cumulants = np.array([0.1, 0.2, 0.3, 0.4])
    assert info.predicted_cv_gap(cumulants, 1.0) == pytest.approx(0.4 / 12, rel=1e-15)
    assert info.predicted_cv_gap(cumulants, 0.5) == pytest.approx(0.125 * 0.3, rel=1e-15)


def test_log_lik_moments_checks_its_input_unless_told_not_to(matrix):
    """log_lik_moments is the moments of waic_terms (the tempering does not touch them)."""
    moments = info.log_lik_moments(matrix)
    np.testing.assert_array_equal(moments.central4, info.waic_terms(matrix, 0.3)[0].central4)
    broken = matrix.copy()
    broken[2, 4] = np.nan
    with pytest.raises(ValueError, match=r"^log_lik: found 1 NaN value"):
        info.log_lik_moments(broken)
    with pytest.raises(ValueError, match=r"^log_lik: found 1 NaN value"):
        info.waic_parts(broken)
