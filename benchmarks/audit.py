"""Speed and peak memory of the whole audit, against PSIS-LOO on the same draws.

Fit: a linear regression with t(4) noise and 10 coefficients, N observations, 4 x 1000
exact posterior draws of the normal model with unknown sd and a flat prior
(:class:`bayesij.refit.conjugate.FlatPriorRegression`), the quantities the 10 coefficients and sigma
(21 AMIP questions: sign and significance of each coefficient, significance of sigma).
Every row runs in its own process, so that its peak RSS (``ru_maxrss``) is its own; it is
printed beside the log-likelihood matrix's size. Before its timed call a row loads its
compiled kernels and modules on a small input (``loo`` on 100 units; the audit on the first
200 units), so that neither row's time holds a first use that the other's does not. The
yardsticks in the same run are ``bayesij.loo`` and the installed ArviZ's PSIS-LOO
(``--skip-arviz`` leaves it out).

Rows: ``audit`` (``bayesij.audit``, the default reweighted AMIP), ``amip, each question
alone`` (``bayesij.amip`` of the 21 questions one after the other, which the audit shares
one pass for; per question in the last column), ``linearity`` (per quantity), ``loo``.
``--lazy N`` adds the audit of a lazy log-likelihood: a dask array of delayed blocks of
10,000 observations computed from the draws when read, against computing those blocks once
(the read ratio); with ``--phases``, that audit again in a process that samples its RSS
every 20 ms and prints the peak in each phase between the reads of the blocks (the pass,
the second-order model's rows, the linear answers, the sets' sums, after them).
``--dask N`` audits that lazy log-likelihood on a 2-worker dask
LocalCluster (worker processes, 3 GiB each): seconds, each worker's and the client's peak
RSS and whether a worker was restarted.

``--model normal`` fits the same regression with normal noise; ``--model logistic`` a
wells-like logistic regression (intercept and 3 covariates, 4 x 1000 independence-sampler
draws that repeat as PyMC's do; 8 questions: each coefficient's sign and significance).
``--model hierarchy`` a varying-intercept model (N / 100 groups, t(4) noise in the data, exact
Gibbs draws of ``mu``, ``tau``, ``sigma`` and the group effects) saved as a PyMC user saves
it, its group index in ``constant_data``: the default audit's unit is the group and its
quantities the global ``mu``, ``tau``, ``sigma`` (4 questions), and ``loo`` leaves out
groups; ``--model hierarchy-no-index`` the same fit saved without its group index, the
group effects and their non-centred offsets sharing a posterior dim: the unit is the
observation, the group effects local; ``--model hierarchy-by-name`` the centred fit as a
Stan fit read by name (``mu``, ``tau``, ``sigma``, ``alpha[1]``..., no group index), whose
group effects the log-likelihood tells (each observation moves with one ``alpha``): the
audit and ``loo`` rows only, for the three.

Run: ``python benchmarks/audit.py [--sizes 10000,50000,100000] [--lazy 1000000 [--phases]]
[--dask 200000]
[--model t4|normal|logistic|hierarchy|hierarchy-no-index] [--coefficients 10] [--chunk 10000]
[--rows audit,linearity]
[--repeat 5]`` (``--rows``: only these rows, with ``loo``; ``--repeat``: each in-memory row
timed that many times in its process, the median printed: single calls of a fraction of a
second vary by ±20 % on a shared machine; the audit's process then also times ``loo`` right
before each of its calls, and ``x loo paired`` is the median of those pairs' ratios, which a
drift of the machine's speed between the rows' processes does not move).
Targets (scale issue): at N = 50,000 the audit within 15 x ``loo`` and its peak RSS within
1.6 x the matrix; a lazy audit near the cost of computing the blocks once.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

N_COEF = 10
CHUNK = 10_000  # observations per lazy block
DASK_MEMORY = "3GiB"  # each worker's memory limit (--dask)
#: The fitted model (``--model``); the children inherit it.
MODELS = ("t4", "normal", "logistic", "hierarchy", "hierarchy-no-index", "hierarchy-by-name")
#: Observations per group of the hierarchy (``--model hierarchy``): N / 100 groups.
PER_GROUP = 100
MODEL = "t4"
#: Timed calls of each in-memory row (``--repeat``), their median reported; the children
#: inherit it.
REPEAT = 1


def _problem(n_obs: int, seed: int = 1):
    from bayesij.refit.conjugate import FlatPriorRegression

    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n_obs), rng.normal(size=(n_obs, N_COEF - 1))])
    noise = rng.normal(size=n_obs) if MODEL == "normal" else rng.standard_t(4, size=n_obs)
    y = X @ (rng.normal(size=N_COEF) * 0.05) + noise
    model = FlatPriorRegression(X, y)
    beta, sigma = model.draws(4000, rng)
    return model, beta, sigma


def _posterior(n_obs: int):
    """The container, its matrix made a block of draws at a time (no larger temporary)."""
    import bayesij

    if MODEL == "logistic":
        return _logistic_posterior(n_obs)
    if MODEL == "hierarchy-by-name":
        return _hierarchy_by_name(n_obs)
    if MODEL.startswith("hierarchy"):
        return _hierarchy_tree(n_obs, group_index=MODEL == "hierarchy")
    model, beta, sigma = _problem(n_obs)
    log_lik = np.empty((4000, n_obs))
    for start in range(0, 4000, 250):
        rows = slice(start, start + 250)
        log_lik[rows] = model.log_lik(beta[rows], sigma[rows])
    names = [f"beta[{k + 1}]" for k in range(N_COEF)] + ["sigma"]
    quantities = np.column_stack([beta, sigma]).reshape(4, 1000, -1)
    return bayesij.from_arrays(quantities, log_lik.reshape(4, 1000, n_obs), quantity_names=names)


def _logistic_posterior(n_obs: int):
    """A wells-like logistic regression (intercept and 3 covariates; the tests' helper):
    4 x 1000 exact-in-distribution draws of an independence sampler, repeated as PyMC's."""
    import bayesij

    sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
    from logistic_amip import log_lik, sample, wells_like

    X, y = wells_like(n_obs, seed=0)
    beta, _ = sample(X, y, seed=1)
    names = [f"beta[{k + 1}]" for k in range(beta.shape[-1])]
    return bayesij.from_arrays(beta, log_lik(X, y, beta), quantity_names=names)


def _hierarchy_draws(n_obs: int, seed: int = 1, warmup: int = 200):
    """Varying intercepts ``y ~ N(alpha[g], sigma)``, ``alpha ~ N(mu, tau)`` (flat priors on
    ``mu``, ``tau``, ``sigma``), N / 100 groups, t(4) noise in the data: 4 chains x 1000 draws
    of the exact Gibbs sampler (the tests' helper: each conditional from the groups' sums, so
    a sweep costs O(groups)). Returns y, each observation's group, and the draws (chains
    first)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
    from hierarchy_gibbs import gibbs_draws

    rng = np.random.default_rng(seed)
    n_groups = max(10, n_obs // PER_GROUP)
    group = np.arange(n_obs) % n_groups
    y = (1.0 + 0.5 * rng.normal(size=n_groups))[group] + rng.standard_t(4, size=n_obs)
    return y, group, gibbs_draws(y, group, rng, warmup, 1000)


def _hierarchy_tree(n_obs: int, group_index: bool = True):
    """The hierarchy as a PyMC user saves it: a DataTree with the posterior (``alpha`` over
    the ``group`` dim), the log-likelihood over ``obs`` and, with ``group_index``, the
    observations' group index in ``constant_data`` (the audit's unit is then the group;
    without it the observation, ``alpha`` and its non-centred offsets ``alpha_z`` read as
    local by the dim they share: a suspected grouping)."""
    import xarray as xr

    y, group, draws = _hierarchy_draws(n_obs)
    alpha, sigma = draws["alpha"].reshape(4000, -1), draws["sigma"].reshape(4000)
    log_lik = np.empty((4000, n_obs))
    for start in range(0, 4000, 250):
        rows = slice(start, start + 250)
        resid = (y - alpha[rows][:, group]) / sigma[rows, None]
        log_lik[rows] = -0.5 * resid**2 - np.log(sigma[rows])[:, None] - 0.5 * np.log(2 * np.pi)
    posterior = {k: (("chain", "draw"), draws[k]) for k in ("mu", "tau", "sigma")}
    posterior["alpha"] = (("chain", "draw", "group"), draws["alpha"])
    offsets = (draws["alpha"] - draws["mu"][..., None]) / draws["tau"][..., None]
    posterior["alpha_z"] = (("chain", "draw", "group"), offsets)  # as a non-centred fit saves
    groups = {
        "posterior": xr.Dataset(posterior),
        "log_likelihood": xr.Dataset(
            {"y": (("chain", "draw", "obs"), log_lik.reshape(4, 1000, -1))}
        ),
    }
    if group_index:
        groups["constant_data"] = xr.Dataset({"group_idx": ("obs", group)})
    return xr.DataTree.from_dict(groups)


def _hierarchy_by_name(n_obs: int):
    """The centred hierarchy as a Stan fit read by name (``bayesij.from_cmdstanpy``'s
    container): ``mu``, ``tau``, ``sigma``, ``alpha[1]``... and no group index."""
    import bayesij

    tree = _hierarchy_tree(n_obs, group_index=False)
    draws = tree["posterior"]
    alpha = draws["alpha"].values
    names = ["mu", "tau", "sigma"] + [f"alpha[{g + 1}]" for g in range(alpha.shape[-1])]
    scalars = [draws[k].values[..., None] for k in ("mu", "tau", "sigma")]
    return bayesij.from_arrays(
        np.concatenate([*scalars, alpha], axis=-1), _log_lik(tree), quantity_names=names
    )


def _questions(post) -> list:
    names = post.quantity_names
    if MODEL == "logistic":  # no scale: every coefficient's sign and significance
        return [(q, t) for q in names for t in ("sign", "significance")]
    return [(q, t) for q in names[:-1] for t in ("sign", "significance")] + [
        (names[-1], "significance")
    ]


def _lazy_tree(n_obs: int):
    """A DataTree whose log-likelihood is a dask array of delayed blocks, and a function
    computing every block once (the yardstick)."""
    import dask
    import dask.array as da
    import xarray as xr

    model, beta, sigma = _problem(n_obs)

    def block(start: int) -> np.ndarray:  # in place: one (4000, CHUNK) array, no temporary
        stop = min(start + CHUNK, n_obs)
        values = beta @ model.X[start:stop].T
        np.subtract(model.y[start:stop], values, out=values)
        values /= sigma[:, None]
        np.square(values, out=values)
        values *= -0.5
        values -= (np.log(sigma) + 0.5 * np.log(2 * np.pi))[:, None]
        return values.reshape(4, 1000, stop - start)

    starts = range(0, n_obs, CHUNK)
    parts = [
        da.from_delayed(dask.delayed(block)(s), shape=(4, 1000, min(CHUNK, n_obs - s)), dtype=float)
        for s in starts
    ]
    log_lik = xr.DataArray(da.concatenate(parts, axis=2), dims=("chain", "draw", "obs"))
    posterior = {
        f"beta{k + 1}": (("chain", "draw"), beta[:, k].reshape(4, 1000)) for k in range(N_COEF)
    }
    posterior["sigma"] = (("chain", "draw"), sigma.reshape(4, 1000))
    tree = xr.DataTree.from_dict(
        {"posterior": xr.Dataset(posterior), "log_likelihood": xr.Dataset({"y": log_lik})}
    )

    def blocks_once() -> None:  # each block computed and let go: never all at once
        for s in starts:
            block(s)

    return tree, blocks_once


def _dask_child(n_obs: int) -> dict:
    """The lazy audit on a 2-worker LocalCluster (worker processes, 1 thread each,
    ``DASK_MEMORY`` each): seconds, the client's and each worker's peak RSS, and whether a
    worker was restarted (a restarted worker comes back at another address)."""
    import distributed

    import bayesij

    tree, _ = _lazy_tree(n_obs)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit=DASK_MEMORY, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        before = set(client.scheduler_info()["workers"])
        start = time.perf_counter()
        bayesij.audit(tree, settings={"client": client})
        seconds = time.perf_counter() - start
        after = set(client.scheduler_info()["workers"])
        workers = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {
        "seconds": seconds,
        "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "workers": sorted(workers.values()),
        "restarted": before != after,
        "matrix": 8 * 4000 * n_obs,
    }


def _by_phase(call) -> list:
    """Run ``call`` sampling this process's RSS every 20 ms, with marks on entering and
    leaving each read of the lazy blocks (the pass, the second-order model's rows, the
    linear sets' sums): the peak RSS (bytes) between consecutive marks, by phase name, with
    the mapped files' share of it at that sample (``RssFile``: the libraries' code, 81 MiB
    of it LLVM's once numba has loaded the kernels; the rest, ``RssAnon``, is the heap and
    the arrays)."""
    import threading

    import bayesij.stats.amip as stats_amip
    import bayesij.stats.audit_pass as audit_pass

    marks, samples, done = [(time.perf_counter(), "before the pass")], [], threading.Event()
    names = {
        (audit_pass, "map_blocks"): ("the pass", "after the pass"),
        (stats_amip, "_ranked_rows"): ("the second read (ranked rows)", "the linear answers"),
        (stats_amip, "_summed_sets"): ("the sets' read", "after the sets"),
    }
    originals = {key: getattr(*key) for key in names}

    def marked(key):
        def run(*args, **kwargs):
            marks.append((time.perf_counter(), names[key][0]))
            try:
                return originals[key](*args, **kwargs)
            finally:
                marks.append((time.perf_counter(), names[key][1]))

        return run

    def sample() -> None:
        while not done.is_set():
            with open("/proc/self/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
            rss, files = (1024 * int(fields[key].split()[0]) for key in ("VmRSS", "RssFile"))
            samples.append((time.perf_counter(), rss, files))
            time.sleep(0.02)

    for key in names:
        setattr(*key, marked(key))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        call()
    finally:
        done.set()
        sampler.join()
        for key, original in originals.items():
            setattr(*key, original)
    ends = [t for t, _ in marks[1:]] + [float("inf")]
    return [
        (
            name,
            *max(((rss, files) for t, rss, files in samples if start <= t < end), default=(0, 0)),
        )
        for (start, name), end in zip(marks, ends, strict=True)
    ]


def _child(what: str, n_obs: int) -> dict:
    """One row in this process: seconds and peak RSS."""
    import bayesij

    warnings.simplefilter("ignore")
    if what == "dask audit":
        return _dask_child(n_obs)
    if what == "lazy phases":
        tree, _ = _lazy_tree(n_obs)
        return {"phases": _by_phase(lambda: bayesij.audit(tree))}
    if what in ("lazy audit", "blocks once"):
        tree, blocks_once = _lazy_tree(n_obs)
        call = blocks_once if what == "blocks once" else (lambda: bayesij.audit(tree))
        matrix_bytes = 8 * 4000 * n_obs
    else:
        post = _posterior(n_obs)
        matrix_bytes = _log_lik(post).nbytes
        bayesij.loo(_log_lik(post)[..., :100])  # compile / load the kernels
        if what == "audit":  # load the audit's other kernels and modules the same way
            _in_memory_calls(_first_units(post, 200))[what]()
        call = _peer_call(post) if what == "arviz loo" else _in_memory_calls(post)[what]
    times, paired = [], []
    for _ in range(REPEAT if what not in ("lazy audit", "blocks once") else 1):
        if what == "audit" and REPEAT > 1:  # loo right before, in this process
            start = time.perf_counter()
            bayesij.loo(post)
            paired.append(time.perf_counter() - start)
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ratio = float(np.median(np.divide(times, paired))) if paired else None
    return {
        "seconds": float(np.median(times)),
        "peak": peak,
        "matrix": matrix_bytes,
        "paired": ratio,
    }


def _log_lik(post) -> np.ndarray:
    """The (chain, draw, obs) log-likelihood of a Posterior or of the hierarchy's tree."""
    if hasattr(post, "log_lik"):
        return post.log_lik.values
    return post["log_likelihood"]["y"].values


