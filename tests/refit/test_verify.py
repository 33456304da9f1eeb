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


class _Recording:
    """A backend that records the weights of each refit and delegates the fit."""

    def __init__(self, backend):
        self.backend, self.weights = backend, []
        self.n_obs = backend.n_obs

    def fit(self, weights):
        self.weights.append(np.asarray(weights, dtype=float))
        return self.backend.fit(weights)


def test_a_set_of_groups_is_refitted_without_their_observations():
    """An audit's result over groups' integrated terms (20 groups of 4 observations; with
    no group effect a group's term is its observations' sum): the refit given the fit
    leaves out exactly the observations of the set's groups, its value the closed form's
    without them; without the fit, or with a fit of other groups, the argument is named."""
    X, y = small_regression(80, seed=3)
    y[:8] -= 4.0  # the first two groups pull the slope down
    labels = np.array([f"school{g}" for g in np.repeat(np.arange(20), 4)])
    conjugate = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=4000, seed=4)
    post = conjugate.fit(np.ones(80))
    values = post.log_lik.values
    grouped = bayesij.from_arrays(
        post.quantities.values, values, quantity_names=post.quantity_names, groups=labels
    )
    terms = values.reshape(*values.shape[:2], 20, 4).sum(axis=-1)
    audit = bayesij.audit(
        grouped, marginal_log_lik=terms, settings={"targets": (0.1,), "method": "linear"}
    )
    result = audit.amip[("beta[2]", 0.1)]
    assert result.kept.size == 20 and result.n_drop > 0
    if result.answer == "reached":  # the verdict's advice names the fit
        assert "bayesij.refit.verify(..., fit=)" in " ".join(audit.summary())
    backend = _Recording(conjugate)
    verified = refit.verify(result, backend, fit=grouped, progress=False)
    [weights] = backend.weights
    expected = (~np.isin(labels, [str(i) for i in result.drop_ids])).astype(float)
    np.testing.assert_array_equal(weights, expected)
    mean, cov = conjugate.model.posterior(expected)
    assert verified.verification["mean"] == pytest.approx(
        mean[1], abs=4 * np.sqrt(cov[1, 1] / 4000)
    )
    with pytest.raises(ValueError, match=r"^fit: found None for an AMIP result over 20 groups"):
        refit.verify(result, backend)
    other = bayesij.from_arrays(post.quantities.values, values, groups=np.repeat(np.arange(40), 2))
    with pytest.raises(ValueError, match=r"^fit: found a fit of 40 "):
        refit.verify(result, backend, fit=other)
