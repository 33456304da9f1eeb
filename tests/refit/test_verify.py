"""Verifying an influential set with a refit: the refit without the set (a conjugate model,
exact draws) gives the quantity's mean and sd, the metric's refit value ``mean + s z sd``
and change, and whether the target is really reached; the closed form without the set is
the reference, within the Monte Carlo error of the refit's draws."""

import numpy as np
import pytest

import bayesij
from bayesij import refit
from conjugate import small_regression


def test_the_refit_without_the_set_is_the_closed_form():
    X, y = small_regression(80, seed=3)
    y[:3] -= 6.0  # three points that pull the slope down
    backend = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=4000, seed=4)
    post = backend.fit(np.ones(80))
    result = bayesij.amip(post, "beta[2]", 0.1, method="linear")
    verified = refit.verify(result, backend, executor="sequential", progress=False)
    weights = np.ones(80)
    weights[np.asarray(result.drop_ids)] = 0
    mean, cov = backend.model.posterior(weights)
    check = verified.verification
    assert check["mean"] == pytest.approx(mean[1], abs=4 * np.sqrt(cov[1, 1] / 4000))
    assert check["sd"] == pytest.approx(np.sqrt(cov[1, 1]), rel=0.05)
    assert check["value"] == check["mean"]  # the target is a change of the mean
    assert check["change"] == pytest.approx(check["mean"] - result.original_value)
    assert check["reached"] == (check["change"] >= 0.1)


def test_bad_input_is_named():
    X, y = small_regression(20, seed=1)
    backend = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=500, seed=1)
    with pytest.raises(ValueError, match=r"^result: found a dict; expected an AmipResult"):
        refit.verify({}, backend)
    other = refit.ConjugateNormalBackend(X[:10], y[:10], sigma=1.0, draws=500, seed=1)
    result = bayesij.amip(backend.fit(np.ones(20)), "beta[2]", "sign", method="linear")
    with pytest.raises(ValueError, match=r"^backend: found a model of 10 observations"):
        refit.verify(result, other)
