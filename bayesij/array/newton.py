"""The mode of a log posterior and the inverse of its negative Hessian there, by Newton's
method with a line search: the Laplace approximation of a set's removal in the models
AMIP recovers from the draws (:mod:`bayesij.array.amip_normal`,
:mod:`bayesij.array.amip_logistic`, :mod:`bayesij.array.amip_hierarchy_laplace`).

References
----------
.. [1] Nocedal, J. and Wright, S. J. (2006). Numerical Optimization, 2nd ed., chapter 3
   (line search) and section 3.4 (Newton's method with Hessian modification).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["laplace_mode"]

#: Newton's steps to the mode, at most, and the largest step coordinate (in the draws'
#: sds) at which it has converged.
NEWTON_STEPS, CONVERGED = 100, 1e-10

#: The gain a Newton step promises (``-g' H^-1 g``), relative to the log posterior's size,
#: below which no line search can see it climb (the rounding of the log posterior's sum):
#: the mode, to the step's square. On a varying-intercept model of 24 groups of 10
#: without its 12 largest observations the search failed with a step of 5e-9 sds
#: promising 6e-17 (a log posterior of -346): "no mode" at NumPy 2.5, a mode at 2.4, the
#: same draws.
ROUNDED = 1e-12

#: How far below zero a Hessian that is not negative definite is shifted (its largest
#: eigenvalue, in the draws' whitened units, where the posterior's is about -1) to give
#: an ascent direction.
SHIFT = 1.0

#: The shortest fraction of a step the line search tries.
SHORTEST = 1e-8


def laplace_mode(
    log_posterior: Callable[[np.ndarray], float],
    derivatives: Callable[[np.ndarray], tuple],
    start: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The mode (R,) of ``log_posterior`` and the inverse of its negative Hessian there
    (R, R), by Newton's method from ``start`` (R,), each step halved until the log
    posterior does not fall, on the Hessian shifted :data:`SHIFT` below zero where it is
    not negative definite (an ascent direction); converged where the Hessian is negative
    definite and the step is below :data:`CONVERGED`, or, the step then taken as it is,
    promises less than the log posterior's rounding (:data:`ROUNDED`), which no line
    search can see. None where a derivative is not finite, no step climbs or it does not
    converge within :data:`NEWTON_STEPS`.

    ``log_posterior(u)`` is a float; ``derivatives(u)`` the gradient (R,) and Hessian
    (R, R) at ``u``.

    A set that moves the parameters by many posterior sds (a t(4) outlier far from the
    rest; firm-years that hold up a regression's coefficient) leaves the log posterior
    not concave at the draws' mean, where Newton's method alone found no mode; the
    shifted steps reach the maximum, whose removals hold the exact refits
    (``tests/array/test_amip_hierarchy_laplace.py``, ``tests/array/test_amip_normal.py``).
    """
    u = np.array(start, dtype=float)
    value = float(log_posterior(u))
    for _ in range(NEWTON_STEPS):
        gradient, hessian = derivatives(u)
        if not (np.all(np.isfinite(hessian)) and np.all(np.isfinite(gradient))):
            return None
        top = np.linalg.eigvalsh(hessian)[-1]
        if top >= 0:  # not concave here: an ascent step on the shifted Hessian
            step = -np.linalg.solve(hessian - (top + SHIFT) * np.eye(u.size), gradient)
        else:
            step = -np.linalg.solve(hessian, gradient)
            if np.max(np.abs(step)) < CONVERGED:
                return u, np.linalg.inv(-hessian)
            if gradient @ step <= ROUNDED * max(1.0, abs(value)):
                u = u + step  # the covariance at the point returned
                return u, np.linalg.inv(-derivatives(u)[1])
        moved = _climbed(log_posterior, u, step, value)
        if moved is None:
            return None
        u, value = moved
    return None


def _climbed(log_posterior: Callable, u: np.ndarray, step: np.ndarray, value: float):
    """The point ``u + length step`` (R,) and its log posterior, the longest of the
    lengths 1, 1/2, 1/4, ... (down to :data:`SHORTEST`) where it is at least ``value``;
    None where none is."""
    length = 1.0
    while length > SHORTEST:
        moved = u + length * step
        climbed = float(log_posterior(moved))
        if climbed >= value:
            return moved, climbed
        length *= 0.5
    return None
