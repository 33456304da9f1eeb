"""Where Stan programs and executables live: a private per-user cache folder (mode 0700,
owned by this user, not a link) and files written there without following links, left
alone when unchanged so that CmdStanPy keeps its executable. (Sampling with PyStan and
CmdStanPy: test_backends.py.)"""

import asyncio
import shutil
import stat
import threading
from pathlib import Path

import pytest

from bayesij.refit.stan import outside_event_loop, private_folder, write_private


def test_cmdstan_programs_go_to_a_private_folder_and_links_are_not_followed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = Path(private_folder())
    assert folder.is_relative_to(tmp_path) and stat.S_IMODE(folder.stat().st_mode) == 0o700
    program = folder / "model.stan"
    write_private(str(program), "parameters { real mu; }")
    assert stat.S_IMODE(program.stat().st_mode) == 0o600
    before = program.stat().st_mtime_ns
    write_private(str(program), "parameters { real mu; }")
    assert program.stat().st_mtime_ns == before, "unchanged: the executable stays valid"

    target = tmp_path / "someone_elses_file"
    target.write_text("keep")
    (folder / "planted.stan").symlink_to(target)
    with pytest.raises(PermissionError, match="symbolic links are not followed"):
        write_private(str(folder / "planted.stan"), "parameters { real mu; }")
    assert target.read_text() == "keep"

    folder.chmod(0o777)
    with pytest.raises(PermissionError, match=r"others can use \(mode 777\)"):
        private_folder()
    folder.chmod(0o700)
    shutil.rmtree(folder)
    folder.symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(PermissionError, match="a symbolic link or not a directory"):
        private_folder()


def _thread_name() -> str:
    return threading.current_thread().name


def test_outside_event_loop_runs_here_without_a_loop_and_in_one_stan_thread_inside_one():
    # A compiled Stan model's autodiff stack exists only in the thread that loaded it: every
    # PyStan call from inside a loop must go to the same thread, never a new one per call.
    assert outside_event_loop(_thread_name) == threading.current_thread().name

    async def inside() -> list[str]:
        return [outside_event_loop(_thread_name) for _ in range(3)]

    names = asyncio.run(inside()) + asyncio.run(inside())
    assert len(set(names)) == 1 and names[0].startswith("bayesij-stan")


def _fake_build(log_path, hold):
    """A stand-in for ``stan.build`` that logs when it runs, the CFLAGS and CXXFLAGS it sees and
    whether stderr is a real file, and holds the lock for ``hold`` seconds."""
    import os
    import sys
    import time

    def build(code, data=None, random_seed=None):
        start = time.monotonic()
        try:
            sys.stderr.fileno()
            real = True
        except (AttributeError, OSError, ValueError):
            real = False
        time.sleep(hold)
        with open(log_path, "a", encoding="utf-8") as log:
            flags = [os.environ.get("CFLAGS"), os.environ.get("CXXFLAGS")]
            log.write("\t".join(map(str, [start, time.monotonic(), *flags, real])) + "\n")
        return code

    return build


def _build_in_process(log_path, cache, patch=None):
    """build_model with the fake build and a cache folder under ``cache`` (set for good in
    a forked child; through ``patch``, a monkeypatch, in the test's own process)."""
    import contextlib
    import io
    import sys
    import types

    import httpstan.cache

    from bayesij.refit import stan as stan_module

    folder = lambda name: Path(cache) / name.replace("/", "_")  # noqa: E731
    fake = types.SimpleNamespace(build=_fake_build(log_path, 0.4))
    if patch is None:
        httpstan.cache.model_directory, sys.modules["stan"] = folder, fake
    else:
        patch.setattr(httpstan.cache, "model_directory", folder)
        patch.setitem(sys.modules, "stan", fake)
    with contextlib.redirect_stderr(io.StringIO()):
        stan_module.build_model("parameters { real x; }", {})


