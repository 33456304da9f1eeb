"""Module-level refit functions for the campaign tests (picklable, importable by workers)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from bayesij.refit import ConjugateNormalBackend, RefitFailed


def small_regression(n: int = 40, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    y = X @ [1.0, 0.5] + (0.5 + np.abs(X[:, 1])) * rng.normal(size=n)
    return X, y


BACKEND = ConjugateNormalBackend(*small_regression(), sigma=1.0, draws=400)


def slow_fit(weights):
    """The conjugate refit, logging each start to $BAYESIJ_TEST_LOG and taking a while."""
    with open(os.environ["BAYESIJ_TEST_LOG"], "a") as handle:
        handle.write(
            f"{int(np.flatnonzero(weights == 0)[0]) if (weights == 0).any() else -1} "
            f"{hash(weights.tobytes())}\n"
        )
    time.sleep(float(os.environ.get("BAYESIJ_TEST_SLEEP", "0.2")))
    return BACKEND.fit(weights)


def failing_fit(weights):
    """Fails (as a divergent refit would) when observation 0 is deleted; also on weight 2
    for observation 1 (an ordinary exception)."""
    if weights[0] == 0:
        raise RefitFailed("12 divergent transitions in 400 draws")
    if weights[1] == 2:
        raise ZeroDivisionError("boom")
    return BACKEND.fit(weights)


def dying_fit(marker: str, weights):
    """Kills its own process (as a segfault or an out-of-memory kill would) when
    observation 0 is deleted and the file ``marker`` exists."""
    if weights[0] == 0 and os.path.exists(marker):
        os.kill(os.getpid(), signal.SIGKILL)
    return BACKEND.fit(weights)


def dying_or_slow_fit(marker: str, weights):
    """As :func:`dying_fit`, and every other refit takes 2 s: on a Dask worker it is
    still running when the dying one takes the worker down."""
    if weights[0] == 0 and os.path.exists(marker):
        time.sleep(0.3)  # let the slow refit start beside it on the same worker
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(2.0)
    return BACKEND.fit(weights)
