"""Speed and peak memory of bayesij.waic against ArviZ's az.waic on the same log-likelihood.

Both on a (4 chains x 1000 draws) x N matrix; bayesij also computes Watanabe's functional
cumulants and the tempered CV loss in the same call. "speed-up" is az.waic's time over each
row's. Run: ``python benchmarks/waic.py [--sizes 10000,100000]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import bayesij
from common import (
    HEADER,
    arviz_1,
    inference_data,
    log_sum_exp_pass,
    measure,
    regression_draws,
    report,
    warm_up,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    import arviz as az

    if arviz_1():
        raise SystemExit(
            "ArviZ 1.x (arviz-stats) has no WAIC: run this on Python 3.11 with "
            "ArviZ 0.23, the peer it compares with."
        )
    warm_up(bayesij.waic, az.waic)
    print(HEADER)
    for n_obs in map(int, args.sizes.split(",")):
        _, log_lik = regression_draws(n_obs)
        idata = inference_data(log_lik)
        rows = {
            "log-sum-exp pass": measure(log_sum_exp_pass, log_lik),
            "bayesij waic": measure(bayesij.waic, log_lik),
            "arviz az.waic": measure(az.waic, idata, pointwise=True),
        }
        report(n_obs, rows, "arviz az.waic")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours, theirs = bayesij.waic(log_lik), az.waic(idata)
        print(
            f"{n_obs:>7} elpd_waic bayesij {ours.elpd_waic:.6f} arviz {theirs.elpd_waic:.6f} "
            f"(|diff| {abs(ours.elpd_waic - theirs.elpd_waic):.1e}); matrix "
            f"{log_lik.nbytes / 2**20:.0f} MiB"
        )
        del idata
        np.testing.assert_allclose(ours.elpd_waic, theirs.elpd_waic, rtol=1e-10)


if __name__ == "__main__":
    main()
