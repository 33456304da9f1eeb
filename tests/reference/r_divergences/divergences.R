# R's density() (Gaussian kernel, bw.nrd0, 512 points from the smaller to the larger of
# both samples) of the unweighted draws and of the same draws weighted, for each quantity
# in inputs.csv, and the divergences priorsense 1.2 computes from them (its js_div,
# hellinger_dist and kl_div use philentropy on the two densities normalised to sum 1:
# Jensen-Shannon in log2, 2 sqrt(1 - sum sqrt(p q)), sum p log(p / q) with a ratio over
# q = 0 taken as philentropy's epsilon 1e-5), and the weighted
# 1-Wasserstein distance as transport::wasserstein1d(p = 1) defines it.
# Run: Rscript divergences.R (writes values.json). R 4.2.2 (Debian bookworm).
library(jsonlite)
inputs <- read.csv("inputs.csv")
out <- list(R = R.version.string)
for (k in 1:3) {
  x <- inputs[[paste0("x", k)]]
  w <- inputs[[paste0("w", k)]]
  from <- min(x); to <- max(x)
  p <- suppressWarnings(density(x, from = from, to = to))
  q <- suppressWarnings(density(x, from = from, to = to, weights = w))
  P <- p$y / sum(p$y); Q <- q$y / sum(q$y)
  M <- (P + Q) / 2
  term <- function(a, b) ifelse(a > 0, a * log2(a / b), 0)
  js <- 0.5 * sum(term(P, M)) + 0.5 * sum(term(Q, M))
  hellinger <- 2 * sqrt(1 - sum(sqrt(P * Q)))
  # philentropy replaces a ratio with a zero denominator by epsilon = 1e-5
  kl <- sum(ifelse(P > 0, P * log(ifelse(Q > 0, P / Q, 1e-5)), 0))
  # 1-Wasserstein of the empirical distributions: the integral of |F_P - F_Q|
  o <- order(x); xs <- x[o]
  Fp <- cumsum(rep(1 / length(x), length(x))); Fq <- cumsum(w[o] / sum(w))
  ws <- sum(abs(Fp - Fq)[-length(xs)] * diff(xs))
  out[[paste0("q", k)]] <- list(bw = p$bw, x = p$x, p = p$y, q = q$y, js_div = js,
                                hellinger_dist = hellinger, kl_div = kl, ws_dist = ws)
}
write_json(out, "values.json", digits = NA, auto_unbox = TRUE)
