# Reference values from R loo's loo_approximate_posterior for
# tests/reference/approximate_posterior_input.csv (a Laplace approximation's draws).
# Run from the repository root: Rscript tests/reference/r_loo_approximate.R
# (Debian: apt-get install r-base-core r-cran-loo). Writes tests/reference/r_loo_approximate.csv.
suppressPackageStartupMessages(library(loo))

input <- read.csv("tests/reference/approximate_posterior_input.csv")
log_lik <- as.matrix(input[, -(1:2)])
ap <- suppressWarnings(loo_approximate_posterior(log_lik, log_p = input$log_p, log_g = input$log_g))
write.csv(
  data.frame(elpd_loo = ap$pointwise[, "elpd_loo"], p_loo = ap$pointwise[, "p_loo"],
             pareto_k = ap$diagnostics$pareto_k, n_eff = ap$diagnostics$n_eff,
             se_elpd_loo = ap$estimates["elpd_loo", "SE"],
             loo_version = as.character(packageVersion("loo"))),
  "tests/reference/r_loo_approximate.csv", row.names = FALSE
)
