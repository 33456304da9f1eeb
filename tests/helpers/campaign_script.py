"""Run an exact-LOO campaign in a separate process (killed mid-way by the tests)."""

import sys

from bayesij import refit
from refit_helpers import BACKEND, slow_fit

if __name__ == "__main__":
    executor = sys.argv[2] if len(sys.argv) > 2 else "sequential"
    post = BACKEND.fit(BACKEND.checked_weights([1.0] * BACKEND.n_obs))
    refit.loo(
        post,
        refit.CallableBackend(slow_fit, BACKEND.n_obs),
        points="all",
        store=sys.argv[1],
        executor=int(executor) if executor.isdigit() else executor,
        progress=False,
    )
