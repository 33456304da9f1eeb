"""Speed and peak memory of the influential-subset search (AMIP) on a real posterior.

Draws: 4 chains x 1000 exact draws of a conjugate normal regression with N observations
(a weak slope, so sign and significance targets are reachable). ArviZ has no AMIP; the
yardsticks on the same log-likelihood matrix are one log-sum-exp pass (the unit of cost of
docs/architecture.md, "Scale") and ``az.loo``, the per-observation pass ArviZ users already
run ("speed-up" is its time over each row's; ``--skip-arviz`` leaves it out).

Run: ``python benchmarks/amip.py [--sizes 10000,100000] [--skip-arviz]``.
"""

from __future__ import annotations

import argparse

import numpy as np

import bayesij
from bayesij.refit import ConjugateNormalBackend
from common import HEADER, inference_data, log_sum_exp_pass, measure, peer_loo, report


def weak_slope_posterior(n_obs: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n_obs)
    y = 1.0 + 3.0 / np.sqrt(n_obs) * x + rng.normal(size=n_obs)
    backend = ConjugateNormalBackend(np.column_stack([np.ones(n_obs), x]), y, draws=4000)
    return backend.fit(np.ones(n_obs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--skip-arviz", action="store_true")
    args = parser.parse_args()
    print(HEADER)
    for n_obs in map(int, args.sizes.split(",")):
        post = weak_slope_posterior(n_obs)
        log_lik = post.log_lik.values
        rows = {"log-sum-exp pass": measure(log_sum_exp_pass, log_lik)}
        for target in ("sign", "significance"):
            for method in ("linear", "reweighted"):
                rows[f"amip {target} {method}"] = measure(
                    bayesij.amip, post, "beta[2]", target=target, method=method
                )
        name, peer, _, _ = peer_loo()
        if not args.skip_arviz:
            rows[name] = measure(peer, inference_data(log_lik), pointwise=True)
        report(n_obs, rows, name)
        result = bayesij.amip(post, "beta[2]", target="sign")
        print(
            f"{n_obs:>7} sign: {result.n_drop} units ({100 * result.prop_drop:.2f} %), "
            f"stopped: {result.stopped}; log-lik matrix {log_lik.nbytes / 2**20:.0f} MiB"
        )


if __name__ == "__main__":
    main()
