"""Lazy inputs read once: each estimator over a dask log-likelihood of delayed blocks,
against computing those blocks once.

The log-likelihood is a normal linear model's, evaluated from (4 x 1000) draws of its
coefficients and sd when a block is read: ``--blocks`` delayed dask chunks of ``--width``
observations each (so reading a chunk costs a real computation, as a model's
log-likelihood does). Each estimator's time is divided by the time to compute every block
once (the read ratio): 1 means the estimator costs nothing beyond reading its input once;
a chunk computed twice would show as 2 or more.

Run: ``python benchmarks/lazy.py [--blocks 10] [--width 10000] [--repeats 3]``. Target
(scale issue): ``loo`` at most 1.5x, and ``waic``, ``influence``, ``ij_covariance``,
``linearity`` and the linear ``amip`` likewise.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def _tree(n_blocks: int, width: int):
    """A DataTree with a lazy log_likelihood group of delayed blocks, and a function that
    computes every block once."""
    import dask
    import dask.array as da
    import xarray as xr

    rng = np.random.default_rng(0)
    n_obs = n_blocks * width
    y, x = rng.standard_t(4, size=n_obs), rng.normal(size=n_obs)
    beta = rng.normal(0, 0.02, size=(4, 1000, 2))
    sigma = np.exp(rng.normal(0.3, 0.01, size=(4, 1000)))

    def block(i: int) -> np.ndarray:
        part = slice(i * width, (i + 1) * width)
        mu = beta[..., :1] + beta[..., 1:] * x[part]
        resid = (y[part] - mu) / sigma[..., None]
        return -0.5 * resid**2 - np.log(sigma)[..., None] - 0.5 * np.log(2 * np.pi)

    chunks = [
        da.from_delayed(dask.delayed(block)(i), shape=(4, 1000, width), dtype=float)
        for i in range(n_blocks)
    ]
    log_lik = xr.DataArray(da.concatenate(chunks, axis=2), dims=("chain", "draw", "obs"))
    draws = {"beta0": beta[..., 0], "beta1": beta[..., 1], "sigma": sigma}
    posterior = xr.Dataset({k: (("chain", "draw"), v) for k, v in draws.items()})
    tree = xr.DataTree.from_dict(
        {"posterior": posterior, "log_likelihood": xr.Dataset({"y": log_lik})}
    )

    def once() -> None:
        for i in range(n_blocks):
            block(i)

    return tree, once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--width", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import bayesij

    warnings.simplefilter("ignore")
    tree, once = _tree(args.blocks, args.width)
    bayesij.loo(np.zeros((4, 100, 3)))  # compile / load the kernels
    once()  # warm the caches
    print(
        f"{args.blocks} blocks of 4 x 1000 x {args.width}; each estimator timed {args.repeats} "
        "times, each time right after computing the blocks once (the reference), and its "
        "ratio the median of the paired ratios (this shared machine's speed drifts by 20 % "
        "from minute to minute: pairs keep both sides of a ratio in the same minute)"
    )
    calls = {
        "loo": lambda: bayesij.loo(tree),
        "waic": lambda: bayesij.waic(tree),
        "influence": lambda: bayesij.influence(tree),
        "ij_covariance": lambda: bayesij.ij_covariance(tree),
        "linearity": lambda: bayesij.linearity(tree),
        "amip (linear)": lambda: bayesij.amip(tree, "beta1", "sign", method="linear"),
        "audit (linear AMIP)": lambda: bayesij.audit(tree),
    }
    for name, call in calls.items():
        ratios, seconds, references = [], [], []
        for _ in range(args.repeats):
            references.append(_timed(once))
            seconds.append(_timed(call))
            ratios.append(seconds[-1] / references[-1])
        print(
            f"{name:<22} {np.median(seconds):7.2f} s (blocks once {np.median(references):5.2f} s)"
            f"  {np.median(ratios):5.2f} x the blocks once (pairs {min(ratios):.2f}-"
            f"{max(ratios):.2f})"
        )


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
