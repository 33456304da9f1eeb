"""CSV files written by R (tests/reference/r_csv/export.R: an rstanarm fit of mtcars,
``write.csv(as.matrix(fit))``, ``write.csv(log_lik(fit))`` and the posterior package's draws
format), read by bayesij.from_csv and the CLI, and PSIS-LOO on them equal to R loo's."""

import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesij
from bayesij.cli import main

HERE = Path(__file__).parents[1] / "reference" / "r_csv"
DRAWS, LOG_LIK = HERE / "draws.csv", HERE / "log_lik.csv"


def test_as_matrix_and_log_lik_exports():
    post = bayesij.from_csv(DRAWS, LOG_LIK, chains=4)
    assert post.quantity_names == ["(Intercept)", "wt", "hp", "sigma"]
    assert (post.n_chains, post.log_lik.sizes["draw"], post.n_obs) == (4, 250, 32)
    assert post.obs_names[:2] == ["Mazda RX4", "Mazda RX4 Wag"]  # mtcars' row names
    raw = pd.read_csv(DRAWS, index_col=0)
    np.testing.assert_array_equal(post.quantities.values[1, :, 1], raw["wt"].to_numpy()[250:500])


def test_the_draws_format_gives_the_same_container():
    stacked = bayesij.from_csv(DRAWS, LOG_LIK, chains=4)
    tagged = bayesij.from_csv(HERE / "draws_format.csv", LOG_LIK)  # chains from .chain
    np.testing.assert_array_equal(tagged.quantities.values, stacked.quantities.values)
    assert tagged.quantity_names == stacked.quantity_names


def test_psis_loo_equals_r_loo_on_the_exported_matrix():
    post = bayesij.from_csv(DRAWS, LOG_LIK, chains=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = bayesij.loo(
            post, convention=bayesij.PsisOptions(ties="position", ddof=1)
        )  # R's conventions; r_eff as R's
    expected = pd.read_csv(HERE / "loo_pointwise.csv")
    np.testing.assert_allclose(ours.pointwise["elpd_loo"], expected["elpd_loo"], rtol=1e-9)
    np.testing.assert_allclose(ours.pointwise["pareto_k"], expected["pareto_k"], rtol=1e-8)
    estimates = pd.read_csv(HERE / "loo_estimates.csv", index_col=0)
    np.testing.assert_allclose(ours.estimates().to_numpy(), estimates.to_numpy(), rtol=1e-9)


def test_the_cli_audits_r_exports(capsys):
    argv = [
        "audit",
        "--draws",
        str(DRAWS),
        "--log-lik",
        str(LOG_LIK),
        "--chains",
        "4",
        "--quantity",
        "wt",
        "--target",
        "sign",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Posterior: 4 chain(s) x 250 draws, 1 quantities (wt), 32 observations" in out


def test_bad_csv_input(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"chains: found 3 chains for 1000 draws"):
        bayesij.from_csv(DRAWS, LOG_LIK, chains=3)
    with pytest.raises(ValueError, match=r"draws: found no file at"):
        bayesij.from_csv(tmp_path / "missing.csv", LOG_LIK)
    short = tmp_path / "short.csv"
    pd.read_csv(LOG_LIK, index_col=0).iloc[:500].to_csv(short)
    with pytest.raises(ValueError, match=r"log_lik: found 500 rows while draws has 1000"):
        bayesij.from_csv(DRAWS, short)
    words = tmp_path / "words.csv"
    shutil.copy(DRAWS, words)
    table = pd.read_csv(words, index_col=0)
    table["wt"] = "heavy"
    table.to_csv(words)
    with pytest.raises(ValueError, match=r"draws: found non-numeric column\(s\) \['wt'\]"):
        bayesij.from_csv(words, LOG_LIK)
    assert main(["audit", "--draws", str(DRAWS)]) == 2
    assert "--log-lik: found none with --draws" in capsys.readouterr().err
