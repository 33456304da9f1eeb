"""find_units: the exchangeable unit read from the fit (an index variable of constant_data
into a posterior dim, a coordinate of the observations) or named by the user, with the
posterior dims over units; local_names for containers without dims."""

import numpy as np
import pytest
import xarray as xr

import bayesij
from bayesij.data.structure import find_units, local_names

FIRMS = ["GM", "IBM", "GE"]


def _tree(*, index=True, coordinate=False, crossed=False, rng=None):
    rng = rng or np.random.default_rng(0)
    n, years = 12, [2001, 2002, 2003, 2004]
    firm = np.repeat(np.arange(3), 4)
    year = np.tile(np.arange(4), 3)
    obs = [f"{FIRMS[f]} {years[y]}" for f, y in zip(firm, year, strict=True)]
    posterior = xr.Dataset(
        {
            "mu": (("chain", "draw"), rng.normal(size=(2, 50))),
            "a": (("chain", "draw", "firm"), rng.normal(size=(2, 50, 3))),
            "c": (("chain", "draw", "year"), rng.normal(size=(2, 50, 4))),
            "mean": (("chain", "draw", "obs"), rng.normal(size=(2, 50, n))),
        },
        coords={"firm": FIRMS, "year": years, "obs": obs},
    )
    log_lik = xr.Dataset(
        {"y": (("chain", "draw", "obs"), rng.normal(-1, 0.1, (2, 50, n)))}, coords={"obs": obs}
    )
    if coordinate:
        log_lik = log_lik.assign_coords(firm=("obs", np.array(FIRMS)[firm]))
    groups = {"posterior": posterior, "log_likelihood": log_lik}
    constant = {}
    if index:
        constant["firm_idx"] = ("obs", firm)
    if crossed:
        constant["year_idx"] = ("obs", year)
    constant["weight"] = ("obs", rng.uniform(size=n))  # a float covariate: no grouping
    groups["constant_data"] = xr.Dataset(constant, coords={"obs": obs})
    return xr.DataTree.from_dict(groups), firm


def test_an_index_variable_into_a_posterior_dim_is_the_unit():
    tree, firm = _tree()
    units = find_units(tree)
    assert units.name == "firm" and units.n_units == 3
    assert units.reason == "constant_data 'firm_idx' indexes the posterior dim 'firm'"
    assert units.labels.tolist() == np.array(FIRMS)[firm].tolist()
    assert units.local_dims == {"obs", "firm"}
    names = bayesij.from_inference_data(tree).quantity_names
    local = local_names(names, tree, units)
    assert "mu" not in local and "a[GM]" in local and "mean[GM 2001]" in local
    assert "c[2001]" not in local  # year is no grouping here: c is global


def test_a_coordinate_of_the_observations_named_like_a_posterior_dim():
    tree, firm = _tree(index=False, coordinate=True)
    units = find_units(tree)
    assert units.name == "firm" and "coordinate 'firm'" in units.reason
    assert units.labels.tolist() == np.array(FIRMS)[firm].tolist()


def test_a_crossed_design_takes_the_coarsest_and_names_the_others():
    tree, _ = _tree(crossed=True)
    units = find_units(tree)
    assert units.name == "firm" and units.others == ("year",)
    assert units.local_dims == {"obs", "firm", "year"}
    by_year = find_units(tree, groups="year")
    assert by_year.n_units == 4 and by_year.reason.startswith("groups='year': constant_data")
    assert find_units(tree, groups="year_idx").name == "year"


def test_no_grouping_groups_false_and_labels():
    tree, firm = _tree(index=False)
    units = find_units(tree)
    assert units.name == "observation" and units.labels is None
    assert units.reason == "no grouping of the observations found in the fit"
    assert find_units(_tree()[0], groups=False).local_dims == {"obs", "firm"}
    given = find_units(tree, groups=np.array(FIRMS)[firm])
    assert given.reason == "groups given" and "firm" in given.local_dims  # labels = coords


def test_a_name_that_is_no_grouping_is_refused_with_the_candidates():
    tree, _ = _tree()
    with pytest.raises(
        ValueError,
        match=r"groups: found the name 'county'.*\(firm, firm_idx, "
        r"weight\), or labels",
    ):
        find_units(tree, groups="county")
    # A constant_data variable over the observations is a grouping by its values.
    assert find_units(tree, groups="weight").n_units == 12


def test_a_container_has_its_own_groups_and_no_names():
    rng = np.random.default_rng(1)
    post = bayesij.from_arrays(
        rng.normal(size=(2, 50, 4)),
        rng.normal(-1, 0.1, (2, 50, 6)),
        quantity_names=["mu", "a[1]", "a[2]", "a[3]"],
        groups=[1, 1, 2, 2, 3, 3],
    )
    units = find_units(post)
    assert units.reason == "the container's groups" and units.n_units == 3
    assert local_names(post.quantity_names, post, units) == ["a[1]", "a[2]", "a[3]"]
    assert find_units(post, groups=False).labels is None
    with pytest.raises(ValueError, match=r"groups: found the name 'firm' with data a Posterior"):
        find_units(post, groups="firm")
