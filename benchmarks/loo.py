"""Speed and peak memory of PSIS-LOO: bayesij.loo against the installed ArviZ on the same input.

S = 4000 draws (4 chains x 1000) by N observations. The peer is ArviZ 0.23's ``az.loo``
(Python 3.11) or arviz-stats 1.x's ``loo`` (Python >= 3.12); both sides get the same scalar
r_eff and bayesij the options that reproduce the peer (tail rule, ties), so they compute the
same numbers (the largest pointwise difference is printed). bayesij's default
(per-observation r_eff from the chains, as R loo up to 2.8) and ``convention="R loo"``
(R loo 2.10's split-chain r_eff, per observation) are timed as separate rows. "speed-up" is
the peer's time over each row's; peak memory is the tracemalloc peak.

Where Rscript and R's loo package are installed, R loo's ``loo()`` (2 cores, or 1 where two
workers would run out of memory; the same r_eff) runs on the same matrix too: its time is that of
``loo()`` alone, its memory the "max used" of R's heap; bayesij reproduces it with
``tail_rule="ceil", ties="position"``.

Run: ``python benchmarks/loo.py [--sizes 10000,100000] [--skip-r]``. The target is 2 s at
N = 100000 and a speed-up of at least 40 over arviz-stats.
"""

from __future__ import annotations

import argparse

import numpy as np

import bayesij
from common import (
    HEADER,
    inference_data,
    log_sum_exp_pass,
    measure,
    peer_loo,
    r_available,
    r_loo,
    regression_draws,
    report,
    timed,
    warm_up,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--skip-r", action="store_true")
    args = parser.parse_args()
    name, peer, options, pointwise = peer_loo()
    warm_up(bayesij.loo, peer)
    print(HEADER)
    with_r = not args.skip_r and r_available()
    for n_obs in map(int, args.sizes.split(",")):
        r_side = r_loo(n_obs, 0.9) if with_r else None  # first: R needs the memory
        _, log_lik = regression_draws(n_obs)
        idata = inference_data(log_lik)
        *ours_row, ours = timed(
            bayesij.loo, log_lik, convention=bayesij.PsisOptions(r_eff=0.9, **options)
        )
        *theirs_row, theirs = timed(peer, idata, pointwise=True, reff=0.9)
        rows = {
            "log-sum-exp pass": measure(log_sum_exp_pass, log_lik),
            "bayesij loo (r_eff = 0.9)": tuple(ours_row),
            "bayesij loo (R-style r_eff)": measure(bayesij.loo, log_lik),
            'bayesij loo (convention="R loo")': measure(bayesij.loo, log_lik, convention="R loo"),
            f"{name} (reff = 0.9)": tuple(theirs_row),
        }
        del idata
        if r_side is not None:
            options_r = {"tail_rule": "ceil", "ties": "position"}
            *ours_r, ours_r_result = timed(
                bayesij.loo, log_lik, convention=bayesij.PsisOptions(r_eff=0.9, **options_r)
            )
            rows["bayesij loo (as R loo)"] = tuple(ours_r)
            rows[f"R loo loo() ({r_side[3]} core(s))"] = r_side[:2]
        report(n_obs, rows, f"{name} (reff = 0.9)")
        difference = np.max(np.abs(ours.pointwise["elpd_loo"].to_numpy() - pointwise(theirs)))
        print(
            f"{n_obs:>7} max |elpd_loo_n difference| {difference:.1e}; log-lik matrix "
            f"{log_lik.nbytes / 2**20:.0f} MiB"
        )
        if with_r and r_side is None:
            print(f"{n_obs:>7} R loo failed (at N = 100,000 it is killed for memory on 24 GiB)")
        if r_side is not None:
            r_difference = np.max(np.abs(ours_r_result.pointwise["elpd_loo"] - r_side[2]))
            print(
                f"{n_obs:>7} R loo: {r_side[0]:.2f} s, bayesij (as R loo) "
                f"{ours_r[0]:.2f} s: {r_side[0] / ours_r[0]:.0f}x; max |elpd_loo_n "
                f"difference| {r_difference:.1e}"
            )


if __name__ == "__main__":
    main()
