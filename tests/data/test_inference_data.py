"""ArviZ InferenceData adapter on real InferenceData objects."""

import numpy as np
import pytest
import xarray as xr

import bayesij
from peers import from_dict, load_example


@pytest.fixture(scope="module")
def centered_eight():
    return load_example("centered_eight")


def test_eight_schools_names_values_and_obs_ids(centered_eight):
    post = bayesij.from_inference_data(centered_eight)
    schools = list(centered_eight.posterior["school"].values)
    # Labelled as ArviZ labels them (az.summary's index: 'theta[Choate]').
    assert post.quantity_names == ["mu"] + [f"theta[{s}]" for s in schools] + ["tau"]
    assert post.obs_names == list(centered_eight["log_likelihood"]["school"].values)
    np.testing.assert_array_equal(
        post.quantities.sel(quantity=f"theta[{schools[2]}]").values,
        centered_eight.posterior["theta"].isel(school=2).values,
    )
    np.testing.assert_array_equal(
        post.log_lik.values, centered_eight["log_likelihood"]["obs"].values
    )


def test_select_by_variable_and_element(centered_eight):
    second = str(centered_eight.posterior["school"].values[1])
    post = bayesij.from_inference_data(centered_eight, quantities=["tau", "theta[2]"])
    assert post.quantity_names == ["tau", f"theta[{second}]"]  # 1-based position
    by_label = bayesij.from_inference_data(centered_eight, quantities=[f"theta[{second}]"])
    assert by_label.quantity_names == [f"theta[{second}]"]
    with pytest.raises(ValueError, match=r"quantities: found the unknown name 'sigma'"):
        bayesij.from_inference_data(centered_eight, quantities=["sigma"])
    # The example in the message comes from the data at hand.
    with pytest.raises(ValueError, match=r"unknown element 'theta\[9\]'.*'theta\[Choate\]'"):
        bayesij.from_inference_data(centered_eight, quantities=["theta[9]"])
    with pytest.raises(ValueError, match=r"unknown element 'theta\[0\]'.*'theta\[1\]'"):
        bayesij.from_inference_data(centered_eight, quantities=["theta[0]"])


def _matrix_idata(rng):
    omega = rng.normal(size=(2, 50, 2, 3))
    return from_dict(
        posterior={"Omega": omega, "s": rng.normal(size=(2, 50))},
        log_likelihood={"y": rng.normal(size=(2, 50, 4)), "z": rng.normal(size=(2, 50, 2))},
    ), omega


def test_matrix_parameters_get_stan_names(rng):
    idata, omega = _matrix_idata(rng)
    post = bayesij.from_inference_data(idata, var_name="y", quantities=["Omega"])
    assert post.quantity_names == [
        "Omega[1,1]",
        "Omega[1,2]",
        "Omega[1,3]",
        "Omega[2,1]",
        "Omega[2,2]",
        "Omega[2,3]",
    ]
    np.testing.assert_array_equal(
        post.quantities.sel(quantity="Omega[2,1]").values, omega[:, :, 1, 0]
    )


def test_several_log_lik_variables(rng):
    idata, _ = _matrix_idata(rng)
    with pytest.raises(ValueError, match=r"var_name: found 2 log-likelihood variables"):
        bayesij.from_inference_data(idata)
    post = bayesij.from_inference_data(idata, var_name=["y", "z"])
    assert post.obs_names == ["y[0]", "y[1]", "y[2]", "y[3]", "z[0]", "z[1]"]
    np.testing.assert_array_equal(
        post.log_lik.values[:, :, 4:], idata["log_likelihood"]["z"].values
    )


def test_missing_log_likelihood_group(rng):
    idata = from_dict(posterior={"mu": rng.normal(size=(2, 50))})
    with pytest.raises(ValueError, match=r"idata: found no 'log_likelihood' group"):
        bayesij.from_inference_data(idata)


def test_groups_pass_through(centered_eight):
    schools = centered_eight["log_likelihood"]["school"].values
    groups = {s: ("east" if i < 4 else "west") for i, s in enumerate(schools)}
    post = bayesij.from_inference_data(centered_eight, groups=groups)
    assert list(post.groups.values) == ["east"] * 4 + ["west"] * 4


def test_observation_ids_from_other_coordinates_when_the_own_are_default():
    import xarray as xr

    rng = np.random.default_rng(0)
    coords = {
        "obs": np.arange(4),
        "firm": ("obs", ["GM", "GM", "IBM", "IBM"]),
        "year": ("obs", [1935, 1936, 1935, 1936]),
    }
    log_lik = xr.Dataset(
        {"y": (("chain", "draw", "obs"), rng.normal(-1, 0.1, (2, 50, 4)))}, coords=coords
    )
    posterior = xr.Dataset({"mu": (("chain", "draw"), rng.normal(size=(2, 50)))})
    tree = xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": log_lik})
    post = bayesij.from_inference_data(tree)
    assert post.obs_names == ["GM 1935", "GM 1936", "IBM 1935", "IBM 1936"]
    # Labels of its own are kept; labels that would repeat are not used.
    named = tree.copy()
    named["log_likelihood"] = log_lik.assign_coords(obs=["a", "b", "c", "d"])
    assert bayesij.from_inference_data(named).obs_names == ["a", "b", "c", "d"]
    plain = log_lik.drop_vars("year")
    repeated = xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": plain})
    assert bayesij.from_inference_data(repeated).obs_names == [0, 1, 2, 3]


