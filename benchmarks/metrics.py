"""Speed and peak memory of the LOO predictive checks (expectations, CRPS, metrics, LOO R²)
beside PSIS-LOO itself and beside arviz-stats, on the same input.

A logistic regression like the arsenic-wells one (N observations, intercept and 3
covariates; tests/helpers/logistic_amip.py), 4 x 1000 exact-in-distribution draws from an
independence sampler (so draws repeat, as PyMC's do), replicated 0/1 outcomes. "x loo" is
each row's time over bayesij's ``loo`` under the same convention; "speed-up" the peer's
time over ours. Each size runs under bayesij's default convention and under
``convention="arviz-stats"`` (the peer's numbers: on repeated draws NumPy's sort of every
observation's draws decides which tied draw takes which smoothed weight, so that
convention sorts them all; the speed-up is measured there). arviz-stats runs only where it
is installed (Python >= 3.12) and, as it takes minutes, at the sizes given to
``--peer-sizes``.

Run: ``python benchmarks/metrics.py [--sizes 3020,100000] [--peer-sizes 3020]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

import bayesij
from common import arviz_1, timed

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "helpers"))
from logistic_amip import log_lik, sample, wells_like  # noqa: E402

CALLS = {
    "loo_expectation (mean)": ("loo_expectation", {"kind": "mean"}, "loo_expectations"),
    "loo_score (crps)": ("loo_score", {"kind": "crps"}, "loo_score"),
    "loo_metrics (rmse)": ("loo_metrics", {"kind": "rmse"}, "loo_metrics"),
    "loo_r2": ("loo_r2", {}, "loo_r2"),
}


def fit(n_obs: int):
    X, y = wells_like(n_obs, seed=0)
    beta, _ = sample(X, y, seed=1)
    ll = log_lik(X, y, beta)
    p = 1 / (1 + np.exp(-(beta @ X.T)))
    y_rep = (np.random.default_rng(0).uniform(size=p.shape) < p).astype(float)
    tree = None
    if arviz_1():
        import arviz as az

        tree = az.from_dict(
            {
                "posterior": {"beta": beta},
                "log_likelihood": {"y": ll},
                "posterior_predictive": {"y": y_rep},
                "observed_data": {"y": y},
            }
        )
    return bayesij.from_arrays(beta, ll), y, y_rep, tree


def ours(name: str, post, y, y_rep, options: dict, convention: str | None):
    function = getattr(bayesij, name)
    if name == "loo_expectation":
        return function(post, y_rep, convention=convention, **options)
    return function(post, y, y_rep, convention=convention, **options)


def theirs(name: str, tree, options: dict):
    import arviz_stats

    if name == "loo_r2":
        return arviz_stats.loo_r2(tree, "y", summary=False)
    if name == "loo_metrics":
        return arviz_stats.loo_metrics(tree, round_to="none", **options)
    if name == "loo_score":
        return arviz_stats.loo_score(tree, **options)
    return arviz_stats.loo_expectations(tree, **options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3020,100000")
    parser.add_argument("--peer-sizes", default="3020")
    args = parser.parse_args()
    peer_sizes = {int(s) for s in args.peer_sizes.split(",") if s}
    print(
        f"{'N':>7} {'convention':<12} {'what':<26} {'seconds':>8} {'peak MiB':>9} "
        f"{'x loo':>7} {'speed-up':>9}"
    )
    for n_obs in map(int, args.sizes.split(",")):
        post, y, y_rep, tree = fit(n_obs)
        for convention in (None, "arviz-stats"):
            label = convention or "default"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loo_seconds, loo_peak, _ = timed(bayesij.loo, post, convention=convention)
            print(
                f"{n_obs:>7} {label:<12} {'loo':<26} {loo_seconds:>8.2f} {loo_peak:>9.0f} "
                f"{1.0:>7.1f}"
            )
            for what, (name, options, peer_name) in CALLS.items():
                seconds, peak, _ = timed(ours, name, post, y, y_rep, options, convention)
                speed_up = ""
                if tree is not None and n_obs in peer_sizes and convention:
                    peer_seconds, _, _ = timed(theirs, peer_name, tree, options)
                    speed_up = f"{peer_seconds / seconds:>9.1f}"
                print(
                    f"{n_obs:>7} {label:<12} {what:<26} {seconds:>8.2f} {peak:>9.0f} "
                    f"{seconds / loo_seconds:>7.1f} {speed_up}"
                )


if __name__ == "__main__":
    main()
