"""Write tests/reference/log_lik_reference.csv: the input on which R loo's values were computed.

A misspecified normal location model (t-distributed data, normal likelihood) gives a mix of
small and large pointwise variances. Rows: 4 chains x 250 draws (chain-major); columns:
`chain`, then one column per observation. Also writes the posterior predictive draws
(`y_rep_reference.csv`, same rows) and the data (`y_reference.csv`). Run from the repository root:
`python tests/reference/make_reference_input.py`, then `Rscript tests/reference/r_loo_reference.R`.
`log_lik_heavy.csv` (same layout) has outliers, so that k-hat exceeds 0.7 and 1;
`log_lik_ties.csv` repeats MCMC states (ties inside the Pareto tail and at its cutoff), with
`y_rep_ties.csv`; R's values for it: `Rscript tests/reference/r_loo_ties.R`.
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def write_log_lik(name: str, log_lik: np.ndarray) -> None:
    n_chains, n_draws, n_obs = log_lik.shape
    rows = log_lik.reshape(n_chains * n_draws, n_obs)
    chain = np.repeat(np.arange(1, n_chains + 1), n_draws)
    header = "chain," + ",".join(f"obs{i + 1}" for i in range(n_obs))
    np.savetxt(
        HERE / f"log_lik_{name}.csv",
        np.column_stack([chain, rows]),
        delimiter=",",
        header=header,
        comments="",
        fmt=["%d"] + ["%.17g"] * n_obs,
    )


def heavy_tailed(rng) -> np.ndarray:
    """Normal regression with outliers and a scale posterior: k-hat well above 0.7 and 1."""
    n_chains, n_draws, n = 4, 250, 30
    x = rng.normal(size=n)
    y = 1 + x + rng.normal(size=n)
    y[:3] += [6.0, 9.0, 14.0]
    beta = 1 + 0.15 * rng.standard_t(4, size=(n_chains, n_draws, 1))
    sigma = np.exp(0.2 * rng.normal(size=(n_chains, n_draws, 1)))
    return -0.5 * ((y - 1 - beta * x) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def extreme(rng) -> np.ndarray:
    """Log-likelihoods whose importance ratios have tails far heavier than PSIS can fit:
    k-hat from about 1 to far above 10, where the smoothed tail lies hundreds of log units
    below the largest raw ratio."""
    n_chains, n_draws = 4, 250
    scales = np.array([0.1, 5.0, 20.0, 60.0, 120.0, 300.0, 1000.0])
    z = rng.normal(size=(n_chains, n_draws, scales.size)) ** 2
    # A column whose fitted tail lies about 420 log units below its largest raw ratio.
    far = np.random.default_rng(49).normal(size=n_chains * n_draws).reshape(n_chains, n_draws)
    return np.concatenate([-1.0 - scales * z, -1.0 - 60.0 * far[..., None] ** 2], axis=2)


def repeated_states(rng) -> tuple[np.ndarray, np.ndarray]:
    """The heavy-tailed regression's log-likelihood with repeated MCMC states: each draw is
    kept for 1-4 iterations (as a sampler that rejects), so tied ratios lie inside the
    Pareto tail and at its cutoff. Also posterior predictive draws at the same states."""
    states = heavy_tailed(rng)
    n_chains, n_draws, n_obs = states.shape
    y_rep = states + rng.normal(size=states.shape)  # any per-state value will do
    log_lik, replicated = np.empty_like(states), np.empty_like(states)
    for c in range(n_chains):
        repeats = rng.integers(1, 5, size=n_draws)
        index = np.repeat(np.arange(n_draws), repeats)[:n_draws]
        log_lik[c], replicated[c] = states[c, index], y_rep[c, index]
    return log_lik, replicated.reshape(n_chains * n_draws, n_obs)


def main() -> None:
    rng = np.random.default_rng(20261120)
    y = rng.standard_t(df=3, size=25)
    n_chains, n_draws = 4, 250
    # Posterior of the mean under N(mu, 1) with a flat prior, drawn as correlated chains.
    mu = np.empty((n_chains, n_draws))
    mu[:, 0] = rng.normal(size=n_chains)
    for t in range(1, n_draws):
        mu[:, t] = 0.5 * mu[:, t - 1] + np.sqrt(1 - 0.25) * rng.normal(size=n_chains)
    mu = y.mean() + mu / np.sqrt(y.size)
    log_lik = -0.5 * (y - mu[..., None]) ** 2 - 0.5 * np.log(2 * np.pi)
    write_log_lik("reference", log_lik)
    # Posterior predictive draws y_rep ~ N(mu, 1) at the same draws, and the data y.
    y_rep = (mu[..., None] + rng.normal(size=log_lik.shape)).reshape(n_chains * n_draws, -1)
    np.savetxt(HERE / "y_rep_reference.csv", y_rep, delimiter=",", fmt="%.17g")
    np.savetxt(HERE / "y_reference.csv", y, delimiter=",", fmt="%.17g")
    write_log_lik("heavy", heavy_tailed(np.random.default_rng(7)))
    write_log_lik("extreme", extreme(np.random.default_rng(11)))
    log_lik, y_rep = repeated_states(np.random.default_rng(13))
    write_log_lik("ties", log_lik)
    np.savetxt(HERE / "y_rep_ties.csv", y_rep, delimiter=",", fmt="%.17g")


if __name__ == "__main__":
    main()
