// Weighted Poisson regression with an exposure offset:
// y[n] ~ poisson_log(log(exposure[n]) + alpha + X[n] * beta).
//
// weights[n] multiplies the log-likelihood of observation n: all ones reproduces the
// ordinary fit, 0 deletes the observation, integer counts give a bootstrap replicate.
// log_lik holds the unweighted pointwise log-likelihood log p(y[n] | theta).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  array[N] int<lower=0> y;
  vector<lower=0>[N] exposure;
  vector<lower=0>[N] weights;
}
transformed data {
  vector[N] log_exposure = log(exposure);
}
parameters {
  real alpha;
  vector[K] beta;
}
transformed parameters {
  vector[N] eta = log_exposure + alpha + X * beta;
}
model {
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2.5);
  for (n in 1:N) {
    target += weights[n] * poisson_log_lpmf(y[n] | eta[n]);
  }
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) {
    log_lik[n] = poisson_log_lpmf(y[n] | eta[n]);
  }
}
