// Weighted logistic regression: y[n] ~ bernoulli_logit(alpha + X[n] * beta).
//
// weights[n] multiplies the log-likelihood of observation n: all ones reproduces the
// ordinary fit, 0 deletes the observation, integer counts give a bootstrap replicate.
// log_lik holds the unweighted pointwise log-likelihood log p(y[n] | theta).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  array[N] int<lower=0, upper=1> y;
  vector<lower=0>[N] weights;
}
parameters {
  real alpha;
  vector[K] beta;
}
model {
  vector[N] eta = alpha + X * beta;
  vector[N] yv = to_vector(y);
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2.5);
  target += dot_product(weights, yv .* log_inv_logit(eta) + (1 - yv) .* log1m_inv_logit(eta));
}
generated quantities {
  vector[N] log_lik;
  {
    vector[N] eta = alpha + X * beta;
    for (n in 1:N) {
      log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
    }
  }
}
