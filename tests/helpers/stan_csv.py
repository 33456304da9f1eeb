"""Write a PyStan fit as CmdStan output CSV files (the layout of CmdStan 2.37's `sample`).

CmdStan cannot be installed on a machine without network access to its releases, but its
CSV format is plain text: this writer reproduces it (comment header with the run's
configuration, dot-indexed column names in Stan's order, adaptation comments, draws, timing
footer) so that the CSV path of `from_cmdstanpy`, parsed by CmdStanPy itself, is tested on
the draws of a real Stan fit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HEADER = """# stan_version_major = 2
# stan_version_minor = 37
# stan_version_patch = 0
# model = {model}_model
# start_datetime = 2026-11-20 12:00:00 UTC
# method = sample (Default)
#   sample
#     num_samples = {num_samples}
#     num_warmup = {num_warmup}
#     save_warmup = false (Default)
#     thin = 1 (Default)
#     adapt
#       engaged = true (Default)
#       gamma = 0.05 (Default)
#       delta = 0.8 (Default)
#       kappa = 0.75 (Default)
#       t0 = 10 (Default)
#       init_buffer = 75 (Default)
#       term_buffer = 50 (Default)
#       window = 25 (Default)
#       save_metric = false (Default)
#     algorithm = hmc (Default)
#       hmc
#         engine = nuts (Default)
#           nuts
#             max_depth = 10 (Default)
#         metric = diag_e (Default)
#         metric_file =  (Default)
#         stepsize = 1 (Default)
#         stepsize_jitter = 0 (Default)
#     num_chains = 1 (Default)
# id = {chain_id}
# data
#   file = {model}.data.json
# init = 2 (Default)
# random
#   seed = 12345
# output
#   file = {model}-{chain_id}.csv
#   diagnostic_file =  (Default)
#   refresh = 100 (Default)
#   sig_figs = -1 (Default)
#   profile_file = profile.csv (Default)
#   save_cmdstan_config = false (Default)
# num_threads = 1 (Default)
# stanc_version = stanc3 v2.37.0
# stancflags = 
"""

FOOTER = """# 
#  Elapsed Time: 0.01 seconds (Warm-up)
#                0.01 seconds (Sampling)
#                0.02 seconds (Total)
# 
"""


def write_cmdstan_csv(fit, directory, model: str = "linear_regression") -> list[Path]:
    """One CSV file per chain of a PyStan fit; returns their paths."""
    sampler = list(fit.sample_and_sampler_param_names)
    columns = sampler + list(fit.constrained_param_names)
    draws = np.asarray(fit._draws)  # (columns, draws, chains), the fit's own storage
    paths = []
    for chain in range(fit.num_chains):
        path = Path(directory) / f"{model}-{chain + 1}.csv"
        header = HEADER.format(
            model=model, num_samples=fit.num_samples, num_warmup=fit.num_warmup, chain_id=chain + 1
        )
        lines = [
            header.rstrip("\n"),
            ",".join(columns),
            "# Adaptation terminated",
            "# Step size = 0.5",
            "# Diagonal elements of inverse mass matrix:",
            "# " + ", ".join(["1"] * len(fit.constrained_param_names)),
        ]
        for row in draws[:, :, chain].T:
            lines.append(",".join(repr(float(v)) for v in row))
        path.write_text("\n".join(lines) + "\n" + FOOTER)
        paths.append(path)
    return paths
