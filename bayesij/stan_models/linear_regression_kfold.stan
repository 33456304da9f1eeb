// Weighted linear regression that holds out fold k of n_folds contiguous folds.
//
// The Stan User's Guide's K-fold pattern with a correct fold assignment: N observations in n_folds
// contiguous folds whose sizes differ by at most one (the first N % n_folds folds hold
// one more), every observation in exactly one fold; bayesij.refit.kfold_split_contiguous
// gives the same assignment in Python. The fit uses the observations outside fold k,
// each weighted by weights[n]; log_lik is the unweighted log-likelihood of every
// observation, log_lik_test that of fold k's (for bayesij.holdout), fold the fold of each
// observation.
functions {
  // Size of fold j (1-based) of n observations in n_folds contiguous folds.
  int fold_size(int n, int n_folds, int j) {
    return n %/% n_folds + (j <= n % n_folds ? 1 : 0);
  }
  // First observation of fold j.
  int fold_start(int n, int n_folds, int j) {
    int start = 1;
    for (i in 1:(j - 1)) {
      start += fold_size(n, n_folds, i);
    }
    return start;
  }
}
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  vector[N] y;
  vector<lower=0>[N] weights;
  int<lower=2, upper=N> n_folds;
  int<lower=1, upper=n_folds> k;
}
transformed data {
  int start = fold_start(N, n_folds, k);
  int size = fold_size(N, n_folds, k);
  vector[N] train = rep_vector(1, N);
  train[start:(start + size - 1)] = rep_vector(0, size);
  vector[N] w = weights .* train;
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
  target += -0.5 * dot_self(sqrt(w) .* z) - sum(w) * log(sigma);
}
generated quantities {
  vector[N] log_lik;
  vector[size] log_lik_test;
  array[N] int fold;
  {
    vector[N] mu = alpha + X * beta;
    for (n in 1:N) {
      log_lik[n] = normal_lpdf(y[n] | mu[n], sigma);
    }
    log_lik_test = log_lik[start:(start + size - 1)];
    for (j in 1:n_folds) {
      int first = fold_start(N, n_folds, j);
      for (n in first:(first + fold_size(N, n_folds, j) - 1)) {
        fold[n] = j;
      }
    }
  }
}
