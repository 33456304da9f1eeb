// Weighted negative-binomial regression with an exposure offset:
// y[n] ~ neg_binomial_2_log(log(exposure[n]) + alpha + X[n] * beta, phi).
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
  real<lower=0> phi;
}
model {
  vector[N] eta = log_exposure + alpha + X * beta;
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2.5);
  phi ~ exponential(0.1);
  for (n in 1:N) {
    target += weights[n] * neg_binomial_2_log_lpmf(y[n] | eta[n], phi);
  }
}
generated quantities {
  vector[N] log_lik;
  {
    vector[N] eta = log_exposure + alpha + X * beta;
    for (n in 1:N) {
      log_lik[n] = neg_binomial_2_log_lpmf(y[n] | eta[n], phi);
    }
  }
}