def _first_units(post, n_units: int):
    """The posterior with the log-likelihood of its first ``n_units`` units only (of the
    hierarchy's tree: its first observations)."""
    import bayesij

    if not hasattr(post, "log_lik"):  # the hierarchy's tree
        kept = {"obs": slice(0, n_units)}
        return post.map_over_datasets(lambda d: d.isel(kept) if "obs" in d.dims else d)
    return bayesij.from_arrays(
        post.quantities.values,
        post.log_lik.values[..., :n_units],
        quantity_names=list(post.quantity_names),
    )


def _in_memory_calls(post) -> dict:
    """The rows on a posterior in memory, by name."""
    import bayesij

    return {
        "audit": lambda: bayesij.audit(post),
        "amip, each question alone": lambda: [
            bayesij.amip(post, q, t) for q, t in _questions(post)
        ],
        "linearity": lambda: bayesij.linearity(post),
        "loo": lambda: bayesij.loo(post),
    }


def _peer_call(post):
    """The installed ArviZ's PSIS-LOO, on an ArviZ container made before the timing."""
    from common import inference_data, peer_loo

    data, (_, loo, _, _) = inference_data(_log_lik(post)), peer_loo()
    return lambda: loo(data, pointwise=True)


def _run(what: str, n_obs: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--model", MODEL, "--repeat", str(REPEAT)]
        + ["--coefficients", str(N_COEF), "--chunk", str(CHUNK), "--child", what, str(n_obs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    global MODEL, REPEAT, N_COEF, CHUNK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,100000")
    parser.add_argument("--lazy", type=int, default=0, help="N of the lazy audit (0: none)")
    parser.add_argument(
        "--dask", type=int, default=0, help="N of the lazy audit on a 2-worker cluster (0: none)"
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="with --lazy: also the lazy audit's peak RSS in each phase (another process)",
    )
    parser.add_argument("--skip-arviz", action="store_true")
    parser.add_argument("--model", choices=MODELS, default="t4")
    parser.add_argument(
        "--rows", default="", help="comma-separated rows to run (default: all; loo is kept)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="timed calls of each in-memory row, in its process after the warm-up; the "
        "median is printed (default 1)",
    )
    parser.add_argument(
        "--coefficients",
        type=int,
        default=N_COEF,
        help=f"coefficients of the t4 / normal regression (default {N_COEF})",
    )
    parser.add_argument(
        "--chunk",
        type=int,
        default=CHUNK,
        help=f"observations per block of the lazy log-likelihood (default {CHUNK}: 305 MiB "
        "of 4000 draws; dask's own default chunk size, 128 MiB, is 4000)",
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    MODEL, REPEAT, N_COEF = args.model, max(1, args.repeat), max(2, args.coefficients)
    CHUNK = max(1, args.chunk)
    if (args.lazy or args.dask) and MODEL not in ("t4", "normal"):
        parser.error("--lazy and --dask build the regression's blocks: use --model t4 or normal")
    if args.child:
        print(json.dumps(_child(args.child[0], int(args.child[1]))))
        return
    print(
        f"{'N':>8} {'what':<26} {'seconds':>8} {'x loo':>7} {'peak GiB':>9} {'x matrix':>9} "
        f"{'per item':>9} {'x loo paired':>12}"
    )
    rows = ["loo", "audit", "amip, each question alone", "linearity"]
    if not args.skip_arviz:
        rows.append("arviz loo")
    if args.rows:
        asked = {r.strip() for r in args.rows.split(",")}
        unknown = asked - set(rows)
        if unknown:
            parser.error(f"--rows: unknown {sorted(unknown)}; expected some of {rows}")
        rows = [r for r in rows if r == "loo" or r in asked]
    if MODEL.startswith("hierarchy"):  # the audit's own units (groups): no per-question rows
        rows = [r for r in rows if r in ("loo", "audit")]
    for n_obs in [int(n) for n in args.sizes.split(",") if n]:
        loo_seconds = None
        for what in rows:
            got = _run(what, n_obs)
            loo_seconds = loo_seconds or got["seconds"]
            n_quantities = 4 if MODEL == "logistic" else N_COEF + 1
            n_questions = 8 if MODEL == "logistic" else 2 * N_COEF + 1
            items = {"amip, each question alone": n_questions, "linearity": n_quantities}.get(
                what, 1
            )
            ratio = got["seconds"] / loo_seconds
            print(
                f"{n_obs:>8} {what:<26} {got['seconds']:>8.2f} {ratio:>7.1f} "
                f"{got['peak'] / 2**30:>9.2f} {got['peak'] / got['matrix']:>9.2f} "
                f"{got['seconds'] / items:>9.3f}"
                + ("" if got.get("paired") is None else f" {got['paired']:>12.1f}"),
                flush=True,
            )
    if args.lazy:
        once = _run("blocks once", args.lazy)
        lazy = _run("lazy audit", args.lazy)
        print(
            f"{args.lazy:>8} lazy audit: {lazy['seconds']:.1f} s, computing the "
            f"{-(-args.lazy // CHUNK)} blocks once {once['seconds']:.1f} s: read ratio "
            f"{lazy['seconds'] / once['seconds']:.2f}; peak RSS {lazy['peak'] / 2**30:.2f} GiB "
            f"for a {lazy['matrix'] / 2**30:.1f} GiB log-likelihood never held whole "
            f"(computing the blocks once: {once['peak'] / 2**30:.2f} GiB)"
        )
        if args.phases:
            for name, peak, files in _run("lazy phases", args.lazy)["phases"]:
                print(
                    f"{'':>8}   peak RSS in {name}: {peak / 2**20:.0f} MiB "
                    f"({files / 2**20:.0f} MiB of it mapped files)"
                )

    if args.dask:
        got = _run("dask audit", args.dask)
        print(
            f"{args.dask:>8} audit on a 2-worker LocalCluster ({DASK_MEMORY} each): "
            f"{got['seconds']:.1f} s; worker peak RSS "
            f"{', '.join(f'{w / 2**30:.2f}' for w in got['workers'])} GiB, the client's "
            f"{got['peak'] / 2**30:.2f} GiB, for a {got['matrix'] / 2**30:.1f} GiB "
            f"log-likelihood; worker restarted: {'yes' if got['restarted'] else 'no'}"
        )


if __name__ == "__main__":
    main()
