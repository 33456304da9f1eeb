"""Non-factorized LOO (``bayesij.loo_nonfactorized``) of a Gaussian-process regression: the
time and peak memory of its per-draw LOO densities against the PSIS-LOO that follows them,
and against the obvious implementation (for each draw and observation, the conditional
normal from the sub-covariance without that observation: N inverses of size N - 1 per draw).

No peer computes this quantity (R loo's vignette does it by hand with the same closed form;
arviz-stats has no non-factorized LOO), so the comparison is with the direct computation
on the first few draws, scaled to all of them.

Run: ``python benchmarks/nonfactorized.py [--n 100 300] [--draws 4000]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from common import measure


def _inputs(n_obs: int, n_draws: int, per_draw: bool):
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, n_obs)
    cov = np.exp(-0.5 * ((t[:, None] - t) / 0.1) ** 2) + 0.1 * np.eye(n_obs)
    y = rng.multivariate_normal(np.zeros(n_obs), cov)
    mean = rng.normal(0, 0.2, size=(4, n_draws // 4, 1)) * np.ones(n_obs)
    if per_draw:
        cov = rng.uniform(0.8, 1.2, size=(4, n_draws // 4))[..., None, None] * cov
    return y, mean, cov


def _direct(y, mean, cov, draws: int) -> np.ndarray:
    """The conditional normal of each observation given the others, by inverting each
    sub-covariance, for the first ``draws`` draws."""
    from scipy.stats import norm

    flat_mean = mean.reshape(-1, y.size)[:draws]
    flat_cov = cov.reshape(-1, y.size, y.size)[:draws] if cov.ndim == 4 else None
    out = np.empty((draws, y.size))
    for s in range(draws):
        c = flat_cov[s] if flat_cov is not None else cov
        for n in range(y.size):
            keep = np.arange(y.size) != n
            gain = c[n, keep] @ np.linalg.inv(c[np.ix_(keep, keep)])
            centre = flat_mean[s, n] + gain @ (y[keep] - flat_mean[s, keep])
            out[s, n] = norm.logpdf(y[n], centre, np.sqrt(c[n, n] - gain @ c[keep, n]))
    return out


def main() -> None:
    import bayesij
    from bayesij.array.nonfactorized import loo_log_densities

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--draws", type=int, default=4000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("| N | covariance | densities | PSIS-LOO after | direct (scaled) | ratio | peak MiB |")
    print("|---|---|---|---|---|---|---|")
    for n_obs in args.n:
        for per_draw in (False, True):
            y, mean, cov = _inputs(n_obs, args.draws, per_draw)
            dens, peak = measure(loo_log_densities, y, mean, cov)
            log_lik = loo_log_densities(y, mean, cov)
            psis, _ = measure(bayesij.loo, log_lik)
            few = 2
            direct, _ = measure(_direct, y, mean, cov, few)
            direct *= args.draws / few  # the same work for every draw
            kind = "per draw" if per_draw else "shared"
            print(
                f"| {n_obs} | {kind} | {dens:.2f} s | {psis:.2f} s | {direct:.0f} s | "
                f"{direct / dens:.0f}x | {peak:.0f} |"
            )


if __name__ == "__main__":
    main()
