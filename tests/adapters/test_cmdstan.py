"""The CmdStan adapter: CmdStan-format CSV files (written from a real PyStan fit, read
without CmdStan), a CmdStanPy fit object, Stan-style element names, and real CmdStanPy
sampling where CmdStan is installed."""

import shutil

import numpy as np
import pytest

import bayesij
from stan_csv import write_cmdstan_csv

pytestmark = pytest.mark.stan


def test_cmdstan_csv_files_read_without_cmdstan(pystan_fit, tmp_path):
    fit, _ = pystan_fit
    paths = write_cmdstan_csv(fit, tmp_path)
    from_csv = bayesij.from_cmdstanpy([str(p) for p in paths])
    from_fit = bayesij.from_pystan(fit)
    assert from_csv.quantity_names == from_fit.quantity_names
    assert from_csv.obs_names == from_fit.obs_names
    np.testing.assert_allclose(from_csv.quantities.values, from_fit.quantities.values, rtol=1e-15)
    np.testing.assert_allclose(from_csv.log_lik.values, from_fit.log_lik.values, rtol=1e-15)
    with pytest.raises(ValueError, match=r"fit_or_csv_files: found the same file more than"):
        bayesij.from_cmdstanpy([str(paths[0]), str(paths[1]), str(paths[0])])


def test_cmdstanpy_fit_object(pystan_fit, tmp_path):
    import cmdstanpy

    fit, _ = pystan_fit
    paths = write_cmdstan_csv(fit, tmp_path)
    cmdstan_fit = cmdstanpy.from_csv([str(p) for p in paths])
    assert isinstance(cmdstan_fit, cmdstanpy.CmdStanMCMC)
    post = bayesij.from_cmdstanpy(cmdstan_fit, quantities=["alpha", "sigma"])
    assert post.quantity_names == ["alpha", "sigma"]
    np.testing.assert_allclose(
        post.quantities.sel(quantity="sigma").values,
        np.asarray(cmdstan_fit.draws(concat_chains=False))[
            :, :, list(cmdstan_fit.column_names).index("sigma")
        ].T,
    )


def test_missing_csv_file_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"fit_or_csv_files: found missing file"):
        bayesij.from_cmdstanpy([str(tmp_path / "nope.csv")])


def _cmdstan_installed() -> bool:
    try:
        import cmdstanpy

        cmdstanpy.cmdstan_path()
        return shutil.which("make") is not None
    except Exception:
        return False


@pytest.mark.skipif(
    not _cmdstan_installed(),
    reason="CmdStan is not installed (cmdstanpy.cmdstan_path() fails); "
    "CmdStan CSV files are covered by the tests above",
)
def test_real_cmdstanpy_sampling(tmp_path):
    import cmdstanpy

    from bayesij.stan_models import stan_code
    from conftest import _linear_regression_data

    source = tmp_path / "linear_regression.stan"
    source.write_text(stan_code("linear_regression"))
    model = cmdstanpy.CmdStanModel(stan_file=str(source))
    data = _linear_regression_data()
    fit = model.sample(
        data={k: np.asarray(v).tolist() for k, v in data.items()},
        chains=2,
        iter_sampling=200,
        show_progress=False,
    )
    post = bayesij.from_cmdstanpy(fit)
    assert post.n_obs == data["N"] and post.n_chains == 2
