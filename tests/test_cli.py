"""The bayesij command: influence on CmdStan CSV and netCDF files, the demo, errors."""

import subprocess
import sys

import numpy as np
import pytest
from pystan_loads import skip_unless_pystan_loads

from bayesij.cli import main
from peers import from_dict, load_example
from stan_csv import write_cmdstan_csv


@pytest.mark.stan
def test_influence_on_cmdstan_csv(pystan_fit, tmp_path, capsys):
    fit, data = pystan_fit
    paths = write_cmdstan_csv(fit, tmp_path)
    assert main(["influence", *map(str, paths), "--quantity", "beta", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 quantities (beta[1], beta[2]), 30 observations" in out
    assert "IJ bootstrap covariance over 30 observations (600 draws, 3 chain(s))" in out
    influential = out.split("Most influential units")[1].split("IJ bootstrap")[0]
    assert influential.count("beta[1]") == 1 and "beta[2]  1" in influential


def test_influence_on_netcdf(tmp_path, capsys):
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    assert main(["influence", str(path), "--quantity", "mu", "--quantity", "tau"]) == 0
    out = capsys.readouterr().out
    assert "2 quantities (mu, tau), 8 observations" in out
    assert "Choate" in out or "Deerfield" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["influence", "missing.csv"], "FILES: found missing file(s) ['missing.csv']"),
        (["influence", "setup.cfg"], "expected CmdStan CSV files (.csv) or one"),
    ],
)
def test_errors_are_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "setup.cfg").write_text("[x]\n")
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_console_script_is_installed():
    result = subprocess.run(
        [sys.executable, "-m", "bayesij.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "demo" in result.stdout and "influence" in result.stdout


def test_demo_says_in_one_line_that_this_python_cannot_load_pystans_build(capsys, monkeypatch):
    # Python 3.13 with httpstan 4.17.0: the program compiles, its module does not load.
    from bayesij.refit import stan
    from bayesij.refit.stan import UnloadableStanModel

    said = "PyStan: found a Stan program that compiled but that this Python (3.13.0) cannot load"

    def unloadable(code, data, random_seed=None):
        raise UnloadableStanModel(said + " (...)")

    monkeypatch.setattr(stan, "build_model", unloadable)
    assert main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"bayesij: error: {said} (...)"
    assert "Traceback" not in err

    def missing(code, data, random_seed=None):
        raise ImportError("No module named 'something_missing'")

    monkeypatch.setattr(stan, "build_model", missing)
    with pytest.raises(ImportError, match="something_missing"):  # a traceback, not a line
        main(["demo"])


@pytest.mark.stan
@pytest.mark.slow
def test_demo_command_prints_the_audit(capsys, tmp_path):
    skip_unless_pystan_loads()
    report = tmp_path / "demo.html"
    assert main(["demo", "--out", str(report)]) == 0
    out = capsys.readouterr().out
    for section in [
        "# Model audit",
        "## Summary",
        "## Standard errors (posterior vs IJ)",
        "## Influential subsets (AMIP)",
        "## PSIS-LOO",
        "## Pareto k-hat",
    ]:
        assert section in out
    # The planted high-leverage points (ids 78-80) decide the sign of the slope: two of them,
    # the normal likelihood's sets banded around their second-order change (a Stan refit
    # without 79 and 78 takes the slope's mean from -0.209 to 0.062; without 78 alone to
    # -0.109); the question the verdict leaves open is answered by refits in the loop, which
    # the demo runs.
    assert "A handful of observations decides" in out
    assert "dropping 2 observations of 80 (79, 78) is predicted to reverse the sign" in out
    # Halving sigma is decided from the draws (the normal set's removal worked out): not
    # reachable within 8 observations, as a Stan refit without the 8 the search drops
    # says (sigma's mean 1.13 to 0.715, a change of -0.415, inside the row's band). With
    # no question left open, the demo asks for no refits.
    row = next(line for line in out.splitlines() if line.startswith("| sigma | halve |"))
    assert "| not reachable |" in row
    low, high = (float(end) for end in row.rstrip(" |").split("|")[-1].split(" – "))
    assert low <= -0.415 <= high
    assert "## The refits the verdict asks for" not in out


@pytest.mark.stan
@pytest.mark.slow
def test_the_demo_refits_a_question_left_open_with_pystan(capsys, monkeypatch):
    # The demo's last step, on a question made open (halving sigma): refits of the demo's
    # Stan model in the loop, whose sigma after the drop lies in the draws' band.
    from bayesij import audit
    from bayesij.cli import _refit_what_is_undetermined
    from bayesij.demo import fit_demo
    from bayesij.report import summary

    post, data = fit_demo()
    result = audit(post)
    sigma = result.amip[next(key for key in result.amip if key[0] == "sigma")]
    monkeypatch.setattr(summary, "open_questions", lambda searched: [sigma])
    monkeypatch.setattr(summary, "first_order_only", lambda searched: [])
    capsys.readouterr()
    _refit_what_is_undetermined(result, post, data)
    out = capsys.readouterr().out
    assert out.startswith("## The refits the verdict asks for")
    assert "refits in the loop (PyStan, " in out and "it does not halve sigma" in out
    after = float(out.split("sigma's mean goes from ")[1].split(" to ")[1].split(":")[0])
    low, high = sigma.change_interval
    assert low <= after - sigma.original_value <= high


@pytest.mark.stan
def test_audit_command_on_cmdstan_csv_writes_html(pystan_fit, tmp_path, capsys):
    fit, data = pystan_fit
    paths = write_cmdstan_csv(fit, tmp_path)
    out_file = tmp_path / "report.html"
    assert main(["audit", *map(str, paths), "--quantity", "beta", "--out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "## Summary" in out and "beta[1]" in out and "beta[2]" in out
    assert "alpha" not in out.split("## Summary")[1].split("##")[0]
    page = out_file.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<img") >= 4


def test_version_and_argument_errors(tmp_path, capsys):
    from bayesij import __version__

    with pytest.raises(SystemExit) as exit_code:
        main(["--version"])
    assert exit_code.value.code == 0 and capsys.readouterr().out.strip() == (
        f"bayesij {__version__}"
    )
    for argv, message in [
        (["influence", "x.nc", "--top", "0"], "--top: found '0'; expected a whole number"),
        (["influence", "x.nc", "--top", "-1"], "--top: found '-1'; expected a whole number"),
        (["audit", "x.nc", "--target", "flip"], "--target: found 'flip'; expected sign,"),
    ]:
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err


def test_audit_options_reach_the_audit(tmp_path, capsys):
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    groups = tmp_path / "groups.txt"
    groups.write_text("\n".join(["a", "a", "b", "b", "c", "c", "d", "d"]) + "\n")
    argv = [
        "audit",
        str(path),
        "--quantity",
        "mu",
        "--target",
        "sign",
        "--target",
        "-2.5",
        "--groups",
        str(groups),
        "--alpha-max",
        "0.5",
    ]
    assert main([*argv, "--progress"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "bayesij audit [" in captured.err and captured.err.rstrip().endswith(": done")
    assert "Units: 4 groups (groups given)" in out
    assert "| target | answer |" in out and "| mu | change by -2.5 |" in out  # the Delta target
    assert "| mean |" in out  # a Delta target moves the mean
    table = out.split("Most influential groups")[1]
    top = table.split("| mu |")[1].split("\n")[0].replace("|", " ").split()
    assert sorted(top) == ["a", "b", "c", "d"]  # the units are the four groups
    assert main([*argv[:2], "--out", str(tmp_path / "missing" / "r.html")]) == 2
    assert "--out: found" in capsys.readouterr().err


def test_a_small_file_declaring_gigabytes_is_refused_before_it_is_read(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "huge.nc"
    with h5py.File(path, "w") as handle:
        group = handle.create_group("log_likelihood")
        for name, n in (("chain", 4), ("draw", 1000), ("obs", 100_000)):
            group.create_dataset(name, data=np.arange(n)).make_scale(name)
        y = group.create_dataset(
            "y", shape=(4, 1000, 100_000), dtype="f8", compression="gzip", chunks=(1, 1000, 1000)
        )
        for axis, name in enumerate(("chain", "draw", "obs")):
            y.dims[axis].attach_scale(group[name])
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bayesij: error: FILES: found 'huge.nc', a" in err and "declaring 2.98 GiB" in err


def test_an_unwritable_out_is_refused_before_the_audit(tmp_path, capsys, monkeypatch):
    import os

    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and real(p, mode))
    assert main(["audit", str(path), "--out", str(tmp_path / "r.html")]) == 2
    assert "bayesij: error: --out: found" in capsys.readouterr().err


def test_groups_from_an_unreadable_file_or_a_missing_column(tmp_path, capsys):
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    binary = tmp_path / "groups.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81" * 50)
    assert main(["audit", str(path), "--groups", str(binary)]) == 2
    assert "bayesij: error: --groups: found" in capsys.readouterr().err
    table = tmp_path / "table.csv"
    table.write_text("school,region\n" + "\n".join(f"s{i},r{i % 2}" for i in range(8)) + "\n")
    assert main(["audit", str(path), "--groups", f"{table}:county"]) == 2
    assert "no column 'county'" in capsys.readouterr().err
    assert main(["audit", str(path), "--groups", f"{table}:region", "--quantity", "mu"]) == 0
    assert "Units: 2 groups (groups given)" in capsys.readouterr().out


def test_group_label_files_are_read_as_written(tmp_path, capsys):
    """Labels are text as written ('01' is not '1', 'NA' is North America), and a file of
    N + 1 lines is refused, not guessed to have a header (which shifted every observation
    into its neighbour's group)."""
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(["01", "1", "NA", "NA", "01", "1", "NA", "EU"]) + "\n")
    assert main(["audit", str(path), "--groups", str(labels), "--quantity", "mu"]) == 0
    out = capsys.readouterr().out
    assert "Units: 4 groups (groups given)" in out
    table = out.split("Most influential groups")[1]
    top = table.split("| mu |")[1].split("\n")[0].replace("|", " ").split()
    assert sorted(top) == ["01", "1", "EU", "NA"]
    labels.write_text("\n".join(["region", *"aabbccdd"]) + "\n")
    assert main(["audit", str(path), "--groups", str(labels)]) == 2
    err = capsys.readouterr().err
    assert "--groups: found 9 label(s) in 'labels.txt' for 8 observations" in err
    assert "--groups FILE:COLUMN" in err
    labels.write_text("a\na\n\nb\nc\nc\nd\nd\n")
    assert main(["audit", str(path), "--groups", str(labels)]) == 2
    assert "--groups: found 7 label(s)" in capsys.readouterr().err  # a blank line is no label
    labels.write_text("g,x\na,1\na,1\n ,1\nb,1\nc,1\nc,1\nd,1\nd,1\n")
    assert main(["audit", str(path), "--groups", f"{labels}:g"]) == 2
    assert "--groups: found 1 empty label(s) in 'labels.txt' (first on line 4)" in (
        capsys.readouterr().err
    )


def test_files_that_are_folders_or_not_netcdf_are_named(tmp_path, capsys):
    text = tmp_path / "notes.nc"
    text.write_text("not a netCDF file\n")
    assert main(["audit", str(tmp_path)]) == 2
    assert "FILES: found the folder(s)" in capsys.readouterr().err
    assert main(["audit", str(text)]) == 2
    err = capsys.readouterr().err.strip()
    assert "FILES: found 'notes.nc', which is not a netCDF file" in err
    assert len(err.splitlines()) == 1 and "install" not in err
    good = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(good))
    assert main(["audit", str(good), "--compare", f"m={text}"]) == 2
    assert "--compare: found 'notes.nc', which is not a netCDF file" in capsys.readouterr().err
    assert main(["audit", str(good), "--compare", f"m={tmp_path}"]) == 2
    assert "--compare: found" in capsys.readouterr().err


def _field_fit_files(tmp_path, n: int = 400):
    """A flat-prior regression's exact draws saved as a netCDF fit, with its gradient file."""
    from bayesij.refit import FlatPriorRegressionBackend

    rng = np.random.default_rng(5)
    x = rng.normal(size=n)
    y = 0.3 * x + np.where(rng.random(n) < 0.02, 20.0, 1.0) * rng.normal(size=n)
    backend = FlatPriorRegressionBackend(np.column_stack([np.ones(n), x]), y, draws=2000)
    post, gradient, unconstrained = backend.fit_with_gradient(np.ones(n))
    values = post.quantities.values
    idata = from_dict(  # either ArviZ generation
        posterior={"beta": values[..., :2], "sigma": values[..., 2]},
        log_likelihood={"y": post.log_lik.values},
    )
    fit_path, gradient_path = tmp_path / "field.nc", tmp_path / "gradient.npz"
    idata.to_netcdf(str(fit_path))
    np.savez(gradient_path, gradient=gradient, unconstrained=unconstrained)
    return fit_path, gradient_path, idata, (gradient, unconstrained)


def test_a_gradient_file_gives_the_audit_what_the_python_api_gives_it(tmp_path, capsys):
    import bayesij

    fit_path, gradient_path, idata, arrays = _field_fit_files(tmp_path)
    argv = ["audit", str(fit_path), "--quantity", "beta", "--method", "linear"]
    assert main([*argv, "--gradient", str(gradient_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    expected = bayesij.audit(
        idata,
        quantities=["beta"],
        grad_log_posterior=arrays,
        settings={"method": "linear", "progress": False},
    )
    assert out.strip() == expected.to_markdown().strip()
    assert "control variates from the log posterior's gradient" in out
    assert main([*argv, "--no-progress"]) == 0  # without it: no control variates
    assert "control variates from the log posterior's gradient" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"gradient": np.zeros((2, 3, 4))}, "expected exactly 'gradient' and 'unconstrained'"),
        (
            {"gradient": np.zeros((2, 3, 4)), "unconstrained": np.zeros((2, 3, 5))},
            "expected two arrays of one shape (chains, draws, parameters)",
        ),
        (
            {"gradient": np.zeros((6, 4)), "unconstrained": np.zeros((6, 4))},
            "found 'gradient' of shape (6, 4)",
        ),
    ],
)
def test_a_gradient_file_without_its_two_arrays_is_refused(tmp_path, capsys, arrays, message):
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    np.savez(tmp_path / "g.npz", **arrays)
    assert main(["audit", str(path), "--gradient", str(tmp_path / "g.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesij: error: --gradient: found") and message in err


def test_a_gradient_saved_as_one_npy_array_is_refused_by_name(tmp_path, capsys):
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    np.save(tmp_path / "grad.npy", np.zeros((4, 500, 10)))
    assert main(["audit", str(path), "--gradient", str(tmp_path / "grad.npy")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesij: error: --gradient: found") and "a single array" in err


def test_a_groups_file_whose_name_holds_a_colon_is_read_whole(tmp_path, capsys):
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    (tmp_path / "dir").mkdir()
    labels = tmp_path / "dir" / "groups:v2.txt"
    labels.write_text("\n".join(str(i // 2) for i in range(8)) + "\n")
    assert main(["audit", str(path), "--groups", str(labels), "--quantity", "mu"]) == 0
    assert "4 groups (groups given)" in capsys.readouterr().out


def test_model_options_that_do_not_go_together_are_named(tmp_path, capsys):
    path = tmp_path / "eight.nc"
    load_example("centered_eight").to_netcdf(str(path))
    text = tmp_path / "notes.txt"
    text.write_text("not numpy\n")
    data = tmp_path / "data.json"
    data.write_text('{"N": 8, "y": [1, 2, 3, 4, 5, 6, 7, 8]}')
    cases = [
        (["--gradient", str(text)], "--gradient: found"),
        (["--gradient", str(tmp_path / "none.npz")], "No such file or directory"),
        (["--stan-data", str(data)], "--stan-data: found it without --stan-model"),
        (["--refits", "3"], "--refits: found it without --stan-model"),
        (["--stan-model", "linear_regression"], "--stan-model: found it without --stan-data"),
        (
            ["--stan-model", "linear_regression", "--stan-data", str(data)],
            "--stan-data: found no 'weights'",
        ),
        (["--stan-model", "linear_regression", "--stan-data", str(text)], "not JSON"),
        (
            ["--stan-model", "m.stan", "--stan-data", str(data), "--gradient", str(text)],
            "--gradient: found it with --stan-model",
        ),
    ]
    for options, message in cases:
        assert main(["audit", str(path), *options]) == 2, options
        err = capsys.readouterr().err
        assert err.startswith("bayesij: error: ") and message in err, (options, err)


@pytest.mark.stan
@pytest.mark.slow
def test_a_stan_program_gives_the_audit_its_gradient_and_its_refits(pystan_fit, tmp_path, capsys):
    """--stan-model with --stan-data: the program's gradient through PyStan (control
    variates) and, with --refits, refits in the loop — the Python API's audit exactly."""
    import json

    import bayesij
    from bayesij.refit import PyStanBackend, PyStanDensity

    fit, data = pystan_fit
    paths = write_cmdstan_csv(fit, tmp_path)
    data_path = tmp_path / "data.json"
    data_path.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    options = ["--quantity", "beta[2]", "--target", "significance", "--alpha-max", "0.5"]
    model = ["--stan-model", "linear_regression", "--stan-data", str(data_path)]
    argv = ["audit", *map(str, paths), *options, *model, "--refits", "2", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    expected = bayesij.audit(
        bayesij.from_cmdstanpy([str(p) for p in paths]),
        quantities=["beta[2]"],
        grad_log_posterior=PyStanDensity("linear_regression", data),
        backend=PyStanBackend("linear_regression", data),
        settings={
            "targets": ("significance",),
            "alpha_max": 0.5,
            "max_refits": 2,
            "progress": False,
        },
    )
    assert out.strip() == expected.to_markdown().strip()
    assert "control variates from the log posterior's gradient" in out
    assert "refit" in out.split("Influential subsets")[1]


@pytest.mark.processes
def test_audit_on_a_dask_scheduler_reads_the_file_lazily(tmp_path, capsys, monkeypatch):
    # --scheduler: the netCDF file opened lazily (its log-likelihood in dask blocks), the
    # pass run on the cluster's workers; the report is the lazy audit's without a cluster.
    import warnings

    import bayesij
    from bayesij.cli import load_fit

    distributed = pytest.importorskip("distributed")
    fit_path, _, _, _ = _field_fit_files(tmp_path)
    argv = ["audit", str(fit_path), "--quantity", "beta", "--no-progress"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cluster's start-up notices
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        )
        with cluster:
            assert main([*argv, "--scheduler", cluster.scheduler_address]) == 0
    out = capsys.readouterr().out
    lazy = load_fit([str(fit_path)], lazy=True)
    assert hasattr(lazy["log_likelihood"]["y"].data, "dask")
    expected = bayesij.audit(lazy, quantities=["beta"], settings={"progress": False})
    assert out.strip() == expected.to_markdown().strip()
    assert "lazy log-likelihood" in out and expected.method == "linear"
    # no scheduler there: one line naming the option
    monkeypatch.setattr("bayesij.cli.SCHEDULER_TIMEOUT", "1s")
    assert main([*argv, "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "--scheduler: found no scheduler answering at 'tcp://127.0.0.1:9'" in (
        capsys.readouterr().err
    )
