"""read -> Fit: one door, one read, one unit rule.

A public call reads and checks its input once (the log_likelihood group converted once, one
checked Posterior built), whatever it computes inside; every estimator of a grouped fit
works on the same unit as the audit, and the pointwise ones say the fit is grouped."""

import ast
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayesij
from bayesij.data import inference_data
from bayesij.data.fit import Fit, read
from bayesij.data.posterior import Posterior

FIRMS = ["GM", "IBM", "GE", "GY", "US"]
PACKAGE = Path(bayesij.__file__).parent


def _groups(*, rng=None, log_prior=True, two_log_liks=False):
    """The groups of a small hierarchical fit: 5 firms x 6 years, a firm index in
    constant_data, a per-firm effect and its non-centred offset, a log_prior group."""
    rng = rng or np.random.default_rng(3)
    n_firms, per = len(FIRMS), 6
    firm = np.repeat(np.arange(n_firms), per)
    obs = [f"{FIRMS[f]} {2000 + t}" for f in range(n_firms) for t in range(per)]
    y = rng.normal(np.arange(n_firms)[firm] * 0.3, 1.0)
    mu = rng.normal(0.6, 0.1, (2, 200))
    sigma_a = np.abs(rng.normal(0.5, 0.1, (2, 200)))
    z = rng.normal(size=(2, 200, n_firms))
    a = mu[..., None] + sigma_a[..., None] * z
    posterior = xr.Dataset(
        {
            "mu": (("chain", "draw"), mu),
            "sigma_a": (("chain", "draw"), sigma_a),
            "z_a": (("chain", "draw", "firm"), z),
            "a": (("chain", "draw", "firm"), a),
        },
        coords={"firm": FIRMS, "chain": [0, 1], "draw": np.arange(200)},
    )
    mean = a[..., firm]
    log_lik = {"y": (("chain", "draw", "obs"), -0.5 * (y - mean) ** 2 - 0.919)}
    if two_log_liks:
        log_lik["y2"] = (("chain", "draw", "obs"), -0.5 * (y - mean - 0.1) ** 2 - 0.919)
    groups = {
        "posterior": posterior,
        "log_likelihood": xr.Dataset(log_lik, coords={"obs": obs}),
        "constant_data": xr.Dataset({"firm_idx": ("obs", firm)}, coords={"obs": obs}),
    }
    if log_prior:
        groups["log_prior"] = xr.Dataset(
            {
                "mu": (("chain", "draw"), -0.5 * mu**2),
                "sigma_a": (("chain", "draw"), -sigma_a),
                "z_a": (("chain", "draw", "firm"), -0.5 * z**2),
            }
        )
    return groups, np.array(FIRMS, dtype=object)[firm]


def _tree(**kwargs):
    groups, labels = _groups(**kwargs)
    return xr.DataTree.from_dict(groups), labels


