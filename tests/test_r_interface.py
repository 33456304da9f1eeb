"""The R interface (R/bayesij.R) on a real rstanarm fit: Rscript fits rstanarm's kidiq
regression, ``bayesij_audit()`` audits it through the command line and returns its tables
as data frames and the HTML report; its PSIS-LOO equals R loo's on the same draws.

Needs Debian's R (``r-base-core``, ``r-cran-rstanarm``, ``r-cran-jsonlite``; .ci/run installs
them where apt-get can): skipped, with the reason, where they are missing."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _rscript() -> str:
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("Rscript not found (install r-base-core, r-cran-rstanarm, r-cran-jsonlite)")
    probe = subprocess.run(
        [rscript, "-e", 'cat(all(sapply(c("rstanarm", "jsonlite", "loo"), requireNamespace)))'],
        capture_output=True,
        text=True,
    )
    if probe.stdout.strip() != "TRUE":
        pytest.skip("R lacks rstanarm, jsonlite or loo (r-cran-rstanarm, r-cran-jsonlite)")
    return rscript


SCRIPT = r"""
source(file.path(Sys.getenv("ROOT"), "R", "bayesij.R"))
suppressPackageStartupMessages(library(rstanarm))
data(kidiq, package = "rstanarm")
out <- Sys.getenv("OUT")
fit <- stan_glm(kid_score ~ mom_hs + mom_iq, data = kidiq, chains = 2, iter = 1000,
                seed = 1, refresh = 0)
audit <- bayesij_audit(fit, report = file.path(out, "audit.html"),
                       python = Sys.getenv("PYTHON"), quiet = TRUE)
print(audit)
ll <- log_lik(fit)
r_eff <- loo::relative_eff(exp(ll), chain_id = rep(1:2, each = 500))
reference <- loo::loo(ll, r_eff = r_eff)
psis <- audit$tables[["PSIS-LOO"]]
amip <- audit$tables[["Influential subsets (AMIP)"]]
bad <- tryCatch(bayesij_audit(kidiq, python = Sys.getenv("PYTHON")),
                error = function(e) conditionMessage(e))
jsonlite::write_json(list(
  elpd_r = reference$estimates["elpd_loo", "Estimate"],
  p_r = reference$estimates["p_loo", "Estimate"],
  elpd_ours = psis$Estimate[psis$row == "elpd_loo"],
  p_ours = psis$Estimate[psis$row == "p_loo"],
  classes = unname(sapply(audit$tables, function(t) class(t)[1])),
  titles = names(audit$tables),
  amip_quantities = unique(amip$quantity),
  summary = audit$summary,
  bad = bad
), file.path(out, "result.json"), auto_unbox = TRUE, digits = NA)
"""


@pytest.mark.slow
def test_an_rstanarm_fit_is_audited_from_r(tmp_path):
    rscript = _rscript()
    environment = {**os.environ, "ROOT": str(ROOT), "OUT": str(tmp_path), "PYTHON": sys.executable}
    run = subprocess.run(
        [rscript, "-e", SCRIPT], capture_output=True, text=True, env=environment, timeout=900
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    # The same draws: R loo 2.5 (whole-chain r_eff) and bayesij's R loo convention differ
    # only in the PSIS tail length, a few thousandths of a nat here.
    assert result["elpd_ours"] == pytest.approx(result["elpd_r"], abs=1e-3)
    assert result["p_ours"] == pytest.approx(result["p_r"], abs=1e-3)
    assert set(result["classes"]) == {"data.frame"}
    assert "Influential subsets (AMIP)" in result["titles"]
    assert {"mom_hs", "mom_iq"} <= set(result["amip_quantities"])
    assert result["summary"] and "Model audit" not in result["summary"][0]
    assert "fit: found an object of class data.frame" in result["bad"]
    page = (tmp_path / "audit.html").read_text(encoding="utf-8")
    assert "<meta name='viewport'" in page and "mom_hs" in page
