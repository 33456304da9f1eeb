"""Write tests/data/log_lik_reference.csv: the input on which R loo's values were computed.

A misspecified normal location model (t-distributed data, normal likelihood) gives a mix of
small and large pointwise variances. Rows: 4 chains x 250 draws (chain-major); columns:
`chain`, then one column per observation. Run from the repository root:
`python tests/data/make_reference_input.py`, then `Rscript tests/data/r_loo_reference.R`.
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


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
    rows = log_lik.reshape(n_chains * n_draws, y.size)
    chain = np.repeat(np.arange(1, n_chains + 1), n_draws)
    header = "chain," + ",".join(f"obs{i + 1}" for i in range(y.size))
    table = np.column_stack([chain, rows])
    np.savetxt(HERE / "log_lik_reference.csv", table, delimiter=",", header=header,
               comments="", fmt=["%d"] + ["%.17g"] * y.size)


if __name__ == "__main__":
    main()
