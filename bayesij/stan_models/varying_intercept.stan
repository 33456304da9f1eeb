// Weighted varying-intercept regression, non-centred:
// y[n] ~ normal(alpha[g[n]] + X[n] * beta, sigma), alpha[j] = mu + tau * z[j].
//
// weights[n] multiplies the log-likelihood of observation n: all ones reproduces the
// ordinary fit, 0 deletes the observation, integer counts give a bootstrap replicate
// (set the weights of a whole group to resample groups). log_lik holds the unweighted
// pointwise log-likelihood log p(y[n] | theta).
data {
  int<lower=0> N;
  int<lower=0> K;
  int<lower=1> J;
  matrix[N, K] X;
  array[N] int<lower=1, upper=J> g;
  vector[N] y;
  vector<lower=0>[N] weights;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] z;
  vector[K] beta;
  real<lower=0> sigma;
}
transformed parameters {
  vector[J] alpha = mu + tau * z;
}
model {
  vector[N] r = (y - (alpha[g] + X * beta)) / sigma;
  mu ~ normal(0, 10);
  tau ~ normal(0, 5);
  z ~ std_normal();
  beta ~ normal(0, 10);
  sigma ~ normal(0, 5);
  target += -0.5 * dot_product(weights, square(r)) - sum(weights) * log(sigma);
}
generated quantities {
  vector[N] log_lik;
  {
    vector[N] mu_n = alpha[g] + X * beta;
    for (n in 1:N) {
      log_lik[n] = normal_lpdf(y[n] | mu_n[n], sigma);
    }
  }
}
