# Reference model weights from R loo (stacking_weights, pseudobma_weights) for pointwise
# elpd matrices this script simulates and saves beside them.
# Run from the repository root: Rscript tests/reference/r_model_weights.R
# (Debian: apt-get install r-base-core r-cran-loo). Writes tests/reference/model_weights_*.csv.
suppressPackageStartupMessages(library(loo))
set.seed(20261122)

n <- 120
x <- rnorm(n)
y <- 0.4 + 0.8 * x + rt(n, df = 4)
cases <- list(
  # three regressions of different quality: all three share the weight
  regressions = cbind(
    dnorm(y, 0.4 + 0.8 * x, 1.3, log = TRUE),
    dnorm(y, 0.4, 1.6, log = TRUE),
    dt((y - 0.4 - 0.8 * x) / 1.0, df = 4, log = TRUE)
  ),
  # a model no mixture wants (stacking gives it weight 0)
  dominated = cbind(
    dnorm(y, 0.4 + 0.8 * x, 1.3, log = TRUE),
    dt((y - 0.4 - 0.8 * x) / 1.0, df = 4, log = TRUE),
    dnorm(y, -1, 3, log = TRUE)
  ),
  # two models that complement each other on different halves of the data
  complementary = cbind(
    ifelse(seq_len(n) <= n / 2, dnorm(y, 0.4 + 0.8 * x, 1.2, log = TRUE),
           dnorm(y, 0, 2.5, log = TRUE)),
    ifelse(seq_len(n) <= n / 2, dnorm(y, 0, 2.5, log = TRUE),
           dnorm(y, 0.4 + 0.8 * x, 1.2, log = TRUE))
  )
)

for (name in names(cases)) {
  lpd <- cases[[name]]
  colnames(lpd) <- paste0("model", seq_len(ncol(lpd)))
  write.csv(lpd, sprintf("tests/reference/model_weights_lpd_%s.csv", name), row.names = FALSE)
  stacking <- as.numeric(stacking_weights(lpd))
  pseudobma <- as.numeric(pseudobma_weights(lpd, BB = FALSE))
  pseudobma_plus <- as.numeric(pseudobma_weights(lpd, BB = TRUE, BB_n = 1000))
  write.csv(
    data.frame(model = colnames(lpd), stacking = stacking, pseudobma = pseudobma,
               pseudobma_plus = pseudobma_plus, bb_n = 1000,
               loo_version = as.character(packageVersion("loo"))),
    sprintf("tests/reference/model_weights_r_%s.csv", name), row.names = FALSE
  )
}