def _grid_fit(transposed: bool):
    """A fit over a (row, col) grid of observations whose log-likelihood is stored (row,
    col), and whose posterior predictive, observed values and group index are stored
    (col, row) when ``transposed``: column k's values sit around k, row r is group r."""
    rng = np.random.default_rng(0)
    chains, draws, rows, cols = 2, 200, 6, 5
    a = rng.normal(size=(chains, draws, rows)) * 0.3 + np.arange(rows)
    y = np.arange(cols) + np.arange(rows)[:, None] + rng.normal(size=(rows, cols))
    mean = a[..., :, None] + np.arange(cols)  # (chain, draw, row, col)
    y_rep = mean + rng.normal(size=mean.shape)
    log_lik = -0.5 * (y - mean) ** 2
    index = np.repeat(np.arange(rows)[:, None], cols, axis=1)
    obs = ("col", "row") if transposed else ("row", "col")
    flip = (lambda v: np.swapaxes(v, -1, -2)) if transposed else (lambda v: v)
    sample = ("chain", "draw")
    return xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"a": ((*sample, "group"), a)}),
            "log_likelihood": xr.Dataset({"y": ((*sample, "row", "col"), log_lik)}),
            "posterior_predictive": xr.Dataset({"y": ((*sample, *obs), flip(y_rep))}),
            "observed_data": xr.Dataset({"y": (obs, flip(y))}),
            "constant_data": xr.Dataset({"group_idx": (obs, flip(index))}),
        }
    )


def test_groups_stored_in_another_dim_order_are_paired_by_dim_name():
    # Every group over the observations is read in the log-likelihood's order, whatever
    # order the fit stored its dims in: the same PIT, score and grouping either way (they
    # were paired by position: PIT off by up to 0.5, 25 of 30 observations in the wrong
    # group).
    stored, flipped = _grid_fit(False), _grid_fit(True)
    np.testing.assert_array_equal(bayesij.loo_pit(flipped), bayesij.loo_pit(stored))
    np.testing.assert_array_equal(
        np.asarray(bayesij.loo_score(flipped).pointwise),
        np.asarray(bayesij.loo_score(stored).pointwise),
    )
    expected = np.repeat(np.arange(6), 5)  # row-major (row, col): row r is group r
    for fit in (stored, flipped):
        for groups in (None, "group_idx"):
            units = bayesij.read(fit, groups=groups).units
            np.testing.assert_array_equal(np.asarray(units.labels).astype(int), expected)


def test_labels_other_than_the_log_likelihood_s_are_refused():
    # Labels on both sides pair the observations; labels that differ are no pairing.
    fit = _grid_fit(True)
    fit["log_likelihood"] = fit["log_likelihood"].to_dataset().assign_coords(row=np.arange(6))
    fit["observed_data"] = fit["observed_data"].to_dataset().assign_coords(row=np.arange(6) + 10)
    with pytest.raises(ValueError, match=r"^y: found row labels \[10, 11, .*log-likelihood's"):
        bayesij.loo_pit(fit)


@pytest.mark.parametrize("lazy", [False, True])
def test_another_dim_order_is_paired_in_the_installed_arviz_container_and_lazily(lazy):
    # The same pairing through the installed ArviZ's own container (an InferenceData on
    # ArviZ 0.23, a DataTree on 1.x), and with the groups over the observations opened
    # lazily (dask chunks; a lazy log-likelihood over two observation dims is refused by
    # name).
    from peers import ARVIZ_1

    def container(tree):
        groups = {name: tree[name].to_dataset() for name in tree.children}
        if lazy:
            groups = {
                name: dataset if name == "log_likelihood" else dataset.chunk()
                for name, dataset in groups.items()
            }
        if ARVIZ_1:
            return xr.DataTree.from_dict(groups)
        import arviz as az

        return az.InferenceData(**groups)

    stored, flipped = container(_grid_fit(False)), container(_grid_fit(True))
    np.testing.assert_array_equal(bayesij.loo_pit(flipped), bayesij.loo_pit(stored))
    units = bayesij.read(flipped, groups="group_idx").units
    np.testing.assert_array_equal(np.asarray(units.labels).astype(int), np.repeat(np.arange(6), 5))
    if lazy:
        tree = _grid_fit(True)
        tree["log_likelihood"] = tree["log_likelihood"].to_dataset().chunk()
        with pytest.raises(ValueError, match=r"^log_lik: found a lazy array with dims"):
            bayesij.loo_pit(tree)
