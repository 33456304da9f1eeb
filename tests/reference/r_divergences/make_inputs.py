"""Inputs of divergences.R: draws and power-scaling weights of three quantities (a normal,
a skewed gamma, a heavy-tailed t), written as inputs.csv (columns x1, w1, x2, w2, ...)."""

import numpy as np

rng = np.random.default_rng(20261129)
n = 1000
columns = {}
for k, draws in enumerate(
    [rng.normal(0.5, 2.0, n), rng.gamma(2.0, 1.5, n), rng.standard_t(3, n)], start=1
):
    component = -0.5 * (draws / 3.0) ** 2  # a N(0, 3) log prior
    log_w = (1.1 - 1.0) * component  # the prior power-scaled by alpha = 1.1
    w = np.exp(log_w - log_w.max())
    columns[f"x{k}"], columns[f"w{k}"] = draws, w / w.sum()
header = ",".join(columns)
rows = np.column_stack(list(columns.values()))
np.savetxt("inputs.csv", rows, delimiter=",", header=header, comments="", fmt="%.17g")
