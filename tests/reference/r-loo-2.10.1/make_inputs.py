"""Log-likelihood matrices for the R loo 2.10.1 references (4 chains x 1000 draws; autocorrelated
draws so that r_eff differs from 1; a few heavy-tailed observations so that some k-hat are high).
Run: python make_inputs.py  (writes ll_a.csv, ll_b.csv: draws in rows, chain-major order)."""

import numpy as np

rng = np.random.default_rng(20261129)
C, D, N = 4, 1000, 120
for name, phi, shift in [("a", 0.6, 0.0), ("b", 0.3, 0.4)]:
    z = np.empty((C, D, 3))
    z[:, 0] = rng.standard_normal((C, 3))
    for t in range(1, D):  # AR(1) draws of three parameters
        z[:, t] = phi * z[:, t - 1] + np.sqrt(1 - phi**2) * rng.standard_normal((C, 3))
    mu, log_s, nu = 0.2 * z[..., 0] + shift, -0.1 + 0.1 * z[..., 1], 4 + z[..., 2]
    x = rng.standard_normal(N)
    y = 0.5 + x + rng.standard_t(3, N)
    y[:3] += 8.0  # three outliers: high k-hat
    s = np.exp(log_s)[..., None]
    r = (y - (mu[..., None] + x)) / s
    ll = -0.5 * np.log(2 * np.pi) - np.log(s) - 0.5 * r**2  # normal model fitted to t data
    np.savetxt(f"ll_{name}.csv", ll.reshape(C * D, N), delimiter=",", fmt="%.17g")
