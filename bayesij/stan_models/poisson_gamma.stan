// Weighted Poisson-gamma random-effects model (Giordano and Broderick's negative-binomial
// example): y[n] | lambda[n] ~ poisson(lambda[n]), lambda[n] | gamma ~ gamma(a, gamma),
// with the shape a fixed. Marginally y[n] ~ negative binomial; each lambda[n] is a random
// effect that does not concentrate as N grows, so the infinitesimal jackknife for gamma
// is not expected to match the bootstrap.
//
// weights[n] multiplies the log-likelihood of observation n: all ones reproduces the
// ordinary fit, 0 deletes the observation (lambda[n] then only follows its prior),
// integer counts give a bootstrap replicate. log_lik holds the unweighted conditional
// log-likelihood log p(y[n] | lambda[n]).
data {
  int<lower=0> N;
  array[N] int<lower=0> y;
  real<lower=0> a;
  vector<lower=0>[N] weights;
}
parameters {
  real<lower=0> gamma;
  vector<lower=0>[N] lambda;
}
model {
  gamma ~ gamma(1, 1);
  lambda ~ gamma(a, gamma);
  for (n in 1:N) {
    target += weights[n] * poisson_lpmf(y[n] | lambda[n]);
  }
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) {
    log_lik[n] = poisson_lpmf(y[n] | lambda[n]);
  }
}
