"""Walk the calls a public estimator makes through the package's layers.

A *stay* is a bayesij function on the way from the public function to the compiled kernel:
the frames on the stack when the kernel's module is first entered (the walk a reader makes
following ``log_lik`` down); a *climb* is a call, anywhere during the call, from a function
of one layer into a function of a higher layer (a lower floor calling back up, e.g. the
array layer reading a generator or a reader that a higher layer handed it).
Run as a script, it prints the counts for ``bayesij.loo`` and ``bayesij.amip``::

    python tests/helpers/walk.py
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from layers import layer_of  # tests/helpers: on the path in the tests, beside it as a script

#: Where a walk ends: the PSIS kernel, or the batch-means cross-products of the influence.
KERNELS = ("bayesij.array.kernels.psis", "bayesij.array.blocks")


def _stack(frame) -> list[str]:
    names = []
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if layer_of(module) is not None:
            names.append(f"{module}.{frame.f_code.co_name}")
        frame = frame.f_back
    return names[::-1]


def walk(call) -> tuple[list[str], list[tuple[str, str]]]:
    """Run ``call()`` on one thread of chunks and return the stays (``module.function``
    from the public function to the first kernel) and the climbing calls
    ``(caller, callee)``."""
    from bayesij.array import numeric

    stays: list[str] = []
    climbs: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__")
        callee = layer_of(module)
        if callee is None:
            return
        if not stays and module in KERNELS:
            stays.extend(_stack(frame))
        caller_frame = frame.f_back
        while caller_frame is not None and layer_of(caller_frame.f_globals.get("__name__")) is None:
            caller_frame = caller_frame.f_back  # through NumPy, functools, threads' pools
        if caller_frame is None:
            return
        caller_module = caller_frame.f_globals.get("__name__")
        if callee > layer_of(caller_module):
            climbs.append(
                (
                    f"{caller_module}.{caller_frame.f_code.co_name}",
                    f"{module}.{frame.f_code.co_name}",
                )
            )

    threads, numeric.THREADS = numeric.THREADS, 1
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        numeric.THREADS = threads
    return stays, climbs


def example():
    """A small regression fit: (quantities, log-likelihood) draws, 4 x 250 by 200."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = 1 + 0.5 * x + rng.standard_t(4, size=200)
    theta = np.array([1.0, 0.5]) + rng.normal(size=(1000, 2)) / 14
    log_lik = -0.5 * (y - theta[:, :1] - theta[:, 1:] * x) ** 2
    return theta.reshape(4, 250, 2), log_lik.reshape(4, 250, 200)


def main() -> None:
    import warnings

    import bayesij

    draws, log_lik = example()
    post = bayesij.from_arrays(draws, log_lik, quantity_names=["a", "b"])
    columns = np.arange(log_lik.shape[2])
    theta = draws.reshape(-1, 2)
    function = bayesij.loglik_function(
        lambda cols, t: log_lik.reshape(-1, log_lik.shape[2])[:, cols],
        columns,
        theta,
        n_chains=4,
        block_size=64,
        names=["a", "b"],
    )
    calls = {
        "loo": lambda: bayesij.loo(log_lik),
        "loo (function)": lambda: bayesij.loo(function),
        "amip": lambda: bayesij.amip(post, "b", "sign", method="linear"),
        "amip (function)": lambda: bayesij.amip(function, "b", "sign", method="linear"),
        "amip (reweighted)": lambda: bayesij.amip(post, "b", "sign"),
        "ij_covariance (function)": lambda: bayesij.ij_covariance(function),
    }
    warnings.simplefilter("ignore")
    for name, call in calls.items():
        call()  # compile first
        stays, climbs = walk(call)
        layers = [layer_of(stay.rsplit(".", 1)[0]) for stay in stays]
        ups = sum(b > a for a, b in zip(layers, layers[1:], strict=False))
        print(f"{name}: {len(stays)} stays ({ups} up the stack), {len(climbs)} climbs")
        for caller, callee in climbs:
            print(f"    {caller} -> {callee}")


if __name__ == "__main__":
    main()
