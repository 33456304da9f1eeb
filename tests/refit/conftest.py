"""Fixtures of the refit tests: a heteroskedastic regression fitted in closed form
(ConjugateNormalBackend, 2000 exact draws) and its full-data posterior."""

import numpy as np
import pytest

from bayesij import refit
from conjugate import heteroskedastic_regression


@pytest.fixture(scope="module")
def backend():
    X, y = heteroskedastic_regression(200, np.random.default_rng(5))
    return refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000, seed=1)


@pytest.fixture(scope="module")
def post(backend):
    return backend.fit(np.ones(backend.n_obs))
