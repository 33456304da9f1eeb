"""Speed and peak memory of influence scores and the IJ covariance, beside ArviZ on the same input.

ArviZ has no influence scores; the yardsticks on the same (4 chains x 1000 draws) x N
log-likelihood matrix are:

* one streaming log-sum-exp pass over draws (DESIGN.md section 5's unit of cost);
* a bare NumPy covariance ``F_c.T @ L_c / (S - 1)`` (psi without any Monte Carlo error);
* ``az.loo`` — the per-observation pass ArviZ users already run on this matrix.

Run: ``python benchmarks/influence.py [--sizes 10000,100000] [--quantities 10]``.
Peak memory is the tracemalloc peak above the inputs (NumPy reports its buffers to it).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

import numpy as np
from scipy.special import logsumexp

from bayesij.array import ij_covariance, influence_scores


def measure(function, *args, **kwargs):
    tracemalloc.start()
    start = time.perf_counter()
    function(*args, **kwargs)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak / 2**20


def make_input(n_obs: int, n_quantities: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    f = rng.normal(size=(4, 1000, n_quantities))
    log_lik = -0.5 * (rng.normal(size=(1, 1, n_obs)) - f[:, :, :1]) ** 2
    log_lik += 0.1 * rng.normal(size=log_lik.shape)
    return f, log_lik


def bare_covariance(f, log_lik):
    f2 = f.reshape(-1, f.shape[2])
    l2 = log_lik.reshape(-1, log_lik.shape[2])
    return (f2 - f2.mean(0)).T @ (l2 - l2.mean(0)) / (f2.shape[0] - 1)


def arviz_loo(log_lik):
    import arviz as az

    idata = az.from_dict(posterior={"mu": log_lik[:, :, 0]}, log_likelihood={"y": log_lik})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        az.loo(idata, pointwise=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--quantities", type=int, default=10)
    parser.add_argument("--skip-arviz", action="store_true")
    args = parser.parse_args()
    print(f"{'N':>7} {'what':<28} {'seconds':>8} {'peak MiB':>9} {'x lse':>7} {'x az.loo':>9}")
    for n_obs in map(int, args.sizes.split(",")):
        f, log_lik = make_input(n_obs, args.quantities)
        matrix_mib = log_lik.nbytes / 2**20
        rows = {
            "log-sum-exp pass": measure(logsumexp, log_lik.reshape(-1, n_obs), axis=0),
            "numpy covariance (psi only)": measure(bare_covariance, f, log_lik),
            "bayesij influence_scores": measure(influence_scores, f, log_lik),
            "bayesij ij_covariance": measure(ij_covariance, f, log_lik),
        }
        if not args.skip_arviz:
            rows["arviz az.loo"] = measure(arviz_loo, log_lik)
        lse = rows["log-sum-exp pass"][0]
        loo = rows.get("arviz az.loo", (np.nan,))[0]
        for what, (seconds, peak) in rows.items():
            print(f"{n_obs:>7} {what:<28} {seconds:>8.2f} {peak:>9.0f} {seconds / lse:>7.1f} "
                  f"{seconds / loo:>9.3f}")
        print(f"{n_obs:>7} (log-lik matrix itself: {matrix_mib:.0f} MiB, "
              f"{args.quantities} quantities)")


if __name__ == "__main__":
    main()
