"""A normal hierarchy's group log-likelihoods with the group effect integrated out, against
the multivariate normal density computed directly (scipy)."""

import numpy as np
import pytest

from bayesij.array.hierarchy import normal_group_log_lik


def test_the_normal_group_log_lik_is_the_multivariate_normal_density():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(0)
    codes = np.array([0, 1, 1, 2, 2, 2])
    r = rng.normal(size=(2, 3, 6))
    tau, sigma = rng.uniform(0.5, 2, (2, 3)), rng.uniform(0.5, 2, (2, 3))
    ours = normal_group_log_lik(r, codes, tau, sigma)
    for c in range(2):
        for s in range(3):
            for g in range(3):
                n = int((codes == g).sum())
                cov = sigma[c, s] ** 2 * np.eye(n) + tau[c, s] ** 2
                expected = multivariate_normal(np.zeros(n), cov).logpdf(r[c, s, codes == g])
                np.testing.assert_allclose(ours[c, s, g], expected, rtol=1e-12)
    with pytest.raises(ValueError, match=r"^tau: found values that are not finite and positive"):
        normal_group_log_lik(r, codes, -1.0, 1.0)
