# R loo's PSIS weights and LOO expectations where MCMC states repeat (tied importance ratios
# inside the Pareto tail and at its cutoff), for tests/reference/log_lik_ties.csv.
# Run from the repository root: Rscript tests/reference/r_loo_ties.R
suppressPackageStartupMessages(library(loo))

data <- read.csv("tests/reference/log_lik_ties.csv")
ll <- as.matrix(data[, -1])
y_rep <- as.matrix(read.csv("tests/reference/y_rep_ties.csv", header = FALSE))
r_eff <- relative_eff(exp(ll), chain_id = data$chain)
p <- suppressWarnings(psis(-ll, r_eff = r_eff))
# Unnormalised smoothed log-weights (each column shifted so that its largest raw ratio is 0).
write.csv(weights(p, log = TRUE, normalize = FALSE), "tests/reference/r_loo_ties_weights.csv",
          row.names = FALSE)
e_mean <- suppressWarnings(E_loo(y_rep, p, type = "mean", log_ratios = -ll))
e_q <- suppressWarnings(E_loo(y_rep, p, type = "quantile", probs = 0.25, log_ratios = -ll))
write.csv(
  data.frame(mean = e_mean$value, q25 = e_q$value, pareto_k = p$diagnostics$pareto_k,
             r_eff = r_eff, loo_version = as.character(packageVersion("loo"))),
  "tests/reference/r_loo_ties.csv", row.names = FALSE
)
