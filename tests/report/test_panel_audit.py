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
from bayesij.demo import grunfeld_model, sample_grunfeld  # noqa: E402

FIRMS = 11


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    fit = sample_grunfeld(draws=1000, chains=4, seed=1)
    path = tmp_path_factory.mktemp("panel") / "panel.nc"
    fit.to_netcdf(str(path))
    return fit, path


def _mean_mcse(draws: np.ndarray) -> float:
    """Monte Carlo SE of the mean of (chain, draw) draws: sd / sqrt(ESS), the ESS of the
    mean as R loo's relative_eff computes it."""
    from bayesij.array.ess import relative_eff

    ess = relative_eff(draws[..., None])[0] * draws.size
    return float(draws.std() / np.sqrt(ess))


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
    assert "misspecified" not in " ".join(summary)


def test_no_misspecification_claim_about_group_level_parameters(panel):
    fit, _ = panel
    for groups in (None, False):  # over firms, and over observations
        result = bayesij.audit(fit, groups=groups, var_names=["~a"], amip=False)
        table = result.comparison_table
        local = [q for q in table.index if q.startswith("z_a[")]
        assert len(local) == FIRMS
        assert (table.loc[local, "verdict"] == "not applicable").all()
        for line in result.summary():
            assert not ("misspecified" in line and re.search(r"\ba\[|z_a\[", line)), line
        for q in table.index:  # a verdict on a ratio only when the ratio is measured
            if table.loc[q, "verdict"] in ("agree", "posterior smaller", "posterior larger"):
                assert result.ij.variance_corrected[q] > 2 * result.ij.mcse[q]
                assert result.ij.linearity.verdict[q] == "reliable"
        assert "nan" not in result.to_markdown().lower()


def test_firm_names_label_parameters_and_units(panel):
    fit, _ = panel
    result = bayesij.audit(fit, var_names=["a"], targets=("sign",), waic=False)
    assert result.quantities[0] == "a[General Motors]"
    markdown = result.to_markdown()
    assert "| a[General Motors] |" in markdown and "Westinghouse" in markdown
    selected = bayesij.audit(fit, quantities=["a[US Steel]", "a[3]"], amip=False, loo=False)
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
    assert elapsed < 60  # 3-4 s on the 2-core machine; the figure is in the README
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
    assert "| b[value] |" in out and "mu_a" not in out.split("## Summary")[1]
    assert "Stacking weights of the fits compared" in out
    page = (tmp_path / "panel.html").read_text()
    assert page.count("<details") >= 5 and 'class="verdict"' in page


@pytest.mark.slow
def test_the_firm_named_for_a_refit_is_one_psis_cannot_judge_and_a_refit_decides(panel):
    """The audit calls b[value] undetermined (the IJ's linear approximation over firms is not
    reliable) and names the firm to refit first: one whose k-hat is above the threshold, so
    that PSIS cannot judge the linear change there. An exact PyMC refit without that firm
    bears the caution out: the PSIS change at that k-hat misses the exact one by more than
    4 Monte Carlo errors (the linear change is the closer here: only the refit could say).

    (Before, this test claimed that the linear change missed the exact one by more than 2
    Monte Carlo errors; with PyMC 5.28's draws the miss was 1.3-1.6 of them in four refits
    of up to 4 x 4000 draws: the claim was not borne out, and the test is what the audit
    says.)"""
    from bayesij import refit

    fit, _ = panel
    result = bayesij.audit(fit, amip=False)
    assert result.comparison_table.loc["b[value]", "why"] == "linearity"
    checked = result.ij.linearity
    firm = checked.refit_first("b[value]", 1)[0]
    assert checked.pareto_k[firm] > checked.k_threshold
    codes = np.asarray(fit["constant_data"]["firm_idx"].values)
    names = list(fit["posterior"]["firm"].values)
    weights = np.where(codes == names.index(firm), 0.0, 1.0)
    backend = refit.PyMCBackend(grunfeld_model(), draws=1000, chains=4, seed=2)
    refitted = backend.fit(weights).quantities.sel(quantity="b[value]").values
    before = fit["posterior"]["b"].sel(coef="value").values
    exact = float(refitted.mean() - before.mean())
    mcse = float(np.hypot(_mean_mcse(refitted), _mean_mcse(before)))
    psis = float(checked.delta_is.loc["b[value]", firm])
    linear = float(checked.delta_lin.loc["b[value]", firm])
    assert abs(psis - exact) > 4 * mcse
    assert abs(linear - exact) < abs(psis - exact)
