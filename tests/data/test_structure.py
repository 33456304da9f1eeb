"""find_units: the exchangeable unit read from the fit (an index variable of constant_data
into a posterior dim, a coordinate of the observations) or named by the user, with the
posterior dims over units; local_names for containers without dims. Both are asked of
the input as read converts it (a fit's groups as Datasets, a container as it is)."""

import numpy as np
import pytest
import xarray as xr

import bayesij
from bayesij.data import structure


def find_units(data, *args, **kwargs):
    return structure.find_units(bayesij.read(data).content, *args, **kwargs)


def local_names(names, data, units):
    return structure.local_names(names, bayesij.read(data).content, units)


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


def _radon_like(seed: int = 0):
    """A varying-intercept fit as ArviZ's from_pystan saves radon's Stan program: county
    intercepts ``a`` over ``a_dim_0`` (45 levels; counties 44 and 45 without a house), two
    coefficients ``beta`` over ``beta_dim_0`` (a 0/1 floor indicator and log uranium), and
    the Stan data in constant_data: the 1-based ``county_idx``, the 0/1 ``floor_measure``
    and the continuous ``log_uppm``. Exact Gaussian posterior draws (known sigma = 0.8,
    tau = 0.5, flat mean): y = a[county] + beta' x + e."""
    rng = np.random.default_rng(seed)
    n_counties, used = 45, 43
    county = np.concatenate([np.arange(used), rng.integers(0, used, 300 - used)])
    floor = (rng.random(county.size) < 0.3).astype(float)
    uppm = rng.normal(0, 0.4, used)[county]
    x = np.column_stack([floor, uppm])
    y = 1.3 + rng.normal(0, 0.5, used)[county] - 0.6 * floor + 0.7 * uppm
    y = y + rng.normal(0, 0.8, county.size)
    sigma, tau = 0.8, 0.5
    # (a_1..a_45, beta_1, beta_2) ~ Gaussian: a_j ~ N(1.3, tau^2) a priori, beta flat.
    design = np.zeros((county.size, n_counties + 2))
    design[np.arange(county.size), county] = 1.0
    design[:, n_counties:] = x
    precision = design.T @ design / sigma**2
    precision[:n_counties, :n_counties] += np.eye(n_counties) / tau**2
    linear = design.T @ y / sigma**2
    linear[:n_counties] += 1.3 / tau**2
    cov = np.linalg.inv(precision)
    theta = rng.multivariate_normal(cov @ linear, cov, size=4 * 500).reshape(4, 500, -1)
    mean = theta @ design.T
    log_lik = -0.5 * ((y - mean) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    posterior = xr.Dataset(
        {
            "a": (("chain", "draw", "a_dim_0"), theta[..., :n_counties]),
            "beta": (("chain", "draw", "beta_dim_0"), theta[..., n_counties:]),
        },
        coords={"chain": np.arange(4), "draw": np.arange(500)},
    )
    constant = xr.Dataset(
        {
            "county_idx": ("log_lik_dim_0", county + 1),
            "floor_measure": ("log_lik_dim_0", floor.astype(np.int64)),
            "log_uppm": ("log_lik_dim_0", uppm),
        }
    )
    log_lik_set = xr.Dataset({"log_lik": (("chain", "draw", "log_lik_dim_0"), log_lik)})
    tree = xr.DataTree.from_dict(
        {"posterior": posterior, "log_likelihood": log_lik_set, "constant_data": constant}
    )
    return tree, county


def _as_container(tree, kind: str, tmp_path):
    """The same fit as a DataTree, an ArviZ 0.23 InferenceData (skipped on ArviZ 1.x) or
    a DataTree opened lazily from a file (chunks=)."""
    if kind == "InferenceData":
        from peers import ARVIZ_1

        if ARVIZ_1:
            pytest.skip("ArviZ 1.x has no InferenceData (the DataTree is tested)")
        import arviz

        return arviz.InferenceData(**{name: tree[name].to_dataset() for name in tree.children})
    if kind == "lazy":
        path = tmp_path / "radon.nc"
        tree.to_netcdf(path)
        return xr.open_datatree(path, chunks={})
    return tree


@pytest.mark.parametrize("kind", ["DataTree", "InferenceData", "lazy"])
def test_a_stan_fit_is_grouped_by_its_one_based_county_index_not_its_0_1_covariate(kind, tmp_path):
    # Issue 65: a 0/1 covariate in constant_data happened to index the two-level
    # coefficient dim and was taken for the grouping; the 1-based county index (with
    # unused levels) was never recognised. The log-likelihood bears out the county index,
    # whichever container holds the fit, in memory or opened lazily.
    tree, county = _radon_like()
    units = find_units(_as_container(tree, kind, tmp_path))
    assert units.grouped and units.dim == "a_dim_0"
    assert "county_idx" in units.reason and "1-based" in units.reason
    assert units.n_units == np.unique(county).size == 43
    np.testing.assert_array_equal(np.asarray(units.labels, dtype=int), county)
    assert "beta_dim_0" not in units.local_dims and "a_dim_0" in units.local_dims


@pytest.mark.parametrize("kind", ["DataTree", "InferenceData", "lazy"])
def test_an_index_the_log_likelihood_does_not_follow_is_no_grouping(kind, tmp_path):
    # The same fit with the county index shuffled: it still spans the county dim, but each
    # observation's log-likelihood moves with another county's intercept, so the index is
    # not the grouping (the county dim is then suspected, not used).
    tree, county = _radon_like()
    shuffled = np.random.default_rng(5).permutation(county.size)
    constant = tree["constant_data"].to_dataset()
    constant["county_idx"] = ("log_lik_dim_0", constant["county_idx"].values[shuffled])
    tree["constant_data"] = xr.DataTree(constant)
    units = find_units(_as_container(tree, kind, tmp_path))
    assert not units.grouped
    assert "county_idx" not in units.reason


def test_a_two_valued_index_is_no_grouping_where_the_draws_cannot_tell():
    # A log-likelihood that moves with none of the variables: the draws cannot tell
    # whether an index is a grouping, and an index that uses every level of a dim stands
    # (as it always did), unless it takes two values (a 0/1 covariate indexing a two-level
    # coefficient dim by coincidence).
    rng = np.random.default_rng(0)
    n = 60
    posterior = xr.Dataset(
        {
            "beta": (("chain", "draw", "beta_dim_0"), rng.normal(size=(4, 200, 2))),
            "a": (("chain", "draw", "a_dim_0"), rng.normal(size=(4, 200, 5))),
        }
    )
    log_lik = xr.Dataset({"log_lik": (("chain", "draw", "obs"), rng.normal(size=(4, 200, n)))})
    for name, codes, grouped in (
        ("floor", rng.integers(0, 2, n), False),
        ("group_idx", np.arange(n) % 5, True),
    ):
        constant = xr.Dataset({name: ("obs", codes)})
        tree = xr.DataTree.from_dict(
            {"posterior": posterior, "log_likelihood": log_lik, "constant_data": constant}
        )
        assert find_units(tree).grouped == grouped, name


def test_a_dim_shared_by_coefficients_and_their_odds_ratios_is_no_grouping():
    # beta and odds_ratio = exp(beta) over one 'coef' dim: every observation's
    # log-likelihood moves with all three coefficients, so the log-likelihood does not bear
    # a grouping out; the coefficients stay global (they were "not applicable", local).
    import xarray as xr

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ [0.5, -0.3, 0.2] + rng.normal(size=200)
    beta = rng.normal([0.5, -0.3, 0.2], 0.07, size=(2, 300, 3))
    log_lik = -0.5 * (y - np.einsum("cdk,nk->cdn", beta, X)) ** 2
    draws = ("chain", "draw")
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {"beta": ((*draws, "coef"), beta), "odds_ratio": ((*draws, "coef"), np.exp(beta))},
                coords={"coef": ["a", "b", "c"]},
            ),
            "log_likelihood": xr.Dataset({"y": ((*draws, "obs"), log_lik)}),
        }
    )
    from bayesij.data.fit import read

    fit = read(tree)
    assert fit.units.suspected == () and "coef" not in fit.units.local_dims
    assert fit.local_quantities(["beta[a]", "odds_ratio[b]"]) == []


