"""Leave-future-out's bookkeeping against exact arithmetic: the origins and the cumulative
sums from which every block of the future is summed (Bürkner, Gabry & Vehtari 2020)."""

import numpy as np
import pytest

from bayesij.array.lfo import cumulative_log_lik, lfo_origins


def test_origins_run_from_min_train_to_the_last_full_horizon():
    np.testing.assert_array_equal(lfo_origins(10, 6, 1), [6, 7, 8, 9])
    np.testing.assert_array_equal(lfo_origins(10, 6, 3), [6, 7])
    np.testing.assert_array_equal(lfo_origins(10, 7, 3), [7])
    with pytest.raises(ValueError, match=r"^min_train: found 8 with horizon 3 for 10"):
        lfo_origins(10, 8, 3)
    with pytest.raises(ValueError, match=r"^horizon: "):
        lfo_origins(10, 5, 0)


def test_cumulative_sums_give_every_block():
    rng = np.random.default_rng(0)
    log_lik = rng.normal(size=(5, 9))
    cumulative = cumulative_log_lik(log_lik)
    assert cumulative.shape == (5, 10)
    for a in range(9):
        for b in range(a, 10):
            np.testing.assert_allclose(
                cumulative[:, b] - cumulative[:, a], log_lik[:, a:b].sum(axis=1), atol=1e-12
            )