def test_a_program_is_built_by_one_process_at_a_time_without_debug_information(
    tmp_path, monkeypatch
):
    """Three processes build the same program at once: the builds never overlap (the lock
    beside httpstan's cache), each sees CFLAGS=-g0 and the Python's flags and -g0 as
    CXXFLAGS (no debug information, with setuptools old and new) and a stderr with a file
    (httpstan leaves its compiler-output file open otherwise); afterwards both are unset
    again. A user's own flags are kept."""
    import multiprocessing
    import os
    import sysconfig

    pytest.importorskip("httpstan")
    monkeypatch.delenv("CFLAGS", raising=False)
    monkeypatch.delenv("CXXFLAGS", raising=False)
    log = tmp_path / "log.txt"
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_build_in_process, args=(str(log), str(tmp_path))) for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    rows = sorted(
        (line.split("\t") for line in log.read_text().splitlines()), key=lambda r: float(r[0])
    )
    python_flags = sysconfig.get_config_var("CFLAGS") or ""
    assert len(rows) == 3 and {r[2] for r in rows} == {"-g0"} and {r[-1] for r in rows} == {"True"}
    assert {r[3] for r in rows} == {f"{python_flags} -g0".strip()}
    for (_, end, *_), (start, *_) in zip(rows, rows[1:], strict=False):
        assert float(start) >= float(end)  # one after another
    assert "CFLAGS" not in os.environ and "CXXFLAGS" not in os.environ
    monkeypatch.setenv("CFLAGS", "-O1")
    monkeypatch.setenv("CXXFLAGS", "-O2")
    _build_in_process(str(tmp_path / "own.txt"), str(tmp_path), patch=monkeypatch)
    assert (tmp_path / "own.txt").read_text().split("\t")[2:4] == ["-O1", "-O2"]


def _fit_of(draws, names):
    import numpy as np

    import bayesij

    return bayesij.from_arrays(draws, np.zeros(draws.shape[:2] + (2,)), quantity_names=names)


