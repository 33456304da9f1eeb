"""AMIP under Monte Carlo noise on a heavy-tailed field experiment: time, peak memory and
the sets, per target, for the plain influences and for zero-variance control variates.

Data: N households, a randomised treatment, 1 % of households with 30 times the noise sd
(tests/helpers/ols_amip.py), the flat-prior regression with unknown sigma, 4 x 1000 exact
draws and the log posterior's score (``refit.FlatPriorRegressionBackend``). The reference
is the estimating-equation AMIP with OLS influence and exact refits (no peer library runs
AMIP in Python; zaminfluence is R). "x lse" is the time over one log-sum-exp pass of the
same (4, 1000, N) matrix; the draws are made once, outside the timings.

Run: ``python benchmarks/amip_noise.py [--sizes 10000,100000]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import bayesij
from bayesij.refit import FlatPriorRegressionBackend
from common import HEADER, amip_gradient, log_sum_exp_pass, measure, report

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
from ols_amip import heavy_tailed_experiment, metric, ols_amip  # noqa: E402

TARGETS = ("sign", "significance", "sign_and_significance")
SHORT = {"sign": "sign", "significance": "signif", "sign_and_significance": "sign&signif"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    print(HEADER)
    for n_obs in map(int, args.sizes.split(",")):
        X, y = heavy_tailed_experiment(n_obs, seed=0)
        post, score, theta = FlatPriorRegressionBackend(X, y, draws=4000, seed=1).fit_with_gradient(
            np.ones(n_obs)
        )
        rows = {"log-sum-exp pass": measure(log_sum_exp_pass, post.log_lik.values)}
        variants = {
            "linear": {"method": "linear"},
            "linear+cv": {"method": "linear", **amip_gradient(score, theta)},
            "reweighted": {"method": "reweighted"},
        }
        sets = []
        for target in TARGETS:
            reference, _ = ols_amip(X, y, 1, target)
            line = [f"{n_obs:>7} {target}: OLS-AMIP {reference.size}"]
            for name, options in variants.items():
                rows[f"{SHORT[target]} {name}"] = measure(
                    bayesij.amip, post, "beta[2]", target, **options
                )
                result = bayesij.amip(post, "beta[2]", target, **options)
                sign = {"mean": 0, "lower end": -1, "upper end": 1}[result.metric]
                after = metric(X, y, result.kept, 1, sign, 1.96)
                confirmed = np.sign(after) != np.sign(result.original_value)
                low, high = result.size_interval
                bound = "<= " if result.upper_bound else ""
                line.append(
                    f"{name} {bound}{result.n_drop} ({result.answer}, "
                    f"refit {'yes' if confirmed else 'NO'}"
                    f", smallest {low:.0f}-{high:.0f})"
                )
            sets.append(" | ".join(line))
        report(n_obs, rows, "none")
        print("\n".join(sets))
        print(f"{n_obs:>7} log-lik matrix {post.log_lik.values.nbytes / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
