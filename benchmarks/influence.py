"""Speed and peak memory of influence scores and the IJ covariance, beside ArviZ on the same input.

ArviZ has no influence scores; the yardsticks on the same (4 chains x 1000 draws) x N
log-likelihood matrix are one log-sum-exp pass over the draws (the unit of cost of
docs/architecture.md, "Scale"), a bare NumPy covariance ``F_c.T @ L_c / (S - 1)`` (psi
without Monte Carlo error), and ``az.loo`` — the per-observation pass ArviZ users already
run on this matrix. "speed-up" is az.loo's time over each row's.

Run: ``python benchmarks/influence.py [--sizes 10000,100000] [--skip-arviz]``.
"""

from __future__ import annotations

import argparse

from bayesij.array import ij_covariance, influence_scores
from common import (
    HEADER,
    inference_data,
    log_sum_exp_pass,
    measure,
    peer_loo,
    regression_draws,
    report,
    warm_up,
)


def bare_covariance(f, log_lik):
    f2 = f.reshape(-1, f.shape[2])
    l2 = log_lik.reshape(-1, log_lik.shape[2])
    return (f2 - f2.mean(0)).T @ (l2 - l2.mean(0)) / (f2.shape[0] - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--skip-arviz", action="store_true")
    args = parser.parse_args()
    name, peer, _, _ = peer_loo()
    warm_up(peer)
    print(HEADER)
    for n_obs in map(int, args.sizes.split(",")):
        f, log_lik = regression_draws(n_obs)
        rows = {
            "log-sum-exp pass": measure(log_sum_exp_pass, log_lik),
            "numpy covariance (psi only)": measure(bare_covariance, f, log_lik),
            "bayesij influence_scores": measure(influence_scores, f, log_lik),
            "bayesij ij_covariance": measure(ij_covariance, f, log_lik),
        }
        if not args.skip_arviz:
            idata = inference_data(log_lik)
            rows[name] = measure(peer, idata, pointwise=True)
        report(n_obs, rows, name)
        print(f"{n_obs:>7} (log-lik matrix: {log_lik.nbytes / 2**20:.0f} MiB, 10 quantities)")


if __name__ == "__main__":
    main()