def _inference_data(**kwargs):
    arviz = pytest.importorskip("arviz")
    if int(arviz.__version__.split(".")[0]) >= 1:
        pytest.skip("ArviZ 1.x has no InferenceData (DataTree is tested)")
    groups, labels = _groups(**kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return arviz.InferenceData(**groups), labels


FITS = {"DataTree": _tree, "InferenceData": _inference_data}


@pytest.fixture
def counted(monkeypatch):
    """How many times the log_likelihood group is converted and a checked Posterior built."""
    counts = {"log_likelihood": 0, "Posterior": 0}
    convert, check = inference_data.log_lik_variables, Posterior.__post_init__

    def counting_convert(*args, **kwargs):
        counts["log_likelihood"] += 1
        return convert(*args, **kwargs)

    def counting_check(self, *args, **kwargs):
        counts["Posterior"] += 1
        return check(self, *args, **kwargs)

    monkeypatch.setattr(inference_data, "log_lik_variables", counting_convert)
    monkeypatch.setattr(Posterior, "__post_init__", counting_check)
    return counts


@pytest.mark.parametrize("kind", FITS)
@pytest.mark.parametrize("call", ["loo", "amip", "audit"])
def test_one_public_call_reads_its_input_once(kind, call, counted):
    fit, _ = FITS[kind]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if call == "loo":
            bayesij.loo(fit)
        elif call == "amip":
            bayesij.amip(fit, "mu", "sign", method="linear")
        else:
            result = bayesij.audit(fit, settings={"targets": ("sign",)})
            assert result.sensitivity is not None  # the log_prior group was power-scaled too
    assert counted == {"log_likelihood": 1, "Posterior": 1}


def test_a_fit_is_read_once_and_passed_on_as_it_is(counted):
    tree, labels = _tree()
    fit = read(tree)
    assert isinstance(fit, Fit) and read(fit) is fit
    assert fit.units.name == "firm" and fit.units.n_units == 5 and not fit.units.given
    assert fit.n_obs == 30 and counted["log_likelihood"] == 0  # sizes, no values read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bayesij.loo(fit)
        bayesij.waic(fit)
        bayesij.influence(fit)
        bayesij.ij_covariance(fit)
    # one conversion for the log-likelihood alone, one for the container with quantities
    assert counted == {"log_likelihood": 2, "Posterior": 2}
    by_obs = read(fit, groups=False)
    assert by_obs.units.name == "observation" and by_obs.units.given
    assert read(fit, groups=labels).units.n_units == 5


@pytest.mark.filterwarnings("ignore::UserWarning")  # few draws: k-hats
@pytest.mark.parametrize("kind", FITS)
def test_read_converts_the_input_and_keeps_none_of_it(kind):
    """read converts once: a fit's groups as Datasets (the container itself not kept, so a
    change to it afterwards changes nothing read), draws in memory as the checked
    Posterior, a lazy log-likelihood as its block reader; the Fit is frozen."""
    import copy
    import dataclasses
    import pickle

    import dask.array as da

    fit, _ = FITS[kind]()
    converted = read(fit)
    assert isinstance(converted.content, inference_data.FitGroups)
    assert set(converted.content) == {"posterior", "log_likelihood", "constant_data", "log_prior"}
    assert all(isinstance(converted.content[g], xr.Dataset) for g in converted.content)
    assert all(value is not fit for value in vars(converted).values())
    before = bayesij.loo(converted).pointwise
    if kind == "DataTree":
        fit["log_likelihood"] = xr.DataTree(fit["log_likelihood"].to_dataset() * 0)
    else:
        fit.log_likelihood = fit.log_likelihood * 0
    assert bayesij.loo(converted).pointwise.equals(before)
    assert not bayesij.loo(fit).pointwise.equals(before)  # the change was real
    with pytest.raises(dataclasses.FrozenInstanceError):
        converted.content = None
    with pytest.raises(TypeError):  # the groups read cannot be changed either
        converted.content["posterior"] = None
    for copied in (pickle.loads(pickle.dumps(converted)), copy.deepcopy(converted)):
        assert copied.kind == kind and set(copied.content) == set(converted.content)
        assert bayesij.loo(copied).pointwise.equals(before)  # to worker processes and back
    assert converted.kind == kind and repr(converted).startswith(f"Fit: {kind} with groups")

    log_lik = np.random.default_rng(0).normal(size=(2, 50, 6))
    in_memory = read(log_lik)
    assert isinstance(in_memory.content, Posterior) and in_memory.kind == "ndarray"
    np.testing.assert_array_equal(in_memory.content.log_lik.values, log_lik)
    lazy = read(da.from_array(log_lik, chunks=(2, 50, 3)))
    assert lazy.lazy and lazy.content is lazy.lazy_reader() and lazy.kind == "Array"
    with pytest.raises(ValueError, match=r"^quantities: found 'mu'; expected no quantities"):
        in_memory.posterior("mu")
    with pytest.raises(ValueError, match=r"^var_name: found 'y' with data a Fit read from a nd"):
        read(in_memory, var_name="y")


@pytest.mark.parametrize("kind", FITS)
def test_every_estimator_of_a_grouped_fit_uses_the_audits_unit(kind):
    fit, labels = FITS[kind]()
    post = bayesij.from_inference_data(fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = bayesij.audit(fit, quantities=["mu"], settings={"targets": ("sign",)})
        influence = bayesij.influence(fit, quantities=["mu"])
        ij = bayesij.ij_covariance(fit, quantities=["mu"])
        linear = bayesij.linearity(fit, quantities=["mu"])
        amip = bayesij.amip(fit, "mu", "sign", method="linear")
        explicit = bayesij.influence(post, groups=labels, quantities=["mu"])
        loo = bayesij.loo(fit)
    assert audit.units.name == "firm"
    firms = list(audit.influence["group"].values)
    assert sorted(firms) == sorted(FIRMS)
    assert list(influence["group"].values) == firms
    assert list(ij.influence["group"].values) == firms
    assert list(linear.table().index) == ["mu"] and linear.pareto_k.size == 5
    assert amip.n_units == 5
    np.testing.assert_allclose(influence["psi"].values, explicit["psi"].values, rtol=1e-12)
    np.testing.assert_allclose(
        influence["psi"].values, audit.influence["psi"].sel(quantity=["mu"]).values, rtol=1e-12
    )
    # LOO stays per observation, as az.loo, and says how to ask for the firm
    assert loo.n_units == 30
    assert "a grouping by firm" in str(loo) and "groups='firm'" in str(loo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        waic, plain = bayesij.waic(fit), bayesij.waic(post)
    assert waic.n_units == 30 and "a grouping by firm" in str(waic)
    assert plain.grouping is None  # a container without groups: nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # made-up draws: k-hat is high
        by_firm = bayesij.loo(fit, groups="firm")
        explicit_loo = bayesij.loo(post, groups=labels)
    assert by_firm.n_units == 5 and by_firm.grouping is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asked = bayesij.loo(read(fit, groups=False))  # the observations asked for: no note
    assert asked.n_units == 30 and asked.grouping is None
    np.testing.assert_allclose(
        by_firm.pointwise["elpd_loo"].values,
        explicit_loo.pointwise["elpd_loo"].values,
        rtol=1e-12,
    )


@pytest.mark.parametrize("kind", FITS)
def test_an_audit_of_one_of_two_log_likelihood_variables_with_a_log_prior(kind):
    fit, _ = FITS[kind](two_log_liks=True)
    with pytest.raises(ValueError, match=r"var_name: found 2 log-likelihood variables"):
        bayesij.audit(fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bayesij.audit(fit, var_name="y2", settings={"targets": ("sign",)})
    assert result.units.name == "firm" and result.sensitivity is not None
    assert set(result.quantities) == {"mu", "sigma_a"}  # a and z_a are per firm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = bayesij.loo(fit, var_name="y2", groups="firm")
    np.testing.assert_allclose(result.loo.elpd, expected.elpd, rtol=1e-12)


@pytest.mark.parametrize("kind", FITS)
def test_the_fit_knows_its_model_structure(kind):
    """Global and local variables by their dims; the non-centred offset by its N(0, 1)
    log-prior term; the deterministic effect by having none; top-level vs group-level
    log-prior terms. A log prior written up to a constant, or summed over the firms, is
    recognised too; a N(0, 2) term is not an offset."""
    fit = read(FITS[kind]()[0])
    structure = fit.structure
    assert structure.global_vars == ("mu", "sigma_a")
    assert structure.local_vars == ("z_a", "a")
    assert structure.auxiliaries == ("z_a",) and structure.deterministics == ("a",)
    assert structure.top_level_priors == ("mu", "sigma_a")
    assert structure.group_level_priors == ("z_a",) and structure.hierarchical
    assert "non-centred offsets z_a" in structure.describe()
    groups, _ = _groups()
    z = groups["posterior"]["z_a"]
    for term, offset in (
        ((-0.5 * z**2 - 0.9189385332046727).sum("firm"), True),  # summed, with the constant
        (-0.5 * (z / 2) ** 2, False),  # z ~ N(0, 2): a prior, not an offset
    ):
        groups["log_prior"]["z_a"] = term
        assert (read(xr.DataTree.from_dict(groups)).structure.auxiliaries == ("z_a",)) is offset
    flat = read(_tree(log_prior=False)[0]).structure
    assert flat.deterministics is None and not flat.hierarchical
    assert flat.local_vars == ("z_a", "a")
    assert flat.auxiliaries == ("z_a",)  # by its draws: mean 0, sd 1, beside a over firm
    post = bayesij.from_arrays(
        np.zeros((2, 50, 2)), np.zeros((2, 50, 3)), quantity_names=["m", "s"]
    )
    assert read(post).structure.global_vars == ("m", "s")


@pytest.mark.parametrize("kind", FITS)
def test_the_audit_power_scales_the_top_level_priors_of_a_hierarchy(kind):
    """The group-level term z_a ~ N(0, 1) is the model of the firm effects: the audit
    scales mu's and sigma_a's priors alone, equal to psense with that selection, and says
    so; psense on its own scales the whole group, as the peers do."""
    fit, _ = FITS[kind]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bayesij.audit(fit, settings={"targets": ("sign",)})
        top = bayesij.psense(fit, quantities=result.quantities, prior_selection=["mu", "sigma_a"])
        whole = bayesij.psense(fit, quantities=result.quantities)
    assert result.prior_selection == ("mu", "sigma_a")
    pd.testing.assert_frame_equal(result.sensitivity, top)
    named = bayesij.psense(fit, quantities=result.quantities, prior_selection="top-level")
    pd.testing.assert_frame_equal(named, top)
    assert not np.allclose(whole["prior"], top["prior"])
    assert "Power-scaling sensitivity (top-level priors: mu, sigma_a)" in result.tables()
    assert any("the 2 top-level prior terms scaled" in s for s in result.summary())


def test_a_grouping_the_file_does_not_record_is_named_and_its_variables_kept_local():
    """A fit saved without its firm index (a plain NumPy index in the model): the posterior
    dim 'firm' over z_a and a looks like a grouping. The audit says so in its first line
    and how to pass it, keeps z_a and a out of the global quantities, and never headlines
    the offset z_a even when asked to audit it."""
    groups, labels = _groups(log_prior=False)
    del groups["constant_data"]
    tree = xr.DataTree.from_dict(groups)
    fit = read(tree)
    assert fit.units.suspected == ("firm",) and not fit.units.grouped
    assert fit.structure.local_vars == ("z_a", "a")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = bayesij.audit(tree, settings={"targets": ("sign", "significance")})
        asked = bayesij.audit(tree, var_names=["mu", "z_a"], settings={"targets": ("sign",)})
    assert audit.quantities == ["mu", "sigma_a"]
    assert "the posterior dim 'firm' (5 levels, on z_a, a) looks like one" in audit.heading()
    assert "groups= / --groups" in audit.heading()
    assert asked.offsets == [f"z_a[{f}]" for f in FIRMS]
    assert not any("z_a" in line for line in asked.summary())
    why = set(audit.comparison_table["why"])
    assert why <= {"suspected grouping", "noise", "linearity", "barely moved"}
    assert not any("misspecified" in line for line in audit.summary())
    regrouped = bayesij.audit(tree, groups=labels, settings={"targets": ("sign",)})
    assert regrouped.units.name == "group" and regrouped.units.dim == "firm"
    assert regrouped.unit_effects == ["z_a", "a"]


def _modules_above_the_data_floor():
    # adapters/ read the Stan objects they convert (their input is a Stan fit, not a fit
    # bayesij reads); everything from stats/ up takes what read() accepts.
    for folder in ("stan_models", "stats", "refit", "report"):
        yield from sorted((PACKAGE / folder).rglob("*.py"))
    yield PACKAGE / "cli.py"
    yield PACKAGE / "demo.py"


#: What only the data floor may ask: the input's type and the groups it holds.
INPUT_TESTS = {"has_groups", "group_names", "has_posterior", "_group", "node_as_dataset"}
#: Names an input arrives under in the public functions and the refit backends.
INPUT_NAMES = {"data", "post", "fit", "idata", "trace", "refit"}


def test_no_module_above_the_data_floor_asks_what_the_input_was():
    found = []
    for path in _modules_above_the_data_floor():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bayesij.data"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                asked = [a.name for a in node.names if a.name in INPUT_TESTS]
                if private or asked:
                    found.append(f"{path.name}:{node.lineno} imports {private + asked}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "hasattr")
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in INPUT_NAMES
                and not (len(node.args) == 2 and ast.unparse(node.args[1]) == "dict")
            ):  # a Stan program's data dict is the model's data, not a fit
                found.append(f"{path.name}:{node.lineno} {node.func.id}({node.args[0].id}, ...)")
            if isinstance(node, ast.Name) and node.id == "Posterior" and _in_isinstance(node, tree):
                found.append(f"{path.name}:{node.lineno} isinstance(..., Posterior)")
    assert found == []


def _in_isinstance(name: ast.Name, tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and any(n is name for n in ast.walk(node.args[1]))
        ):
            return True
    return False


def test_a_lazy_grouped_fit_says_which_grouping_it_cannot_sum():
    pytest.importorskip("dask")
    groups, _ = _groups(log_prior=False)
    groups["log_likelihood"] = groups["log_likelihood"].chunk({"obs": 10})
    tree = xr.DataTree.from_dict(groups)
    with pytest.raises(ValueError, match=r"groups: found the fit's grouping by firm \(constant"):
        bayesij.influence(tree)
    lazy = bayesij.influence(tree, groups=False, quantities=["mu"])
    in_memory = bayesij.influence(_tree(log_prior=False)[0], groups=False, quantities=["mu"])
    np.testing.assert_allclose(lazy["psi"].values, in_memory["psi"].values, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "a grouping by firm" in str(bayesij.loo(tree))  # per observation, as az.loo


def test_draws_named_or_given_a_number_is_one_value_and_refused_clearly():
    from bayesij.data.fit import named_draws

    rng = np.random.default_rng(0)
    mu = rng.normal(size=(2, 100, 1))
    post = bayesij.from_arrays(mu, -0.5 * (1.0 - mu) ** 2, quantity_names=["mu"])
    assert named_draws(post, 1.0, "scale").shape == (1,)
    np.testing.assert_array_equal(named_draws(post, "mu", "scale"), mu)
    with pytest.raises(ValueError, match=r"scale: found 1 draws; expected one per draw"):
        bayesij.bayesian_r2(post, np.broadcast_to(mu, (2, 100, 5)), 1.0)


def test_a_fit_says_in_a_line_what_it_read():
    tree, labels = _tree()
    text = repr(read(tree))
    assert text.startswith("Fit: DataTree with groups posterior, log_likelihood")
    assert "unit: firm (constant_data 'firm_idx' indexes the posterior dim 'firm'), 5 units" in text
    assert text.endswith("variables: mu, sigma_a, z_a[5], a[5]")
    assert "\n" not in text and len(text) < 300  # never the draws
    assert repr(read(np.zeros((2, 10, 4)))) == (
        "Fit: ndarray; unit: observation (no groups given); variables: none"
    )


def test_a_suspected_grouping_reads_the_same_from_a_file_opened_lazily(tmp_path):
    """The fit without its firm index, saved and opened with chunks=: the same suspected
    dim, quantities, IJ (1e-10) and verdicts as in memory."""
    groups, _ = _groups(log_prior=False)
    del groups["constant_data"]
    tree = xr.DataTree.from_dict(groups)
    path = tmp_path / "no_index.nc"
    tree.to_netcdf(path, engine="h5netcdf")
    lazy = xr.open_datatree(path, engine="h5netcdf", chunks={"obs": 10})
    assert read(lazy).lazy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_memory = bayesij.audit(tree, settings={"targets": ("sign",), "amip": False})
        opened = bayesij.audit(lazy, settings={"targets": ("sign",), "amip": False})
    assert opened.units.suspected == in_memory.units.suspected == ("firm",)
    centred, _, _ = _centred_hierarchy()
    centred.to_netcdf(tmp_path / "centred.nc", engine="h5netcdf")
    reopened = xr.open_datatree(tmp_path / "centred.nc", engine="h5netcdf", chunks={"obs": 10})
    assert read(reopened).lazy and read(reopened).units.suspected == ("school",)
    assert opened.quantities == in_memory.quantities == ["mu", "sigma_a"]
    assert opened.heading() == in_memory.heading()
    np.testing.assert_allclose(opened.ij.variance, in_memory.ij.variance, rtol=1e-10)
    pd.testing.assert_frame_equal(opened.comparison_table, in_memory.comparison_table)


def _centred_hierarchy(n_groups=12, per=5):
    """A centred varying-intercept fit (exact draws of mu and alpha_1..12, known sds) as a
    DataTree saved without its group index (alpha over 'school' alone), the same as a
    Stan fit read by name (a Posterior of mu, alpha[1]..alpha[12]), and the labels."""
    from conjugate import hierarchical_normal

    model, groups = hierarchical_normal(n_groups, per, np.random.default_rng(6))
    theta = model.draws(4000, np.random.default_rng(7))
    log_lik = model.log_lik(theta).reshape(4, 1000, -1)
    draws = theta.reshape(4, 1000, -1)
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {
                    "mu": (("chain", "draw"), draws[..., 0]),
                    "alpha": (("chain", "draw", "school"), draws[..., 1:]),
                }
            ),
            "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), log_lik)}),
        }
    )
    names = ["mu"] + [f"alpha[{g + 1}]" for g in range(n_groups)]
    return tree, bayesij.from_arrays(draws, log_lik, quantity_names=names), groups


def test_group_effects_are_found_the_same_in_an_inference_data():
    """ArviZ 0.23's InferenceData of the same centred fit (Python 3.11; ArviZ 1.x has only
    the DataTree): the same suspected dim and default quantities, and its log-likelihood
    read without a copy, the fit's arrays left writable."""
    arviz = pytest.importorskip("arviz")
    if int(arviz.__version__.split(".")[0]) >= 1:
        pytest.skip("ArviZ 1.x has no InferenceData (DataTree is tested)")
    tree, _, _ = _centred_hierarchy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = arviz.InferenceData(
            posterior=tree["posterior"].to_dataset().copy(deep=True),
            log_likelihood=tree["log_likelihood"].to_dataset().copy(deep=True),
        )
        audit = bayesij.audit(idata, settings={"targets": ("sign",), "amip": False})
    values = idata.log_likelihood["y"].values
    fit = read(idata)
    assert fit.units.suspected == ("school",) and fit.structure.local_vars == ("alpha",)
    assert audit.quantities == ["mu"]
    assert np.shares_memory(fit.log_lik_source().matrix(), values)
    assert values.flags.writeable


def test_group_effects_saved_without_their_index_are_found_by_the_log_likelihood():
    """A centred hierarchy's one vector of group effects, saved without the group index (a
    DataTree) or read by name (a Stan fit's alpha[1..12]): each observation's
    log-likelihood moves with one of its levels, so it is local, named in the heading,
    left out of the default audit (which was the audit of 13 quantities as if global), and
    the IJ of the global mu is not judged over observations; given the groups, the unit
    is the group as before."""
    tree, post, labels = _centred_hierarchy()
    fit = read(tree)
    assert fit.units.suspected == ("school",) and not fit.units.grouped
    assert "'school' (12 levels, on alpha) looks like one (each observation's" in (fit.units.reason)
    assert fit.structure.local_vars == ("alpha",)
    named = read(post)
    assert named.units.local_variables == {"alpha"} and named.units.suspected == ("alpha",)
    assert named.structure.local_vars == ("alpha",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audits = [bayesij.audit(data, settings={"targets": ("sign",)}) for data in (tree, post)]
        regrouped = bayesij.audit(tree, groups=labels, settings={"targets": ("sign",)})
    for audit in audits:
        assert audit.quantities == ["mu"] and audit.n_quantities_available == 13
        why = audit.comparison_table.loc["mu", "why"]
        assert why in ("suspected grouping", "noise", "linearity", "barely moved")
        assert not any("misspecified" in line for line in audit.summary())
        assert "groups= / --groups" in audit.heading()
    assert "the variable 'alpha' looks like one effect per group" in audits[1].heading()
    assert regrouped.units.dim == "school" and regrouped.unit_effects == ["alpha"]


def test_the_log_likelihood_is_asked_only_of_variables_it_can_afford(monkeypatch):
    """A variable over more than MAX_ELEMENTS elements is not tested (global, as before the
    test: its correlations would cost more than the audit they serve); a per-observation
    variable is local by its number of elements, without the test."""
    from bayesij.data import structure

    tree, post, _ = _centred_hierarchy()
    monkeypatch.setattr(structure, "MAX_ELEMENTS", 11)
    assert read(tree).units.suspected == () and not read(post).units.local_variables
    monkeypatch.undo()
    log_lik = post.log_lik.values
    mu = post.quantities.values[..., :1]
    fitted = mu + log_lik  # a value per observation (fitted[1..60]) that moves with each
    names = ["mu"] + [f"fitted[{n + 1}]" for n in range(60)]
    per_obs = bayesij.from_arrays(
        np.concatenate([mu, fitted], axis=-1), log_lik, quantity_names=names
    )
    calls = []
    monkeypatch.setattr(structure, "one_level_each", lambda *a: calls.append(a) or True)
    fit = read(per_obs)
    assert calls == [] and not fit.units.local_variables
    assert fit.structure.local_vars == ("fitted",)


def test_a_vector_of_coefficients_is_not_a_suspected_grouping():
    """One variable over a dim (a regression's beta over 'coef') is global, not a grouping
    the file forgot: only a dim shared by several variables (an effect and its offset) is
    suspected."""
    groups, _ = _groups(log_prior=False)
    del groups["constant_data"]
    posterior = groups["posterior"].drop_vars(["z_a", "a"])
    beta = np.random.default_rng(1).normal(size=(2, 200, 4))
    groups["posterior"] = posterior.assign(beta=(("chain", "draw", "coef"), beta))
    fit = read(xr.DataTree.from_dict(groups))
    assert fit.units.suspected == () and "looks like one" not in fit.units.reason
    assert fit.structure.global_vars == ("mu", "sigma_a", "beta") and not fit.structure.local_vars


def test_a_regression_s_twelve_coefficients_are_global_by_the_log_likelihood_too():
    """Twelve coefficients over 'coef' that the log-likelihood depends on (a dense
    design, exact draws): every observation moves with several, so they are audited."""
    from conjugate import ConjugateNormal

    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 12))
    model = ConjugateNormal(X, X @ rng.normal(size=12) + rng.normal(size=200))
    beta = model.draws(4000, np.random.default_rng(9))
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {"beta": (("chain", "draw", "coef"), beta.reshape(4, 1000, 12))}
            ),
            "log_likelihood": xr.Dataset(
                {"y": (("chain", "draw", "obs"), model.log_lik(beta).reshape(4, 1000, -1))}
            ),
        }
    )
    names = [f"beta[{k + 1}]" for k in range(12)]
    post = bayesij.from_arrays(
        beta.reshape(4, 1000, 12), model.log_lik(beta).reshape(4, 1000, -1), quantity_names=names
    )
    for data in (tree, post):
        units = read(data).units
        assert units.suspected == () and not units.local_variables