def test_group_labels_that_equal_a_coefficient_dim_s_coordinates_leave_it_global():
    """groups= labels 0..4 over 100 observations, and five regression coefficients over a
    'coef' dim whose coordinates are also 0..4: the log-likelihood moves with every
    coefficient at once, so 'coef' is not the groups' dim (the coefficients were taken for
    the groups' effects and left out of the audit). Group effects over a dim labelled
    0..4 the same way still are the groups'."""
    import xarray as xr

    from bayesij.data.fit import read

    rng = np.random.default_rng(0)
    X, groups = rng.normal(size=(100, 5)), np.repeat(np.arange(5), 20)
    y = X @ [0.5, -0.3, 0.2, 0.1, 0.4] + rng.normal(size=100)
    beta = rng.normal([0.5, -0.3, 0.2, 0.1, 0.4], 0.1, size=(2, 300, 5))
    alpha = rng.normal(size=5) + 0.2 * rng.normal(size=(2, 300, 5))
    draws = ("chain", "draw")

    def tree(effect, mean):
        return xr.DataTree.from_dict(
            {
                "posterior": xr.Dataset(
                    {effect: ((*draws, "coef"), draws_of[effect])}, coords={"coef": range(5)}
                ),
                "log_likelihood": xr.Dataset({"y": ((*draws, "obs"), -0.5 * (y - mean) ** 2)}),
            }
        )

    draws_of = {"beta": beta, "alpha": alpha}
    regression = read(tree("beta", np.einsum("cdk,nk->cdn", beta, X)), groups=groups)
    assert regression.units.dim is None and "coef" not in regression.units.local_dims
    assert regression.local_quantities(["beta[0]", "beta[3]"]) == []
    hierarchy = read(tree("alpha", alpha[..., groups]), groups=groups)
    assert hierarchy.units.dim == "coef"
    assert hierarchy.local_quantities(["alpha[0]"]) == ["alpha[0]"]
