// Weighted linear regression: y[n] ~ normal(alpha + X[n] * beta, sigma).
//
// weights[n] multiplies the log-likelihood of observation n: all ones reproduces the
// ordinary fit, 0 deletes the observation, integer counts give a bootstrap replicate.
// log_lik holds the unweighted pointwise log-likelihood log p(y[n] | theta).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  vector[N] y;
  vector<lower=0>[N] weights;
}
parameters {
  real alpha;
  vector[K] beta;
  real<lower=0> sigma;
}
model {
  vector[N] z = (y - (alpha + X * beta)) / sigma;
  alpha ~ normal(0, 10);
  beta ~ normal(0, 10);
  sigma ~ normal(0, 5);
  target += -0.5 * dot_self(sqrt(weights) .* z) - sum(weights) * log(sigma);
}
generated quantities {
  vector[N] log_lik;
  {
    vector[N] mu = alpha + X * beta;
    for (n in 1:N) {
      log_lik[n] = normal_lpdf(y[n] | mu[n], sigma);
    }
  }
}