class _RecordedArray(xr.backends.BackendArray):
    """A posterior variable that writes its name in ``reads`` whenever its values are
    read (xarray reads it lazily, as a file's variable)."""

    def __init__(self, name, values, reads):
        self.name, self.values, self.reads = name, values, reads
        self.shape, self.dtype = values.shape, values.dtype

    def __getitem__(self, key):
        return xr.core.indexing.explicit_indexing_adapter(
            key, self.shape, xr.core.indexing.IndexingSupport.BASIC, self._read
        )

    def _read(self, key):
        self.reads.append(self.name)
        return self.values[key]


def _recorded_hierarchy(n_levels: int, per_level: int, reads: list, container: str):
    """A varying-intercept fit of n_levels x per_level observations (2 x 50 draws) whose
    posterior variables record their reads; a county index in constant_data."""
    rng = np.random.default_rng(11)
    county = np.repeat(np.arange(n_levels), per_level)
    a = rng.normal(0.0, 0.1, (2, 50, n_levels))
    y = rng.normal(size=county.size)
    log_lik = -0.5 * (y - a[..., county]) ** 2 - 0.919
    posterior = {
        name: xr.Variable(dims, xr.core.indexing.LazilyIndexedArray(_RecordedArray(name, v, reads)))
        for name, dims, v in [
            ("a", ("chain", "draw", "county"), a),
            ("sigma", ("chain", "draw"), np.abs(rng.normal(1, 0.05, (2, 50)))),
        ]
    }
    groups = {
        "posterior": xr.Dataset(posterior, coords={"chain": [0, 1], "draw": np.arange(50)}),
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), log_lik)}),
        "constant_data": xr.Dataset({"county_idx": ("obs", county)}),
    }
    if container == "DataTree, chunked":  # as opened with xr.open_dataset(..., chunks=)
        pytest.importorskip("dask")
        groups["log_likelihood"] = groups["log_likelihood"].chunk({"obs": 25_000})
    if container.startswith("DataTree"):
        return xr.DataTree.from_dict(groups)
    arviz = pytest.importorskip("arviz")
    if int(arviz.__version__.split(".")[0]) >= 1:
        pytest.skip("ArviZ 1.x has no InferenceData (DataTree is tested)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return arviz.InferenceData(**groups)


@pytest.mark.parametrize("container", ["DataTree", "DataTree, chunked", "InferenceData"])
def test_read_then_loo_of_a_large_hierarchy_reads_no_posterior_variable(container):
    """The unit and the structure are worked out on first use: read, then LOO over the
    observations (as az.loo), of 10^5 observations in 10^4 groups reads the log-likelihood
    and the draws' labels only, and still says which grouping the file records; asking
    for the unit then reads the draws (the index is confirmed by the log-likelihood)."""
    reads = []
    tree = _recorded_hierarchy(10_000, 10, reads, container)
    fit = read(tree)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 100 draws
        result = bayesij.loo(fit)
        waic = bayesij.waic(fit)
    assert reads == []
    assert result.n_units == waic.n_units == 100_000
    assert "a grouping by county (constant_data 'county_idx' indexes" in str(result)
    assert fit.units.name == "county" and fit.units.n_units == 10_000
    assert "a" in reads  # the unit, when asked for, is confirmed by the draws


def test_a_grouping_named_to_read_is_checked_at_once():
    groups, _ = _groups(log_prior=False)
    tree = xr.DataTree.from_dict(groups)
    with pytest.raises(ValueError, match=r"groups: found the name 'nothing', which is no grouping"):
        read(tree, groups="nothing")
    with pytest.raises(ValueError, match=r"groups: found the name 'nothing', which is no grouping"):
        read(read(tree), groups="nothing")
