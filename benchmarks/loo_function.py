"""PSIS-LOO and WAIC of a log-likelihood larger than memory: N = 10^6 observations of a
logistic regression x S = 4000 draws (32 GB as float64), given as a function evaluated one
block of observations at a time (``bayesij.loglik_function``, as R loo's ``loo.function``).

Prints the time of merely evaluating the log-likelihood once (block by block, summing it),
the time of ``bayesij.loo`` and ``bayesij.waic`` on the function, and the peak resident
memory of the process.

Run: ``python benchmarks/loo_function.py [--n 1000000] [--draws 4000]``.
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings

import numpy as np

import bayesij


def logistic_log_lik(block: dict, beta: np.ndarray) -> np.ndarray:
    """log p(y_n | x_n, beta_s) of a block of observations at every draw: (S, b)."""
    eta = beta @ block["X"].T  # (S, b)
    return block["y"] * eta - np.logaddexp(0.0, eta)


def simulate(n_obs: int, n_draws: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n_obs), rng.normal(size=(n_obs, 3))])
    truth = np.array([-0.5, 1.0, -0.7, 0.3])
    y = (rng.random(n_obs) < 1 / (1 + np.exp(-X @ truth))).astype(float)
    # Draws near the posterior of a large sample: the truth plus noise of sd 1/sqrt(N).
    beta = truth + rng.normal(size=(n_draws, 4)) * 2 / np.sqrt(n_obs)
    return {"X": X, "y": y}, beta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--draws", type=int, default=4000)
    args = parser.parse_args()
    data, beta = simulate(args.n, args.draws)
    lazy = bayesij.loglik_function(logistic_log_lik, data, beta, n_chains=4)
    print(f"N = {args.n}, S = {args.draws}: {args.n * args.draws * 8 / 2**30:.1f} GiB as float64")
    start = time.perf_counter()
    total = sum(float(lazy.block(a, b).sum()) for a, b in lazy.bounds())
    evaluate = time.perf_counter() - start
    print(f"evaluating the log-likelihood once: {evaluate:.1f} s (sum {total:.6g})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, function in (("loo", bayesij.loo), ("waic", bayesij.waic)):
            start = time.perf_counter()
            result = function(lazy)
            seconds = time.perf_counter() - start
            print(f"bayesij.{name}: {seconds:.1f} s ({seconds / evaluate:.2f} x evaluation)")
            print(f"  {result}".replace("\n", "\n  "))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux
    print(f"peak resident memory of the process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
