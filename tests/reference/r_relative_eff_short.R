# R loo's relative_eff for very short chains (4 chains of 3 to 8 draws), the values
# tests/array/test_ess.py compares bayesij's with. Run from tests/reference:
#   Rscript r_relative_eff_short.R     (loo 2.5.1, R 4.2.2)
library(loo)
set.seed(1)
out <- NULL
for (d in c(3, 4, 5, 6, 8)) {
  x <- array(rnorm(4 * d * 3, -1, 0.3), dim = c(d, 4, 3))  # draws x chains x observations
  ll <- matrix(x, ncol = 3)  # draws of chain 1, then chain 2, ...
  write.csv(ll, sprintf("log_lik_short_%d.csv", d), row.names = FALSE)
  out <- rbind(out, data.frame(draws = d, obs = 1:3, r_eff = relative_eff(exp(x))))
}
write.csv(out, "r_relative_eff_short.csv", row.names = FALSE)
