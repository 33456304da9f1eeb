"""The linearity diagnostic: near zero where E_w[f] is linear, large where an exact refit shows
the IJ prediction is off; thresholds of the verdicts checked against exact errors."""

import numpy as np
import pytest

import bayesij
from conjugate import (
    ConjugateNormal,
    exact_influence,
    heteroskedastic_regression,
    hierarchical_normal,
)


def _posterior(model, rng, names=None):
    theta = model.draws(4000, rng)
    return bayesij.from_arrays(
        theta.reshape(4, 1000, -1), model.log_lik(theta).reshape(4, 1000, -1), quantity_names=names
    )


def _hierarchical(rng, tau, n_per_group, n_groups=12):
    model, groups = hierarchical_normal(n_groups, n_per_group, np.random.default_rng(2), tau=tau)
    names = ["mu"] + [f"alpha[{g + 1}]" for g in range(n_groups)]
    return model, groups, _posterior(model, rng, names)


def _exact_change(model, weights):
    return model.posterior(weights)[0] - model.posterior()[0]


def test_linear_model_is_reliable_and_both_predictions_match_exact_values(rng):
    X, y = heteroskedastic_regression(1000, np.random.default_rng(1))
    model = ConjugateNormal(X, y)
    result = bayesij.linearity(_posterior(model, rng))
    assert (result.index < 0.05).all()
    assert (result.verdict == "reliable").all() and result.n_excluded == 0
    # delta_lin is minus the exact derivative, delta_is the exact leave-one-out change
    # (closed form), each up to Monte Carlo error (checked on the 20 largest changes).
    exact_derivative = -exact_influence(model)
    scale = np.abs(exact_derivative).max()
    np.testing.assert_allclose(result.delta_lin.to_numpy(), exact_derivative, atol=0.1 * scale)
    for unit in np.argsort(-np.abs(exact_derivative[1]))[:20]:
        weights = np.ones(model.n_obs)
        weights[unit] = 0
        exact = _exact_change(model, weights)
        np.testing.assert_allclose(result.delta_is[unit].to_numpy(), exact, atol=0.1 * scale)


def test_leaving_out_groups_of_a_hierarchical_model_is_flagged_and_refits_confirm(rng):
    """Intercepts of small groups do not concentrate: removing a group moves its intercept
    far more than -psi says. The exact refit (closed form) confirms for the flagged units."""
    model, groups, post = _hierarchical(rng, tau=0.5, n_per_group=3)
    result = bayesij.linearity(post, groups=groups)
    assert (result.index.drop("mu") > 0.3).all()
    assert (result.verdict == "unreliable").all()
    flagged = {unit for q in result.index.index for unit in result.refit_first(q, 3)}
    assert flagged and flagged <= set(range(12))
    for unit in flagged:  # exact refits without each flagged group: the IJ is far off
        exact = _exact_change(model, (groups != unit).astype(float))
        linear = result.delta_lin[unit].to_numpy()
        assert np.linalg.norm(linear - exact) > 0.3 * np.linalg.norm(exact)
    psi = exact_influence(model)  # the IJ without Monte Carlo error misses 48 % ...
    errors = []
    for g in range(12):  # ... of every group's own intercept change; the draws' IJ too
        exact = _exact_change(model, (groups != g).astype(float))[1 + g]
        assert abs(-psi[1 + g, groups == g].sum() - exact) > 0.4 * abs(exact)
        errors.append(abs(result.delta_lin.loc[f"alpha[{g + 1}]", g] - exact) / abs(exact))
    assert np.median(errors) > 0.3
    text = str(bayesij.ij_covariance(post, groups=groups, check_linearity=True))
    assert "Do not trust the IJ for alpha[1]: the linear approximation is unreliable" in text


@pytest.mark.parametrize("tau, n_per_group, band", [(0.3, 10, "reliable"), (0.5, 5, "doubtful")])
def test_index_tracks_the_exact_error_of_the_ij(rng, tau, n_per_group, band):
    """Observations as units: the index matches the median relative error of the IJ
    prediction (exact refits in closed form) within a factor of two, and the verdict's band
    follows it: <= 0.1 reliable, 0.1-0.3 doubtful."""
    model, groups, post = _hierarchical(rng, tau, n_per_group)
    result = bayesij.linearity(post)
    errors = []
    for n, g in enumerate(groups):
        weights = np.ones(groups.size)
        weights[n] = 0
        exact = _exact_change(model, weights)[1 + g]
        errors.append(abs(result.delta_lin.iloc[1 + g, n] - exact) / abs(exact))
    median_error = np.median(errors)
    median_index = result.index.drop("mu").median()
    assert 0.5 < median_index / median_error < 2
    assert (result.verdict.drop("mu") == band).mean() > 0.5


def test_table_and_text(rng):
    _, groups, post = _hierarchical(rng, tau=0.5, n_per_group=3)
    result = bayesij.linearity(post, groups=groups, quantities=["mu", "alpha[1]"])
    table = result.table()
    assert list(table.columns) == ["nonlinearity_index", "verdict", "units_excluded", "refit_first"]
    assert list(table.index) == ["mu", "alpha[1]"]
    assert "Linearity of leave-one-unit-out changes over 12 units" in str(result)
    ij = bayesij.ij_covariance(post, groups=groups)
    assert ij.linearity is None and "Do not trust" not in str(ij)


def test_bad_input(rng):
    X, y = heteroskedastic_regression(50, np.random.default_rng(1))
    post = _posterior(ConjugateNormal(X, y), rng)
    with pytest.raises(ValueError, match=r"data: found no posterior draws of quantities"):
        bayesij.linearity(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"groups: found shape \(3,\); expected one label"):
        bayesij.linearity(post, groups=[1, 2, 3])
    with pytest.raises(ValueError, match=r"quantities: found the unknown name 'tau'"):
        bayesij.linearity(post, quantities=["tau"])
    log_lik = post.log_lik.values.copy()
    log_lik[0, 0, 3] = -np.inf
    impossible = bayesij.from_arrays(post.quantities.values, log_lik)
    with pytest.raises(ValueError, match=r"log_lik: found -inf values; expected finite"):
        bayesij.linearity(impossible)
