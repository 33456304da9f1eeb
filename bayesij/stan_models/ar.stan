// Weighted AR(P) model: y[t] ~ normal(mu + sum_p rho[p] * y[t - p], sigma), t = P + 1 .. T,
// conditional on the first P values.
//
// Observation n = 1 .. N is time point t = P + n. weights[n] multiplies its conditional
// log-likelihood (all ones: the ordinary fit; 1 up to an origin and 0 after it: the fit
// to the past, for leave-future-out). log_lik[n] = log p(y[P + n] | y[1 .. P + n - 1],
// theta), the conditional terms bayesij.lfo needs.
data {
  int<lower=1> P;
  int<lower=0> N;
  vector[N + P] y;
  vector<lower=0>[N] weights;
}
parameters {
  real mu;
  vector<lower=-1, upper=1>[P] rho;
  real<lower=0> sigma;
}
model {
  vector[N] m;
  for (n in 1:N) {
    m[n] = mu + dot_product(rho, reverse(y[n:(n + P - 1)]));
  }
  mu ~ normal(0, 5);
  rho ~ normal(0, 0.5);
  sigma ~ normal(0, 2);
  target += -0.5 * dot_self(sqrt(weights) .* ((y[(P + 1):(N + P)] - m) / sigma))
            - sum(weights) * log(sigma);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[P + n] | mu + dot_product(rho, reverse(y[n:(n + P - 1)])), sigma);
  }
}
