# Reference values from R loo for tests/data/log_lik_reference.csv.
# Run from the repository root: Rscript tests/data/r_loo_reference.R
# (Debian: apt-get install r-base-core r-cran-loo). Writes tests/data/r_loo_*.csv.
suppressPackageStartupMessages(library(loo))

input <- read.csv("tests/data/log_lik_reference.csv")
log_lik <- as.matrix(input[, -1])

w <- suppressWarnings(waic(log_lik))
write.csv(
  data.frame(elpd_waic = w$pointwise[, "elpd_waic"], p_waic = w$pointwise[, "p_waic"],
             waic = w$pointwise[, "waic"]),
  "tests/data/r_loo_waic_pointwise.csv", row.names = FALSE
)
write.csv(
  data.frame(quantity = rownames(w$estimates), estimate = w$estimates[, "Estimate"],
             se = w$estimates[, "SE"], loo_version = as.character(packageVersion("loo"))),
  "tests/data/r_loo_waic_estimates.csv", row.names = FALSE
)