def test_stan_inits_put_each_chain_s_last_draw_in_the_shape_stan_names_give():
    import numpy as np

    from bayesij import refit

    rng = np.random.default_rng(3)
    names = ["tau", "Omega[1,1]", "Omega[2,1]", "Omega[1,2]", "Omega[2,2]", "Omega[1,3]"]
    names.append("Omega[2,3]")
    draws = rng.normal(size=(2, 20, len(names)))
    inits = refit.stan_inits(_fit_of(draws, names))
    assert len(inits) == 2 and sorted(inits[0]) == ["Omega", "tau"]
    for chain, start in enumerate(inits):
        last = dict(zip(names, draws[chain, -1], strict=True))
        assert start["tau"] == last["tau"] and isinstance(start["tau"], float)
        omega = np.array(start["Omega"])
        assert omega.shape == (2, 3)
        for i in range(2):
            for j in range(3):
                assert omega[i, j] == last[f"Omega[{i + 1},{j + 1}]"]
    # more chains than the fit's: each starts at a draw of its own, earlier ones in turn
    five = refit.stan_inits(_fit_of(draws, names), n_chains=5)
    assert [s["tau"] for s in five] == [draws[c % 2, -1 - c // 2, 0] for c in range(5)]


def test_stan_inits_refuse_names_stan_does_not_give_and_parameters_with_gaps():
    import numpy as np

    from bayesij import refit

    draws = np.zeros((2, 3, 2))
    with pytest.raises(ValueError, match=r"post: found the quantity 'beta\[0\]'; expected Stan"):
        refit.stan_inits(_fit_of(draws, ["beta[0]", "beta[1]"]))
    with pytest.raises(ValueError, match=r"post: found the quantity 'beta\[mom_hs\]'"):
        refit.stan_inits(_fit_of(draws, ["alpha", "beta[mom_hs]"]))
    with pytest.raises(
        ValueError, match=r"post: found no 'b\[2\]' among the elements of 'b' \(shape \(3,\)\)"
    ):
        refit.stan_inits(_fit_of(draws, ["b[1]", "b[3]"]))
    with pytest.raises(ValueError, match=r"post: found 'b' with 0 and 1 indices; expected one"):
        refit.stan_inits(_fit_of(draws, ["b[1]", "b"]))
    with pytest.raises(ValueError, match=r"post: found 'b' with 1 and 2 indices"):
        refit.stan_inits(_fit_of(draws, ["b[1]", "b[1,1]"]))
    with pytest.raises(ValueError, match=r"n_chains: found 7 for a fit of 2 chain\(s\) x 3"):
        refit.stan_inits(_fit_of(draws, ["a", "b"]), n_chains=7)


def test_a_stan_backend_s_repr_keeps_long_options_as_a_digest_that_tells_them_apart():
    import numpy as np

    from bayesij import refit

    data = {"J": 2, "y": [1.0, 2.0], "sigma": [1.0, 1.0], "weights": [1.0, 1.0]}
    starts = [{"mu": 0.5, "eta": list(np.linspace(0, 1, 40))}] * 4
    other = [{"mu": 0.6, "eta": list(np.linspace(0, 1, 40))}] * 4
    first = repr(refit.PyStanBackend("eight_schools", data, init=starts, num_warmup=150))
    second = repr(refit.PyStanBackend("eight_schools", data, init=other, num_warmup=150))
    assert len(first) < 300 and "'num_warmup': 150" in first and "<digest " in first
    assert first != second


@pytest.mark.stan
def test_samplings_leave_no_fit_in_httpstan_s_cache_and_keep_the_ones_there_before():
    import httpstan.cache
    import numpy as np
    from httpstan.models import calculate_model_name

    from bayesij.refit.stan import _fit_file, _fit_names, build_model, sample_pystan
    from bayesij.stan_models import example_data, stan_code

    code, data = stan_code("eight_schools"), example_data("eight_schools")
    fits = httpstan.cache.model_directory(calculate_model_name(code)) / "fits"
    options = {"num_chains": 2, "num_samples": 50, "num_warmup": 50}
    starts = [{"mu": 0.5}, {"mu": -0.5}]  # warm-started refits: each chain's own start
    sample_pystan(code, data, 11, **options)  # built, and its folder made
    fits.mkdir(exist_ok=True)
    kept = fits / "someone-elses-fit.jsonlines.gz"
    kept.write_bytes(b"")
    # Only these samplings' own files are looked at: another test's sampling of the
    # program, on another pytest-xdist worker, may write and remove its own meanwhile.
    model = build_model(code, data, 12)
    own = [
        _fit_file(name)
        for settings in (options, {**options, "init": starts})
        for name in _fit_names(model, settings)
    ]
    for path in own:
        path.unlink(missing_ok=True)  # left by an interrupted run
    first = sample_pystan(code, data, 12, **options)
    again = sample_pystan(code, data, 12, **options)  # sampled anew: the same draws
    sample_pystan(code, data, 12, init=starts, **options)
    assert len(set(own)) == 4 and not any(path.exists() for path in own) and kept.exists()
    np.testing.assert_array_equal(np.asarray(first["mu"]), np.asarray(again["mu"]))
    kept.unlink()


@pytest.mark.stan
def test_a_sampling_removes_only_its_own_fits_not_one_written_meanwhile():
    """Another process's PyStan sampling of the same program may write its fit while
    bayesij samples: that fit stays, for that process to read (removing every new file
    failed such a sampling with httpstan's "Fit ... not found")."""
    import httpstan.cache
    from httpstan.models import calculate_model_name

    from bayesij.refit.stan import _fit_file, _fit_names, _fits_not_kept, build_model
    from bayesij.stan_models import example_data, stan_code

    code, data = stan_code("eight_schools"), example_data("eight_schools")
    fits = httpstan.cache.model_directory(calculate_model_name(code)) / "fits"
    model = build_model(code, data, 13)
    options = {"num_chains": 2, "num_samples": 40, "num_warmup": 40}
    fits.mkdir(parents=True, exist_ok=True)
    meanwhile = fits / "another-process-s-fit.jsonlines.gz"
    for path in [*map(_fit_file, _fit_names(model, options)), meanwhile]:
        path.unlink(missing_ok=True)  # left by an interrupted run
    own = [_fit_file(name) for name in _fit_names(model, options)]
    # Only this sampling's files are counted: another test's sampling of the program, on
    # another pytest-xdist worker, may write and remove its own in this folder meanwhile.
    with _fits_not_kept(model, options):
        model.sample(**options)
        assert len(own) == 2 and all(path.exists() for path in own)  # its two chains
        meanwhile.write_bytes(b"")
    assert not any(path.exists() for path in own) and meanwhile.exists()
    meanwhile.unlink()


@pytest.mark.stan
def test_sampler_settings_httpstan_refuses_get_pystan_s_own_message():
    from bayesij.refit.stan import sample_pystan
    from bayesij.stan_models import example_data, stan_code

    code, data = stan_code("eight_schools"), example_data("eight_schools")
    with pytest.raises(ValueError, match="num_samples"):
        sample_pystan(code, data, 1, num_chains=1, num_samples=-1)


def test_stan_inits_read_an_arviz_fit_of_either_generation():
    import arviz as az
    import numpy as np

    from bayesij import refit

    rng = np.random.default_rng(0)
    groups = {
        "posterior": {"mu": rng.normal(size=(2, 10)), "beta": rng.normal(size=(2, 10, 3))},
        "log_likelihood": {"y": rng.normal(size=(2, 10, 5))},
    }
    one_dict = int(az.__version__.split(".")[0]) >= 1  # ArviZ 1.x: the groups as one dict
    fit = az.from_dict(groups) if one_dict else az.from_dict(**groups)
    start = refit.stan_inits(fit)[1]
    assert start["mu"] == groups["posterior"]["mu"][1, -1]
    assert start["beta"] == groups["posterior"]["beta"][1, -1].tolist()


@pytest.mark.stan
@pytest.mark.slow
def test_the_suite_s_stan_builds_read_its_precompiled_header(tmp_path, monkeypatch, capfd):
    """The suite precompiles Stan's model header with the compile command it reckons
    httpstan's builds run (tests/helpers/stan_header.py) and includes it in every build: a
    build of a new program (into an empty cache folder) shows that GCC used it (``-H``
    marks a precompiled header it read with ``!``, one it refused with ``x``). Half of the
    first run's Stan builds hangs on this."""
    import os

    import httpstan.cache
    from stan_header import HEADER_NAME, compiler_is_gcc

    from bayesij.refit.stan import build_model

    if HEADER_NAME not in os.environ.get("CFLAGS", ""):
        pytest.skip("the suite's Stan header could not be set up on this machine")
    if not compiler_is_gcc(os.environ):
        pytest.skip("the compiler is not GCC: the marks of -H read here are GCC's")
    for name in ("CFLAGS", "CXXFLAGS"):
        monkeypatch.setenv(name, f"{os.environ[name]} -H")
    folder = lambda name: tmp_path / name.replace("/", "_")  # noqa: E731
    monkeypatch.setattr(httpstan.cache, "model_directory", folder)
    capfd.readouterr()
    build_model("parameters { real header_check; }", {})
    compiler = capfd.readouterr().err + "".join(
        p.read_text() for p in tmp_path.glob("*/stderr.log")
    )
    used = [line for line in compiler.splitlines() if HEADER_NAME in line]
    assert used and used[0].startswith("! ") and used[0].endswith(".gch"), used[:3]


def test_default_build_flags_are_only_those_the_environment_lacks():
    import sysconfig

    from bayesij.refit.stan import BUILD_CFLAGS, default_build_flags

    python_flags = sysconfig.get_config_var("CFLAGS") or ""
    assert default_build_flags({}) == {
        "CFLAGS": BUILD_CFLAGS,
        "CXXFLAGS": f"{python_flags} {BUILD_CFLAGS}".strip(),
    }
    assert default_build_flags({"CFLAGS": "-O1"}) == {
        "CXXFLAGS": f"{python_flags} {BUILD_CFLAGS}".strip()
    }
    assert default_build_flags({"CFLAGS": "", "CXXFLAGS": "-O2"}) == {}


#: What httpstan 4.17.0's build of any program gives on Python 3.13 when imported.
UNDEFINED = "stan_services_model_x.so: undefined symbol: _PyThreadState_UncheckedGet"


def _failed_build(monkeypatch, loader_error):
    """``stan.build`` failing as PyStan fails when httpstan's server cannot import the model
    it built (a plain-text 500 read as JSON), and httpstan's loader raising
    ``loader_error`` (None: the model loads)."""
    stan = pytest.importorskip("stan")
    import httpstan.models

    def build(code, data=None, random_seed=None):
        raise ValueError("unexpected content after document: line 1 column 5 (char 4)")

    def load(model_name):
        if loader_error is not None:
            raise loader_error
        return object()

    monkeypatch.setattr(stan, "build", build)
    monkeypatch.setattr(httpstan.models, "import_services_extension_module", load)


def test_a_build_this_python_cannot_load_is_said_plainly(monkeypatch):
    import sys

    from bayesij.refit.stan import UnloadableStanModel, build_model

    _failed_build(monkeypatch, ImportError(UNDEFINED))
    with pytest.raises(UnloadableStanModel) as raised:
        build_model("parameters { real y_unloadable; }", data={})
    message = str(raised.value)
    python = ".".join(map(str, sys.version_info[:3]))
    assert message.startswith("PyStan: found a Stan program that compiled but that this ")
    assert f"this Python ({python}) cannot load ({UNDEFINED}; httpstan " in message
    assert "expected a Python whose extensions httpstan builds (3.11 or 3.12)" in message
    assert "CmdStanPyBackend" in message and "PyMCBackend" in message
    assert isinstance(raised.value, ImportError)  # an install's problem, not bad data
    assert isinstance(raised.value.__cause__, ValueError)  # PyStan's own error kept


@pytest.mark.parametrize("loader_error", [None, KeyError("no module built")])
def test_a_build_that_fails_otherwise_keeps_pystans_error(monkeypatch, loader_error):
    from bayesij.refit.stan import build_model

    _failed_build(monkeypatch, loader_error)
    with pytest.raises(ValueError, match="unexpected content after document"):
        build_model("parameters { real y_other_failure; }", data={})
