"""Compiled per-observation kernels (numba): one observation's draws held in the first-level
cache while every quantity it needs is computed, instead of one NumPy pass over a whole
chunk per step. Each module is readable on its own, imports only the public names of
:mod:`~bayesij.array.kernels.fastmath`, and names the NumPy reference a test compares it to:

* :mod:`~bayesij.array.kernels.fastmath` — how kernels are compiled; the vectorised ``exp``
  and ``log``, row minima, maxima and sums, importance ratios with their sums;
* :mod:`~bayesij.array.kernels.psis` — PSIS-LOO of a row (ratios, the largest ``M + 1``,
  the generalized Pareto fit, the smoothed tail, elpd and its error);
* :mod:`~bayesij.array.kernels.waic` — WAIC's terms of a row (lppd, central moments, the
  tempered cross-validation term);
* :mod:`~bayesij.array.kernels.mcse` — R loo's Monte Carlo error of elpd;
* :mod:`~bayesij.array.kernels.autocorrelation` — R loo's relative efficiency of ``exp(l)``;
* :mod:`~bayesij.array.kernels.values` — the value check of a matrix;
* :mod:`~bayesij.array.kernels.set_weights` — the PSIS weights of the posterior without a
  set of units (one call per greedy AMIP step);
* :mod:`~bayesij.array.kernels.screen` — a screened AMIP step's candidates, and the
  screen's centred squares and prefix norms of each column;
* :mod:`~bayesij.array.kernels.rows` — sums, products and Monte Carlo errors of the AMIP
  searches' held rows, read where they lie.

The array-layer estimators import them on first use (importing :mod:`bayesij.array` does
not load numba); rows a kernel cannot do exactly are marked not done and computed by the
NumPy path. Numba compiles a kernel on first use and caches it on disk.
"""
