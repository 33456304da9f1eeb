"""Flat Stan output columns split into quantities and the log-likelihood: sampler
diagnostics (``__``) left out, elements kept in their order, observation ids from the
log-likelihood's indices (integers, or ``'i,j'`` for a matrix), a missing variable named."""

import numpy as np
import pytest

from bayesij.adapters._stan_names import split_columns


def test_columns_split_into_quantities_and_log_lik():
    columns = ["lp__", "accept_stat__", "beta[1]", "beta[2]", "sigma", "ll[1]", "ll[2]", "ll[3]"]
    draws = np.arange(2 * 3 * 8, dtype=float).reshape(2, 3, 8)
    values, names, log_lik, obs = split_columns(draws, columns, "ll", None)
    assert names == ["beta[1]", "beta[2]", "sigma"] and obs == [1, 2, 3]
    np.testing.assert_array_equal(values, draws[:, :, 2:5])
    np.testing.assert_array_equal(log_lik, draws[:, :, 5:])
    values, names, _, _ = split_columns(draws, columns, "ll", ["sigma", "beta"])
    assert names == ["sigma", "beta[1]", "beta[2]"]
    np.testing.assert_array_equal(values, draws[:, :, [4, 2, 3]])
    matrix = split_columns(np.zeros((1, 2, 3)), ["mu", "ll[1,2]", "ll[2,1]"], "ll", None)
    assert matrix[3] == ["1,2", "2,1"]


def test_a_missing_log_likelihood_is_named_with_the_fix():
    with pytest.raises(ValueError, match=r"^log_lik: found no variable named 'll' among \['mu'\]"):
        split_columns(np.zeros((1, 2, 2)), ["lp__", "mu"], "ll", None)
