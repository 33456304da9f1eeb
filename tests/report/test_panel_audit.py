"""The audit of a real hierarchical PyMC fit (Grunfeld's panel of 11 firms x 20 years,
non-centred firm intercepts), sampled for real: the firm is found as the unit, the per-firm
parameters are not called misspecified, the verdict is short and keeps the firms' names, and
the CLI says the same from the saved netCDF file."""

import re
import time

import numpy as np
import pytest

import bayesij
from bayesij.cli import main

pytest.importorskip("pymc", reason="PyMC is sampled in the Python 3.12 environment")
from bayesij.demo import sample_grunfeld  # noqa: E402

FIRMS = 11


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    fit = sample_grunfeld(draws=1000, chains=4, seed=1)
    path = tmp_path_factory.mktemp("panel") / "panel.nc"
    fit.to_netcdf(str(path))
    return fit, path


def _words(lines) -> int:
    return len(" ".join(lines).split())


def test_the_firm_is_found_as_the_unit_and_the_firm_parameters_are_local(panel):
    fit, _ = panel
    result = bayesij.audit(fit)
    assert result.units.name == "firm" and result.ij.n_units == FIRMS
    assert "constant_data 'firm_idx' indexes the posterior dim 'firm'" in result.heading()
    # Default: the global variables, none of the per-firm ones.
    assert result.quantities == ["mu_a", "b[value]", "b[capital]", "tau_a", "sigma"]
    assert set(result.loo.pointwise.index) == set(fit["posterior"]["firm"].values.tolist())
    summary = result.summary()
    assert len(summary) <= 8 and _words(summary) < 300
    for line in summary:  # a misspecification is said of global quantities only
        assert not ("misspecified" in line and re.search(r"\ba\[|z_a\[", line)), line


def test_no_misspecification_claim_about_group_level_parameters(panel):
    fit, _ = panel
    for groups in (None, False):  # over firms, and over observations
        result = bayesij.audit(fit, groups=groups, var_names=["~a"], settings={"amip": False})
        table = result.comparison_table
        local = [q for q in table.index if q.startswith("z_a[")]
        assert len(local) == FIRMS
        assert (table.loc[local, "verdict"] == "not applicable").all()
        for line in result.summary():
            assert not ("misspecified" in line and re.search(r"\ba\[|z_a\[", line)), line
        for q in table.index:  # a verdict on a ratio only when the ratio is measured
            if table.loc[q, "verdict"] in ("agree", "posterior smaller", "posterior larger"):
                integrated = table.loc[q, "why"] == "integrated"
                ij = result.ij_integrated if integrated else result.ij
                assert ij.variance_corrected[q] > 2 * ij.mcse[q]
                assert integrated or result.ij.linearity.verdict[q] == "reliable"
        assert "nan" not in result.to_markdown().lower()


def test_firm_names_label_parameters_and_units(panel):
    fit, _ = panel
    result = bayesij.audit(fit, var_names=["a"], settings={"targets": ("sign",), "waic": False})
    assert result.quantities[0] == "a[General Motors]"
    markdown = result.to_markdown()
    assert "| a[General Motors] |" in markdown and "Westinghouse" in markdown
    selected = bayesij.audit(
        fit, quantities=["a[US Steel]", "a[3]"], settings={"amip": False, "loo": False}
    )
    assert selected.quantities == ["a[US Steel]", "a[General Electric]"]
    with pytest.raises(ValueError, match=r"'a\[General Motors\]'.*1-based position"):
        bayesij.audit(fit, quantities=["a[0]"])
    with pytest.raises(ValueError, match=r"groups: found the name 'year'.*\(firm, firm_idx\)"):
        bayesij.audit(fit, groups="year")


