"""The kernels' vectorised exp and log against NumPy's (within 2 and 3 ulp)."""

import numpy as np
from numba import njit

from bayesij.array.kernels.fastmath import exp, log_positive


@njit
def _exp_loop(x):
    """The kernels' exp in a loop the compiler vectorises, as the kernels use it."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = exp(x[i])
    return out


def test_vectorised_exp_is_within_two_ulp():
    x = np.r_[np.linspace(-708, 0, 200001), -np.logspace(-300, 2.8, 5000), 0.0]
    ours = _exp_loop(x)
    np.testing.assert_array_max_ulp(ours, np.exp(x), maxulp=2)


def test_vectorised_log_is_within_three_ulp():
    rng = np.random.default_rng(2)
    z = np.r_[np.exp(rng.uniform(-700, 700, 100000)), rng.uniform(0.5, 2, 100000), 1.0, 2.0]
    out = np.empty_like(z)
    log_positive(z, out)
    near_one = np.abs(np.log(z)) < 1e-3  # ulps of a tiny log: compare absolutely there
    np.testing.assert_array_max_ulp(out[~near_one], np.log(z[~near_one]), maxulp=3)
    np.testing.assert_allclose(out[near_one], np.log(z[near_one]), rtol=0, atol=2.3e-16)
