"""The shared mode finder of the recovered models' Laplace approximations, against closed
forms and SciPy's optimiser."""

import numpy as np
import pytest
from scipy.optimize import minimize

from bayesij.array import newton
from bayesij.array.newton import laplace_mode


def _quadratic(precision: np.ndarray, centre: np.ndarray, offset: float = 0.0):
    def value(u):
        d = u - centre
        return offset - 0.5 * d @ precision @ d

    def derivatives(u):
        return -precision @ (u - centre), -precision

    return value, derivatives


def test_a_normal_log_density_s_mode_and_covariance_are_its_own():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 4))
    precision, centre = a @ a.T + 4 * np.eye(4), rng.normal(size=4) * 3
    mode, cov = laplace_mode(*_quadratic(precision, centre), np.zeros(4))
    np.testing.assert_allclose(mode, centre, atol=1e-12)
    np.testing.assert_allclose(cov, np.linalg.inv(precision), rtol=1e-12)


def test_where_rounding_hides_the_last_steps_the_mode_is_still_found(monkeypatch):
    # a log posterior of size 1e8 rounds away any gain below about 1e-8: with no step small
    # enough to stop on (CONVERGED = 0) only the rounding rule ends the iterations, at the
    # mode (a line search alone would find no step that climbs and say "no mode")
    monkeypatch.setattr(newton, "CONVERGED", 0.0)
    precision, centre = np.diag([1.0, 2.0, 0.5]), np.array([1.0, -2.0, 0.3])
    value, derivatives = _quadratic(precision, centre, offset=-1e8)
    mode, _ = laplace_mode(value, derivatives, np.zeros(3))
    np.testing.assert_allclose(mode, centre, atol=1e-10)


def _logistic(x: np.ndarray, y: np.ndarray, prior: float):
    """A logistic regression's log posterior (a normal prior of precision ``prior``) and
    its derivatives, from which a start far out is not concave."""

    def value(b):
        eta = x @ b
        return float(np.sum(y * eta - np.logaddexp(0, eta)) - 0.5 * prior * b @ b)

    def derivatives(b):
        p = 1 / (1 + np.exp(-(x @ b)))
        return x.T @ (y - p) - prior * b, -(x.T * (p * (1 - p))) @ x - prior * np.eye(b.size)

    return value, derivatives


def test_a_logistic_regression_s_mode_is_scipy_s_from_a_far_start():
    rng = np.random.default_rng(1)
    x = np.column_stack([np.ones(200), rng.normal(size=(200, 2))])
    y = (rng.uniform(size=200) < 1 / (1 + np.exp(-(x @ [0.3, 1.0, -0.5])))).astype(float)
    value, derivatives = _logistic(x, y, prior=0.01)
    want = minimize(
        lambda b: -value(b),
        np.zeros(3),
        jac=lambda b: -derivatives(b)[0],
        method="BFGS",
        options={"gtol": 1e-9},
    ).x
    for start in (np.zeros(3), np.array([8.0, -8.0, 8.0])):
        mode, cov = laplace_mode(value, derivatives, start)
        np.testing.assert_allclose(mode, want, atol=1e-6)
        np.testing.assert_allclose(cov, np.linalg.inv(-derivatives(mode)[1]), rtol=1e-6)


def test_from_a_start_where_the_hessian_is_indefinite_the_steps_climb_to_the_mode():
    # f(u) = -(u0^2 - 1)^2 / 4 - u1^2 / 2 has its maxima at u0 = +-1; at u0 = 0.2 the
    # Hessian is positive along u0 and Newton's own step would go to the saddle at 0
    def value(u):
        return -0.25 * (u[0] ** 2 - 1) ** 2 - 0.5 * u[1] ** 2

    def derivatives(u):
        return (
            np.array([-u[0] * (u[0] ** 2 - 1), -u[1]]),
            np.diag([-(3 * u[0] ** 2 - 1), -1.0]),
        )

    mode, cov = laplace_mode(value, derivatives, np.array([0.2, 1.0]))
    np.testing.assert_allclose(mode, [1.0, 0.0], atol=1e-10)
    np.testing.assert_allclose(cov, np.diag([0.5, 1.0]), atol=1e-9)


@pytest.mark.parametrize("case", ["unbounded", "not finite"])
def test_no_mode_is_none(case):
    if case == "unbounded":  # a linear log posterior: every step climbs, none converges
        value, derivatives = (lambda u: float(u.sum())), (lambda u: (np.ones(2), np.zeros((2, 2))))
    else:
        value, derivatives = (lambda u: 0.0), (lambda u: (np.ones(2), np.full((2, 2), np.nan)))
    assert laplace_mode(value, derivatives, np.zeros(2)) is None
