# Reference values from R loo for tests/reference/log_lik_reference.csv.
# Run from the repository root: Rscript tests/reference/r_loo_reference.R
# (Debian: apt-get install r-base-core r-cran-loo). Writes tests/reference/r_loo_*.csv.
suppressPackageStartupMessages(library(loo))

input <- read.csv("tests/reference/log_lik_reference.csv")
log_lik <- as.matrix(input[, -1])

w <- suppressWarnings(waic(log_lik))
write.csv(
  data.frame(elpd_waic = w$pointwise[, "elpd_waic"], p_waic = w$pointwise[, "p_waic"],
             waic = w$pointwise[, "waic"]),
  "tests/reference/r_loo_waic_pointwise.csv", row.names = FALSE
)
write.csv(
  data.frame(quantity = rownames(w$estimates), estimate = w$estimates[, "Estimate"],
             se = w$estimates[, "SE"], loo_version = as.character(packageVersion("loo"))),
  "tests/reference/r_loo_waic_estimates.csv", row.names = FALSE
)

# elpd() of held-out points: the reference matrix read as test-point log densities.
e <- elpd(log_lik)
write.csv(data.frame(elpd = e$pointwise[, "elpd"], ic = e$pointwise[, "ic"]),
          "tests/reference/r_loo_elpd_pointwise.csv", row.names = FALSE)
write.csv(data.frame(quantity = rownames(e$estimates), estimate = e$estimates[, "Estimate"],
                     se = e$estimates[, "SE"]),
          "tests/reference/r_loo_elpd_estimates.csv", row.names = FALSE)

# PSIS-LOO with R loo's default relative efficiency from the chains, for both inputs.
psis_reference <- function(name) {
  data <- read.csv(sprintf("tests/reference/log_lik_%s.csv", name))
  ll <- as.matrix(data[, -1])
  r_eff <- relative_eff(exp(ll), chain_id = data$chain)
  l <- suppressWarnings(loo(ll, r_eff = r_eff))
  write.csv(
    data.frame(elpd_loo = l$pointwise[, "elpd_loo"],
               mcse_elpd_loo = l$pointwise[, "mcse_elpd_loo"],
               p_loo = l$pointwise[, "p_loo"], looic = l$pointwise[, "looic"],
               pareto_k = l$diagnostics$pareto_k, n_eff = l$diagnostics$n_eff, r_eff = r_eff),
    sprintf("tests/reference/r_loo_psis_%s_pointwise.csv", name), row.names = FALSE
  )
  write.csv(
    data.frame(quantity = rownames(l$estimates), estimate = l$estimates[, "Estimate"],
               se = l$estimates[, "SE"]),
    sprintf("tests/reference/r_loo_psis_%s_estimates.csv", name), row.names = FALSE
  )
  r_eff
}
r_eff <- psis_reference("reference")
invisible(psis_reference("heavy"))
invisible(psis_reference("extreme"))

# LOO expectations of the posterior predictive draws (loo 2.5.1 has no loo_pit; LOO-PIT is
# checked against ArviZ instead).
y_rep <- as.matrix(read.csv("tests/reference/y_rep_reference.csv", header = FALSE))
p <- suppressWarnings(psis(-log_lik, r_eff = r_eff))
e_mean <- E_loo(y_rep, p, type = "mean", log_ratios = -log_lik)
e_q90 <- E_loo(y_rep, p, type = "quantile", probs = 0.9, log_ratios = -log_lik)
write.csv(
  data.frame(mean = e_mean$value, mean_pareto_k = e_mean$pareto_k,
             q90 = e_q90$value, q90_pareto_k = e_q90$pareto_k),
  "tests/reference/r_loo_expectations.csv", row.names = FALSE
)
