# Truncated importance sampling LOO from R loo (is_method = "tis"), for the reference and
# heavy-tailed inputs of r_loo_reference.R. Run from the repository root:
#   Rscript tests/reference/r_loo_tis.R
# (Debian: apt-get install r-base-core r-cran-loo). Writes tests/reference/r_loo_tis_*.csv.
suppressPackageStartupMessages(library(loo))

tis_reference <- function(name) {
  data <- read.csv(sprintf("tests/reference/log_lik_%s.csv", name))
  ll <- as.matrix(data[, -1])
  r_eff <- relative_eff(exp(ll), chain_id = data$chain)
  l <- suppressWarnings(loo(ll, r_eff = r_eff, is_method = "tis"))
  write.csv(
    data.frame(elpd_loo = l$pointwise[, "elpd_loo"],
               mcse_elpd_loo = l$pointwise[, "mcse_elpd_loo"],
               p_loo = l$pointwise[, "p_loo"], n_eff = l$diagnostics$n_eff,
               pareto_k = l$diagnostics$pareto_k,
               loo_version = as.character(packageVersion("loo"))),
    sprintf("tests/reference/r_loo_tis_%s_pointwise.csv", name), row.names = FALSE
  )
}
invisible(tis_reference("reference"))
invisible(tis_reference("heavy"))
