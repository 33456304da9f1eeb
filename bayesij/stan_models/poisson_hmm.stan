// Two-state Poisson hidden Markov model with observation weights inside the forward algorithm
// (weighting scheme (A) of Ghosh et al. 2020): z_t is a Markov chain on {1, 2} with transition rows
// Gamma[1], Gamma[2], started from its stationary distribution, and y_t | z_t = k is
// Poisson(lambda[k]), lambda[1] < lambda[2].
//
// weights[t] multiplies the emission log density log p(y_t | z_t) inside the forward
// recursion, so the weighted marginal likelihood p(y; theta, w) does not split into terms:
// weight 0 leaves y_t out but keeps z_t in the chain; all ones is the ordinary fit; weights
// 1 up to an origin and 0 after it are the fit to the past (leave-future-out: Ghosh et al. 2020,
// Proposition 3).
//
// Generated quantities, functions of theta only (computed at w = 1, whatever the weights):
//   log_lik[t]           = log p(y_t | y_1 .. y_{t-1}, theta), the forward filter's one-step
//                          predictive terms (they sum to log p(y; theta)): what bayesij.lfo
//                          and PSIS read;
//   weight_derivative[t] = d log p(y; theta, w) / d w_t at w = 1 = sum_k P(z_t = k | y, theta)
//                          log p(y_t | z_t = k), the smoothed expectation of the emission log
//                          density: what the influence scores and the IJ read.
functions {
  // log p(y; theta, w) by the forward algorithm, emissions weighted
  real weighted_log_marginal(matrix log_emission, vector w, matrix log_gamma, vector log_start) {
    int n = cols(log_emission);
    vector[2] log_alpha = log_start + w[1] * log_emission[:, 1];
    for (t in 2:n) {
      vector[2] next;
      for (k in 1:2) {
        next[k] = log_sum_exp(log_alpha + log_gamma[:, k]) + w[t] * log_emission[k, t];
      }
      log_alpha = next;
    }
    return log_sum_exp(log_alpha);
  }
}
data {
  int<lower=1> N;
  array[N] int<lower=0> y;
  vector<lower=0>[N] weights;
}
parameters {
  positive_ordered[2] lambda;
  array[2] simplex[2] Gamma;
}
transformed parameters {
  matrix[2, 2] log_gamma;  // log_gamma[j, k] = log P(z_t = k | z_{t-1} = j)
  vector[2] log_start;     // the stationary distribution
  for (j in 1:2) {
    log_gamma[j] = log(Gamma[j]');
  }
  log_start = log([Gamma[2][1], Gamma[1][2]]' / (Gamma[2][1] + Gamma[1][2]));
}
model {
  matrix[2, N] log_emission;
  for (t in 1:N) {
    for (k in 1:2) {
      log_emission[k, t] = poisson_lpmf(y[t] | lambda[k]);
    }
  }
  lambda ~ gamma(2, 0.2);
  Gamma[1] ~ dirichlet([4, 1]');
  Gamma[2] ~ dirichlet([1, 4]');
  target += weighted_log_marginal(log_emission, weights, log_gamma, log_start);
}
generated quantities {
  vector[N] log_lik;
  vector[N] weight_derivative;
  {
    matrix[2, N] log_emission;
    matrix[2, N] log_alpha;  // forward: log p(y_1 .. y_t, z_t = k)
    matrix[2, N] log_beta;   // backward: log p(y_{t+1} .. y_N | z_t = k)
    real log_marginal;
    for (t in 1:N) {
      for (k in 1:2) {
        log_emission[k, t] = poisson_lpmf(y[t] | lambda[k]);
      }
    }
    log_alpha[:, 1] = log_start + log_emission[:, 1];
    log_lik[1] = log_sum_exp(log_alpha[:, 1]);
    for (t in 2:N) {
      for (k in 1:2) {
        log_alpha[k, t] = log_sum_exp(log_alpha[:, t - 1] + log_gamma[:, k]) + log_emission[k, t];
      }
      log_lik[t] = log_sum_exp(log_alpha[:, t]) - log_sum_exp(log_alpha[:, t - 1]);
    }
    log_beta[:, N] = rep_vector(0, 2);
    for (t in 1:(N - 1)) {
      int u = N - t;
      for (j in 1:2) {
        log_beta[j, u] = log_sum_exp(log_gamma[j]' + log_emission[:, u + 1] + log_beta[:, u + 1]);
      }
    }
    log_marginal = log_sum_exp(log_alpha[:, N]);
    for (t in 1:N) {
      vector[2] smoothed = exp(log_alpha[:, t] + log_beta[:, t] - log_marginal);
      weight_derivative[t] = dot_product(smoothed, log_emission[:, t]);
    }
  }
}
