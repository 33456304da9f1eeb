"""A plain script, as users write them: no ``__main__`` guard, a closure as the refit."""

import sys

import numpy as np

import bayesij
from refit_helpers import BACKEND

scale = 1.0


def fit(weights):  # a function of this script: workers must not re-run the script
    return BACKEND.fit(weights * scale)


post = BACKEND.fit(np.ones(BACKEND.n_obs))
report = bayesij.refit.bootstrap(
    post, bayesij.refit.CallableBackend(lambda w: fit(w), BACKEND.n_obs), B=4, progress=False
)
print("refits", report.n_refits, "stored", sys.argv[1:])
