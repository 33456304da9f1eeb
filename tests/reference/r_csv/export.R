# Writes the CSV files an rstanarm user hands to bayesij (tests/adapters/test_r_csv.py).
# Run from this folder: Rscript export.R   (Debian: r-base-core r-cran-rstanarm r-cran-loo)
suppressPackageStartupMessages({
  library(rstanarm)
  library(loo)
})
set.seed(20261122)
fit <- stan_glm(mpg ~ wt + hp, data = mtcars, chains = 4, iter = 500, seed = 20261122,
                refresh = 0)
draws <- as.matrix(fit)                 # 1000 draws (4 chains of 250, stacked) x 4 columns
ll <- log_lik(fit)                      # 1000 draws x 32 cars
write.csv(draws, "draws.csv")           # R's row names in a first unnamed column
write.csv(ll, "log_lik.csv")            # columns V1..V32 (log_lik has no column names)

# The same draws in the posterior package's draws format, with .chain/.iteration/.draw.
chain <- rep(1:4, each = 250)
draws_df <- data.frame(draws, check.names = FALSE)
draws_df$.chain <- chain
draws_df$.iteration <- rep(1:250, times = 4)
draws_df$.draw <- seq_len(nrow(draws))
write.csv(draws_df, "draws_format.csv", row.names = FALSE)

# R loo on the same matrix, for the comparison (r_eff from the chains, as R loo does).
r_eff <- relative_eff(exp(ll), chain_id = chain)
result <- loo(ll, r_eff = r_eff)
write.csv(data.frame(elpd_loo = result$pointwise[, "elpd_loo"],
                     pareto_k = result$diagnostics$pareto_k),
          "loo_pointwise.csv", row.names = FALSE)
write.csv(data.frame(estimate = result$estimates[, "Estimate"],
                     se = result$estimates[, "SE"], row.names = rownames(result$estimates)),
          "loo_estimates.csv")
cat("R", R.version$major, R.version$minor, "loo", as.character(packageVersion("loo")),
    "rstanarm", as.character(packageVersion("rstanarm")), "\n", file = "versions.txt")
