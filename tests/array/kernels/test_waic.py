"""The compiled WAIC rows against the NumPy rows of bayesij.array.waic.general_terms (the
kernel's reference), row by row, and the rows the kernel leaves."""

import numpy as np
import pytest

from bayesij.array.kernels.waic import fused_waic_terms
from bayesij.array.waic import general_terms


@pytest.mark.parametrize("beta", [1.0, 0.5, 1.7])
def test_fused_rows_equal_the_numpy_rows(beta):
    rng = np.random.default_rng(1)
    rows = rng.normal(-3, 2, size=(60, 17)) + rng.standard_t(2, size=(60, 17))
    rows[7] *= 500  # a range beyond 700: left to NumPy
    rows[9, 3] = -np.inf  # an impossible observation: left to NumPy
    terms, done = fused_waic_terms(np.ascontiguousarray(rows), beta)
    np.testing.assert_array_equal(done, (np.arange(60) != 7) & (np.arange(60) != 9))
    reference = general_terms(rows.T, beta)
    np.testing.assert_allclose(terms[:, done], reference[:, done], rtol=1e-12, atol=1e-13)
