"""Structured cross-validation of a hidden Markov model whose likelihood does not split into
terms: the shipped two-state Poisson HMM, weights inside the forward algorithm (seed 000's
weighting scheme (A)), approximations from one fit against exact weighted refits (PyStan).

Run: python examples/poisson_hmm_cv.py   (compiles the model once, then about 30 refits)
"""

import time

import numpy as np

import bayesij
from bayesij import refit
from bayesij.stan_models import example_data
from bayesij.stan_models.hmm import fold_elpd, fold_elpd_ij

T, SEED = 150, 3
QUANTITIES = ["lambda", "Gamma"]
OPTIONS = {"num_chains": 4, "num_samples": 1000, "num_warmup": 500}


def relative_error(approximation, exact):
    return float(np.mean(np.abs(np.subtract(approximation, exact)) / np.abs(exact)))


def leave_within_series_out(full, derivative, backend, y, contiguous):
    folds = refit.lwcv_split(T, 0.05, contiguous=contiguous, n_folds=5, seed=1)
    ij, exact, change = [], [], []
    for fold in folds:
        weights = np.ones(T)
        weights[fold] = 0.0
        refitted = backend.fit(weights)
        exact.append(fold_elpd(refitted, y, fold))
        ij.append(fold_elpd_ij(derivative, y, fold))
        linear = -bayesij.influence(derivative)["psi"].values[:, fold].sum(axis=1)
        moved = refitted.quantities.values.mean(axis=(0, 1)) - full.quantities.values.mean(
            axis=(0, 1)
        )
        change.append((linear[1], moved[1]))  # lambda[2], the busy state's rate
    return relative_error(ij, exact), np.array(change)


def main():
    data = example_data("poisson_hmm", n=T, seed=SEED)
    y = np.asarray(data["y"])
    backend = refit.PyStanBackend("poisson_hmm", data, quantities=QUANTITIES, seed=2, **OPTIONS)
    full = backend.fit(np.ones(T))  # log_lik: the conditional terms log p(y_t | y_<t, theta)
    derivative = refit.PyStanBackend(
        "poisson_hmm",
        data,
        log_lik="weight_derivative",
        quantities=QUANTITIES,
        seed=2,
        **OPTIONS,
    ).fit(np.ones(T))  # the same draws (same seed), with d log p(y; w) / d w_t
    for contiguous in (False, True):
        error, change = leave_within_series_out(full, derivative, backend, y, contiguous)
        kind = "contiguous" if contiguous else "i.i.d."
        print(f"LWCV {kind:10s} (5 folds of 5 %): IJ mean relative error {error:.4f}")
        print(f"  lambda[2] change, IJ vs exact refit: {np.round(change, 3).tolist()}")
    exact = None
    for method, options in (
        ("exact", {}),
        ("psis", {}),
        ("psis-backward", {}),
        ("ij", {"weight_derivative": derivative}),
        ("ij", {}),
    ):
        start = time.perf_counter()
        result = bayesij.lfo(full, backend, min_train=135, method=method, progress=False, **options)
        seconds = time.perf_counter() - start
        pointwise = result.pointwise["elpd"].to_numpy()
        exact = pointwise if exact is None else exact
        terms = " (weight derivatives)" if options else ""
        print(
            f"LFO {method}{terms}: elpd {result.elpd:.2f}, {result.n_refits} refits, "
            f"{seconds:.1f} s, mean relative error {relative_error(pointwise, exact):.4f}"
        )


if __name__ == "__main__":
    main()
