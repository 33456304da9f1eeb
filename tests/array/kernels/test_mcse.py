"""R loo's MCSE variances of log(1 + c q) against the direct NumPy formula."""

import numpy as np

from bayesij.array.kernels.mcse import log_variances
from bayesij.array.loo import _BLOM


def test_log_variances_equal_the_direct_formula():
    c = np.r_[np.linspace(0.05, 0.31, 60), [0.5, 1.0, 3.0, 30.0]]
    expected = []
    for value in c:
        z = 1 + value * _BLOM
        expected.append(np.log(z[z > 0]).var(ddof=1))
    np.testing.assert_allclose(log_variances(c, _BLOM), expected, rtol=1e-12)
