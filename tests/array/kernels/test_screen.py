"""The compiled candidates of a screened step against NumPy's partition of the lower bounds
(the rule of :meth:`bayesij.array.amip_screen.ScreenedInfluence.top`): the units not
excluded whose upper bound reaches the ``m``-th largest lower bound and zero."""

import numpy as np
import pytest

from bayesij.array.kernels.screen import column_moments, screened_candidates


def _reference(approximate, slack, scale, excluded, direction, m):
    gain = -direction * approximate
    bound = scale * slack
    lower, upper = gain - bound, gain + bound
    eligible = np.flatnonzero(~excluded)
    threshold = 0.0
    if 0 < m <= eligible.size:
        threshold = max(threshold, np.sort(lower[eligible])[::-1][m - 1])
    return eligible[upper[eligible] >= threshold]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("m", [0, 1, 2, 7, 40, 299, 300, 500])
def test_the_candidates_are_those_of_the_partition(seed, direction, m):
    rng = np.random.default_rng(seed)
    n = 300
    approximate = rng.normal(size=n) * 0.01
    approximate[:20] = np.round(approximate[:20], 3)  # ties among the lower bounds
    slack = rng.uniform(0.0, 0.02, size=n)
    slack[20:40] = 0.0
    excluded = rng.uniform(size=n) < 0.1
    got = screened_candidates(approximate, slack, 0.3, excluded, direction, m)
    expected = _reference(approximate, slack, 0.3, excluded, direction, m)
    np.testing.assert_array_equal(got, expected)
    assert not excluded[got].any()


def test_every_unit_excluded_or_none_positive():
    approximate = np.linspace(-1.0, 1.0, 11)
    excluded = np.ones(11, dtype=bool)
    assert screened_candidates(approximate, np.zeros(11), 1.0, excluded, 1, 3).size == 0
    # every gain negative and exact: nothing can be among the largest positive gains
    none = screened_candidates(np.abs(approximate) + 0.1, np.zeros(11), 1.0, ~excluded, 1, 3)
    assert none.size == 0


def test_a_nan_bound_is_left_to_numpy():
    slack = np.full(5, 0.1)
    slack[2] = np.nan
    excluded = np.zeros(5, dtype=bool)
    assert screened_candidates(np.zeros(5), slack, 1.0, excluded, 1, 2) is None
    excluded[2] = True  # an excluded unit's bound is never read
    assert screened_candidates(np.zeros(5), slack, 1.0, excluded, 1, 2) is not None


@pytest.mark.parametrize("strided", [False, True])
def test_column_moments_are_numpy_s_centred_squares_and_prefix_norms(strided):
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(400, 30)) * 0.1 - 5.0  # a mean far from the spread
    matrix[17, 4] = np.nan
    matrix[3, 9] = -np.inf
    columns = matrix[:, ::2] if strided else matrix[:, :15]
    centred, norms = column_moments(columns, [400, 200, 1])
    with np.errstate(invalid="ignore"):
        expected = ((columns - columns.mean(axis=0)) ** 2).sum(axis=0)
    finite = np.isfinite(expected)
    assert not finite.all() and np.array_equal(np.isfinite(centred), finite)
    np.testing.assert_allclose(centred[finite], expected[finite], rtol=1e-12)
    for norm, n in zip(norms, (400, 200, 1), strict=True):
        with np.errstate(invalid="ignore"):
            reference = np.linalg.norm(columns[:n], axis=0)
        np.testing.assert_allclose(norm, reference, rtol=1e-12)
