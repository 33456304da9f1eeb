"""Fixtures of the report tests: a small conjugate regression fitted in closed form, the
figures closed after each test (matplotlib on the Agg backend)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bayesij import refit  # noqa: E402
from conjugate import small_regression  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    X, y = small_regression(60, seed=8)
    X[:3, 1] = [3.5, 3.8, 4.1]
    y[:3] = [-2.0, -2.5, -3.0]
    return refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=2000, seed=3)


@pytest.fixture(scope="module")
def post(backend):
    return backend.fit(np.ones(backend.n_obs))


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")
