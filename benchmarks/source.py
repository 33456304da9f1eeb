"""The one source door costs nothing: the estimators that read the log-likelihood through
``as_source`` / ``map_blocks`` timed on a matrix in memory (N x 4 chains x 1000 draws), a
dask array of 10 chunks and a log-likelihood function of 10 blocks.

Run it with the package to compare on the path (``PYTHONPATH=<checkout> python
benchmarks/source.py``) to time two checkouts on the same machine: the closing note of the
house issue compares the commit before the door with the one after it. A time is the
fastest of three calls.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def _fastest(call, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--quantities", type=int, default=10)
    args = parser.parse_args()
    import dask.array as da

    import bayesij

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    n, k = args.n, args.quantities
    theta = rng.normal(size=(4, 1000, k))
    log_lik = -0.5 * rng.normal(size=(4, 1000, n)) ** 2 - 0.1 * rng.uniform(size=n)
    post = bayesij.from_arrays(theta, log_lik)
    chunked = da.from_array(log_lik, chunks=(4, 1000, n // 10))
    flat = log_lik.reshape(4000, n)

    def columns(block, draws):
        return flat[:, block]

    function = bayesij.loglik_function(
        columns, np.arange(n), theta.reshape(4000, k), n_chains=4, block_size=n // 10
    )
    calls = {
        "loo (matrix)": lambda: bayesij.loo(log_lik),
        "waic (matrix)": lambda: bayesij.waic(log_lik),
        "influence (10 quantities)": lambda: bayesij.influence(post),
        "ij_covariance (10 quantities)": lambda: bayesij.ij_covariance(post),
        "loo (dask, 10 chunks)": lambda: bayesij.loo(chunked),
        "loo (function, 10 blocks)": lambda: bayesij.loo(function),
        "influence (function)": lambda: bayesij.influence(function),
    }
    for name, call in calls.items():
        call()  # compile / warm caches
        print(f"{name:32s} {_fastest(call):7.3f} s", flush=True)


if __name__ == "__main__":
    main()
