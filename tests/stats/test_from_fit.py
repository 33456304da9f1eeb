"""y and the posterior predictive draws read from the fit when not given, as arviz-stats
reads them (``observed_data`` and ``posterior_predictive`` under the log-likelihood's
name), with either ArviZ generation; the same numbers as when they are given."""

import warnings

import numpy as np
import pytest
import xarray as xr

import bayesij
from peers import from_dict


@pytest.fixture(scope="module")
def fit():
    rng = np.random.default_rng(4)
    n = 25
    y = rng.normal(1.0, 1.0, n)
    mu = rng.normal(y.mean(), 1 / np.sqrt(n), size=(2, 300))
    log_lik = -0.5 * (y - mu[..., None]) ** 2
    y_rep = mu[..., None] + rng.normal(size=(2, 300, n))
    groups = {
        "posterior": {"mu": mu},
        "log_likelihood": {"obs": log_lik},
        "posterior_predictive": {"obs": y_rep},
        "observed_data": {"obs": y},
    }
    return from_dict(**groups), y, y_rep


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def test_every_predictive_check_reads_y_and_predictions_from_the_fit(fit):
    data, y, y_rep = fit
    pairs = [
        (bayesij.loo_pit, {}),
        (bayesij.loo_score, {"kind": "crps"}),
        (bayesij.loo_score, {"kind": "scrps"}),
        (bayesij.loo_metrics, {"kind": "rmse"}),
        (bayesij.loo_r2, {}),
    ]
    for function, options in pairs:
        read = _quiet(function, data, **options)
        given = _quiet(function, data, y, y_rep, **options)
        if hasattr(read, "estimate"):
            assert read.estimate == given.estimate and read.se == given.se
        elif hasattr(read, "draws"):
            np.testing.assert_array_equal(read.draws, given.draws)
        else:
            np.testing.assert_array_equal(read.to_numpy(), given.to_numpy())
    means = _quiet(bayesij.loo_expectation, data, kind="quantile", prob=0.3)
    np.testing.assert_array_equal(
        means.to_numpy(), _quiet(bayesij.loo_expectation, data, y_rep, kind="quantile", prob=0.3)
    )
    # one given, the other read
    assert _quiet(bayesij.loo_score, data, y).estimate == _quiet(bayesij.loo_score, data).estimate


def test_draws_are_paired_by_label_when_the_groups_order_them_differently(fit):
    data, y, y_rep = fit
    tree = from_dict(
        posterior={"mu": np.asarray(data["posterior"]["mu"].values)},
        log_likelihood={"obs": np.asarray(data["log_likelihood"]["obs"].values)},
        posterior_predictive={"obs": y_rep[::-1]},  # chains swapped ...
        observed_data={"obs": y},
    )
    predictive = tree["posterior_predictive"]
    if hasattr(predictive, "to_dataset"):  # ArviZ 1.x: a DataTree node
        predictive = predictive.to_dataset()
    # ... and relabelled: the draws are paired by their chain labels, not by position
    swapped = predictive.assign_coords(chain=predictive["chain"].values[::-1])
    if isinstance(tree, xr.DataTree):
        tree["posterior_predictive"] = xr.DataTree(swapped)
    else:
        tree.posterior_predictive = swapped
    read = _quiet(bayesij.loo_pit, tree)
    np.testing.assert_array_equal(
        read.to_numpy(), _quiet(bayesij.loo_pit, data, y, y_rep).to_numpy()
    )


def test_without_a_fit_to_read_from_the_error_names_what_to_give(fit):
    data, y, y_rep = fit
    log_lik = np.asarray(data["log_likelihood"]["obs"].values)
    with pytest.raises(ValueError, match=r"y_pred: found None with data of type ndarray; expected"):
        bayesij.loo_score(log_lik, y)
    with pytest.raises(ValueError, match=r"y: found None with data of type ndarray"):
        bayesij.loo_pit(log_lik, y_pred=y_rep)
    bare = from_dict(posterior={"mu": np.zeros((2, 300))}, log_likelihood={"obs": log_lik})
    with pytest.raises(ValueError, match=r"no 'posterior_predictive' group"):
        bayesij.loo_metrics(bare, y)
    other = from_dict(
        posterior={"mu": np.zeros((2, 300))},
        log_likelihood={"obs": log_lik},
        posterior_predictive={"y_hat": y_rep},
        observed_data={"obs": y},
    )
    with pytest.raises(ValueError, match=r"no variable 'obs' in the 'posterior_predictive' group"):
        bayesij.loo_expectation(other)
    two = from_dict(
        posterior={"mu": np.zeros((2, 300))},
        log_likelihood={"obs": log_lik, "obs2": log_lik},
        observed_data={"obs": y},
    )
    with pytest.raises(ValueError, match=r"var_name: found 2 log-likelihood variables"):
        bayesij.loo_pit(two, y_pred=y_rep)
    with pytest.raises(ValueError, match=r"var_name: found \['obs', 'obs2'\]; expected one"):
        bayesij.loo_pit(
            two, y_pred=np.concatenate([y_rep, y_rep], axis=2), var_name=["obs", "obs2"]
        )