def test_the_cli_audits_the_saved_file_as_python_does(panel, capsys, tmp_path):
    fit, path = panel
    start = time.perf_counter()
    assert main(["audit", str(path), "--out", str(tmp_path / "panel.html")]) == 0
    elapsed = time.perf_counter() - start
    out = capsys.readouterr().out
    assert "Units: 11 firms (constant_data 'firm_idx'" in out
    assert "## Power-scaling sensitivity" in out  # the file's log_prior group is used
    summary = out.split("## Summary")[1].split("\n## ")[0]
    bullets = [line for line in summary.splitlines() if line.startswith("- ")]
    assert bullets == [f"- {line}" for line in bayesij.audit(fit).summary()]
    assert elapsed < 60  # 3-4 s on the 2-core machine; the figure is in docs/guide/audit.md
    assert main(["audit", str(path), "--groups", "year"]) == 2
    assert "bayesij: error: groups: found the name 'year'" in capsys.readouterr().err
    assert (
        main(
            [
                "audit",
                str(path),
                "--no-groups",
                "--var-names",
                "b",
                "sigma",
                "--compare",
                f"again={path}",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Units: 220 observations (groups=False)" in out
    summary = out.split("## Summary")[1].split("\n## ")[0]
    assert "| b[value] |" in out and "mu_a" not in summary
    assert "Stacking weights of the fits compared" in out
    page = (tmp_path / "panel.html").read_text()
    assert page.count("<details") >= 5 and 'class="verdict"' in page


def test_the_firm_to_refit_first_is_one_psis_cannot_judge(panel):
    """The IJ over the firms' conditional terms fails its linearity check for b[value] and
    names the firm to refit first: one whose k-hat is above the threshold, so that PSIS
    cannot judge the linear change there; only a refit can. The verdict on b[value] comes
    from the IJ over the firms' integrated terms instead (the normal hierarchy recovered
    from the draws), which approximates the cluster bootstrap.

    An exact refit does not land in one place: with PyMC 5.28's draws the linear change was
    the closer (exact -0.006, linear -0.0096, PSIS +0.046 at k-hat 1.03), with PyMC 6.4's
    once the PSIS one and once neither (exact -0.011 +- 0.004, both approximations above
    +0.007). "Undetermined, a refit decides" is the answer those refits bear out; this test
    once claimed more (the linear change missing the exact one by more than 2 Monte Carlo
    errors), which refits of up to 4 x 4000 draws did not bear out (1.3-1.6 of them)."""
    fit, _ = panel
    result = bayesij.audit(fit, settings={"amip": False})
    row = result.comparison_table.loc["b[value]"]
    assert row["why"] == "integrated" and "cluster bootstrap" in row["reason"]
    checked = result.ij.linearity
    assert checked.verdict["b[value]"] in ("doubtful", "unreliable")
    firm = checked.refit_first("b[value]", 1)[0]
    assert firm in set(fit["posterior"]["firm"].values.tolist())
    assert checked.pareto_k[firm] > checked.k_threshold


def test_the_hierarchy_is_read_as_one(panel):
    """The firm intercepts a = mu_a + tau_a z_a: z_a is found as the non-centred offset (its
    log-prior term is N(0, 1)) and a as deterministic; the audit power-scales the top-level
    priors only, as psense(prior_selection="top-level") does; every global quantity's
    IJ-vs-posterior verdict is read off the IJ over the firms' integrated terms, none off the
    weight IJ. The audit recovers the normal hierarchy from the draws: its terms are the
    model's own (PyMCDensity), and its verdicts on sigma, b[capital] (posterior smaller: sd
    ratios 1.97 and 2.42) and tau_a (larger: 0.54) are those of a cluster bootstrap of 40
    exact PyMC refits, 2026-12-07 (variances 0.00079 +- 0.00018 against the posterior's
    0.00025, 0.0170 +- 0.0058 against 0.0017, 0.0188 +- 0.0043 against 0.0329); those on
    b[value] and mu_a are undetermined by the IJ's Monte Carlo error (the bootstrap's:
    0.0256 +- 0.0055 against 0.0113, 0.0248 +- 0.0053 against 0.047)."""
    fit, _ = panel
    structure = bayesij.read(fit).structure
    assert structure.auxiliaries == ("z_a",) and structure.deterministics == ("a",)
    assert set(structure.top_level_priors) == {"mu_a", "tau_a", "b", "sigma"}
    assert structure.group_level_priors == ("z_a",) and set(structure.unit_effects) == {"z_a", "a"}
    result = bayesij.audit(fit, settings={"amip": False})
    assert set(result.prior_selection) == set(structure.top_level_priors)
    top = bayesij.psense(fit, quantities=result.quantities, prior_selection="top-level")
    assert (result.sensitivity["prior"] - top["prior"]).abs().max() < 1e-12
    table = result.comparison_table
    assert (table["why"] == "integrated").all()
    assert table.loc[["sigma", "b[capital]"], "verdict"].eq("posterior smaller").all()
    assert table.loc["tau_a", "verdict"] == "posterior larger"
    # b[value]'s exact sd ratio is 1.50 +- 0.16, mu_a's 0.73 +- 0.08: the IJ's bands, 1.12
    # to 1.33 and 0.64 to 0.89, span an edge of agreement (b[value] once read "agree")
    for q, edge in (("b[value]", "across 1.25"), ("mu_a", "across 0.8")):
        assert table.loc[q, "verdict"] == "undetermined" and edge in table.loc[q, "reason"]
    assert result.integrated_from == (
        "z_a ~ N(0, 1), entering as tau_a * z_a, of the normal hierarchy (residual sd sigma) "
        "recovered from the draws"
    )
    from bayesij import refit
    from bayesij.data.fit import read
    from bayesij.demo import grunfeld_model
    from bayesij.stats.integrated import recovered_terms

    recovered, _ = recovered_terms(read(fit))
    own = refit.PyMCDensity(grunfeld_model()).group_log_lik(fit, "z_a")
    np.testing.assert_allclose(recovered.values, own.values, rtol=1e-9, atol=1e-9)


def test_a_panel_saved_without_its_firm_index_is_not_audited_as_if_flat(panel):
    """The same fit saved without constant_data (a plain NumPy index in the model): the
    report names the 'firm' dim and how to pass it, audits the 5 global quantities only,
    claims no misspecification and headlines no per-firm variable."""
    fit, _ = panel
    groups = {
        name: fit[name].to_dataset() if hasattr(fit[name], "to_dataset") else fit[name]
        for name in ("posterior", "log_likelihood", "log_prior", "observed_data")
    }
    import xarray as xr

    bare = xr.DataTree.from_dict(groups)
    result = bayesij.audit(bare)
    assert result.units.suspected == ("firm",)
    assert "the posterior dim 'firm' (11 levels, on z_a, a) looks like one" in result.heading()
    assert result.quantities == ["mu_a", "b[value]", "b[capital]", "tau_a", "sigma"]
    summary = " ".join(result.summary())
    assert "misspecified" not in summary and not re.search(r"\ba\[|z_a\[", summary)
