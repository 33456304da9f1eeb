"""Shared pieces of the benchmarks: timing with peak memory, inputs, the report table."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np


def warm_up(*functions) -> None:
    """Call each function once on a tiny input, so that import costs are not timed."""
    _, log_lik = regression_draws(20)
    idata = inference_data(log_lik)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for function in functions:
            function(idata if getattr(function, "__module__", "").startswith("arviz") else log_lik)


#: Untraced calls are repeated up to this many times (the fastest counts), until they have
#: taken ``REPEAT_SECONDS`` in all: a short call on a shared machine varies by 20 %.
REPEATS = 3
REPEAT_SECONDS = 60.0


def timed(function, *args, **kwargs) -> tuple[float, float, object]:
    """Seconds, tracemalloc peak (MiB) and result of a call. The time is the fastest of
    up to ``REPEATS`` calls without tracemalloc (which slows every allocation: 0.5 s of
    bayesij's 1.6 s at N = 100,000; calls stop once ``REPEAT_SECONDS`` have passed, so a
    45-second peer runs twice), the peak from one more, traced call; NumPy reports its
    buffers to tracemalloc."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times: list[float] = []
        while len(times) < REPEATS and sum(times) < REPEAT_SECONDS:
            start = time.perf_counter()
            result = function(*args, **kwargs)
            times.append(time.perf_counter() - start)
        tracemalloc.start()
        function(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return min(times), peak / 2**20, result


def measure(function, *args, **kwargs) -> tuple[float, float]:
    """Seconds and tracemalloc peak (MiB) of one call."""
    seconds, peak, _ = timed(function, *args, **kwargs)
    return seconds, peak


def regression_draws(n_obs: int, n_quantities: int = 10, seed: int = 0):
    """4 chains x 1000 draws of quantities and an (4, 1000, n_obs) log-likelihood."""
    rng = np.random.default_rng(seed)
    f = rng.normal(size=(4, 1000, n_quantities))
    log_lik = -0.5 * (rng.normal(size=(1, 1, n_obs)) - f[:, :, :1]) ** 2
    log_lik += 0.1 * rng.normal(size=log_lik.shape)
    return f, log_lik


def log_sum_exp_pass(log_lik: np.ndarray) -> np.ndarray:
    """The unit of cost (docs/architecture.md, "Scale"): one streaming log-sum-exp over draws."""
    matrix = log_lik.reshape(-1, log_lik.shape[-1])
    top = matrix.max(axis=0)
    return top + np.log(np.exp(matrix - top).sum(axis=0))


def arviz_1() -> bool:
    """Whether ArviZ 1.x (DataTree, arviz-stats) is installed rather than ArviZ 0.23."""
    import arviz as az

    return int(az.__version__.split(".")[0]) >= 1


def inference_data(log_lik: np.ndarray):
    """The log-likelihood as the installed ArviZ's data: InferenceData (0.23) or DataTree."""
    import arviz as az

    groups = {"posterior": {"m": log_lik[:, :, 0]}, "log_likelihood": {"y": log_lik}}
    return az.from_dict(groups) if arviz_1() else az.from_dict(**groups)


def peer_loo():
    """The installed ArviZ's PSIS-LOO: its name, the function, the bayesij options that make
    the same computation, and how to read its pointwise elpd."""
    if arviz_1():
        import arviz_stats

        options = {"tail_rule": "floor", "ties": "position", "ddof": 1}
        return "arviz-stats loo", arviz_stats.loo, options, lambda r: r.elpd_i.values
    import arviz as az

    return "arviz 0.23 az.loo", az.loo, {"tail_rule": "ceil"}, lambda r: r.loo_i.values


def report(n_obs: int, rows: dict, peer: str) -> None:
    """Print seconds, peak memory and ratios to the log-sum-exp pass and to the peer."""
    unit = rows["log-sum-exp pass"][0]
    reference = rows.get(peer, (np.nan,))[0]
    for what, (seconds, peak) in rows.items():
        print(
            f"{n_obs:>7} {what:<30} {seconds:>8.2f} {peak:>9.0f} {seconds / unit:>7.1f} "
            f"{reference / seconds:>10.1f}"
        )


HEADER = f"{'N':>7} {'what':<30} {'seconds':>8} {'peak MiB':>9} {'x lse':>7} {'speed-up':>10}"


#: R's side of :func:`r_loo`: read the matrix (written column-major: no copy in R), time
#: ``loo::loo`` alone, write the seconds, the "max used" memory of R's heap since the reset
#: (MiB) and the pointwise elpd.
_R_LOO = r"""
args <- commandArgs(trailingOnly = TRUE)
n_draws <- as.integer(args[2]); n_obs <- as.integer(args[3]); r_eff <- as.numeric(args[4])
cores <- as.integer(args[6])
con <- file(args[1], "rb"); x <- readBin(con, "double", n = n_draws * n_obs); close(con)
dim(x) <- c(n_draws, n_obs)
invisible(gc(reset = TRUE))
seconds <- system.time(result <- loo::loo(x, r_eff = rep(r_eff, n_obs), cores = cores))
peak <- sum(gc()[, 6])
con <- file(args[5], "wb")
writeBin(c(seconds[["elapsed"]], peak, result$pointwise[, "elpd_loo"]), con); close(con)
"""


def r_available() -> bool:
    """Whether Rscript and R's loo package are installed."""
    if shutil.which("Rscript") is None:
        return False
    return subprocess.run(["Rscript", "-e", "library(loo)"], capture_output=True).returncode == 0


def r_loo(n_obs: int, r_eff: float):
    """R loo's ``loo()`` on :func:`regression_draws` ``(n_obs)``: seconds, peak MiB of R's
    heap, the pointwise elpd and the cores used (2, or 1 where two workers' copies would
    exceed the available memory); None where R fails. The matrix is written to a file and
    freed here before R starts: R's ``loo()`` holds several copies of it (at N = 100,000
    about 19 GiB with one core), more than fit beside Python's."""
    _, log_lik = regression_draws(n_obs)
    matrix = log_lik.reshape(-1, n_obs)
    shape, nbytes = matrix.shape, matrix.nbytes
    with tempfile.TemporaryDirectory() as folder:
        source, result, script = (Path(folder) / name for name in ("m.bin", "r.bin", "loo.R"))
        matrix.T.astype("<f8").tofile(source)  # column-major for R
        del log_lik, matrix
        script.write_text(_R_LOO)
        cores = 2 if 8 * nbytes < _available_bytes() else 1
        command = [str(a) for a in (script, source, *shape, r_eff, result, cores)]
        status = subprocess.run(
            ["Rscript", *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if status.returncode != 0:
            return None
        values = np.fromfile(result, dtype="<f8")
    return values[0], values[1], values[2:], cores


def _available_bytes() -> int:
    """MemAvailable of /proc/meminfo (0 where unknown: one core for R)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def amip_gradient(gradient, unconstrained) -> dict:
    """The keywords that give :func:`bayesij.amip` the log posterior's gradient at the
    draws and those draws: ``grad_log_posterior=(gradient, unconstrained)``, or, on a
    bayesij from before that (these benchmarks run on older versions too, for before/after
    tables), the two keywords ``grad_log_posterior`` and ``unconstrained``."""
    import inspect

    import bayesij

    if "unconstrained" in inspect.signature(bayesij.amip).parameters:
        return {"grad_log_posterior": gradient, "unconstrained": unconstrained}
    return {"grad_log_posterior": (gradient, unconstrained)}
