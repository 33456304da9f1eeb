// Weighted linear regression with held-out test data (the Stan User's Guide's train/test pattern).
//
// Only the training data (X, y) enter the model block; the test data (X_test, y_test)
// are used in generated quantities only, so the fit does not see them. weights[n]
// multiplies the log-likelihood of training observation n (all ones: the ordinary fit).
// log_lik: unweighted pointwise log-likelihood of the training data; log_lik_test:
// log p(y_test[j] | theta) for bayesij.holdout; y_test_rep: posterior predictive draws of
// the test points for bayesij.prediction_errors.
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  vector[N] y;
  vector<lower=0>[N] weights;
  int<lower=0> N_test;
  matrix[N_test, K] X_test;
  vector[N_test] y_test;
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
  vector[N_test] log_lik_test;
  vector[N_test] y_test_rep;
  {
    vector[N] mu = alpha + X * beta;
    vector[N_test] mu_test = alpha + X_test * beta;
    for (n in 1:N) {
      log_lik[n] = normal_lpdf(y[n] | mu[n], sigma);
    }
    for (j in 1:N_test) {
      log_lik_test[j] = normal_lpdf(y_test[j] | mu_test[j], sigma);
      y_test_rep[j] = normal_rng(mu_test[j], sigma);
    }
  }
}
