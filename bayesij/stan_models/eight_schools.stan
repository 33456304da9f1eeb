// Weighted eight schools, non-centred: y[j] ~ normal(mu + tau * eta[j], sigma[j]).
//
// weights[j] multiplies the log-likelihood of school j: all ones reproduces the ordinary
// fit, 0 deletes the school (its effect theta[j] then follows the population
// distribution), integer counts give a bootstrap replicate. log_lik holds the unweighted
// pointwise log-likelihood log p(y[j] | theta[j]).
data {
  int<lower=0> J;
  vector[J] y;
  vector<lower=0>[J] sigma;
  vector<lower=0>[J] weights;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] eta;
}
transformed parameters {
  vector[J] theta = mu + tau * eta;
}
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  eta ~ std_normal();
  target += -0.5 * dot_product(weights, square((y - theta) ./ sigma));
}
generated quantities {
  vector[J] log_lik;
  for (j in 1:J) {
    log_lik[j] = normal_lpdf(y[j] | theta[j], sigma[j]);
  }
}
