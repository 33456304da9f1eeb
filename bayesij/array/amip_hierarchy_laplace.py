"""A set's removal from the recovered varying-intercept model by importance sampling at its
Laplace approximation, where reweighting the draws cannot reach.

:class:`~bayesij.array.amip_hierarchy.HierarchyModel` reweights the posterior draws by the
touched groups' integrated likelihood: exact, and the priors cancel, but a set that moves
``mu`` or a slope by two posterior sds (the 24 observations that could flip ``mu``'s sign
in 24 groups of 10) leaves few draws where the posterior without it lies (k-hat 1.45).
Here the posterior without the set is sampled afresh, as the normal regression's removals
are (:mod:`bayesij.array.amip_normal`): in ``psi = (mu, log tau, log sigma, beta)``,
whitened by the draws (``u``), the prior is taken as normal and estimated by Stein's
identity from the draws and the integrated likelihood's gradient there (with its
batch-means error: the removal's band), the posterior without the set is the estimated
prior times the kept groups' integrated likelihood (BDA3 section 5.4), and it is sampled
from a multivariate t at its Laplace approximation, the weights' Pareto k-hat checked.

References
----------
.. [1] Broderick, T., Giordano, R. and Meager, R. (2020). An automatic finite-sample
   robustness metric: when can dropping a little data make a big difference?
   arXiv:2011.14999.
.. [2] Gelman, A., Carlin, J. B., Stern, H. S., Dunson, D. B., Vehtari, A. and Rubin,
   D. B. (2013). Bayesian Data Analysis, 3rd ed., section 5.4.
.. [3] Hyvärinen, A. (2005). Estimation of non-normalized statistical models by score
   matching. Journal of Machine Learning Research 6, 695-709 (Stein's identity).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from bayesij.array.amip_hierarchy import (
    GroupStats,
    HierarchyModel,
    _log_marginal,
    kept_stats,
    residual_sums,
)
from bayesij.array.amip_logistic import Affine, Removal, _prior_precision, _whitened, remembered
from bayesij.array.amip_normal import sample_at_mode, sampled_removal
from bayesij.array.newton import laplace_mode
from bayesij.array.numeric import top_positive

__all__ = ["LaplaceHierarchy", "laplace_hierarchy"]

#: The step of the Hessian's central differences (of the analytic gradient), in the draws'
#: sds.
HESSIAN_STEP = 1e-5


class LaplaceHierarchy(NamedTuple):
    """A recovered varying-intercept model (``hierarchy``) whose removals are importance
    samples at their Laplace approximation (:func:`laplace_hierarchy`).

    Attributes
    ----------
    mean, basis : ndarray of shape (P,), (P, R)
        ``theta``'s columns of ``mu``, ``log tau``, ``log sigma`` and the slopes are
        ``mean + basis u`` (``theta``: the posterior's quantities with ``tau`` and
        ``sigma`` by their logarithms, :meth:`parameters`); the other rows are zero.
    hierarchy : HierarchyModel
    centre, root : ndarray of shape (R,), (R, R)
        ``psi = centre + u @ root.T``.
    u : ndarray of shape (S, R)
        The posterior's draws, whitened.
    precision, pull : ndarray of shape (R, R), (R,)
        The prior's estimated precision in ``u`` and its gradient at ``u = 0``.
    batches : ndarray of shape (B, R, R)
        Stein's estimate of the precision on each batch of the draws.
    samples : dict, optional
        The latest importance samples (:func:`~bayesij.array.amip_logistic.remembered`).
    """

    mean: np.ndarray
    basis: np.ndarray
    hierarchy: HierarchyModel
    centre: np.ndarray
    root: np.ndarray
    u: np.ndarray
    precision: np.ndarray
    pull: np.ndarray
    batches: np.ndarray
    samples: dict | None = None

    @property
    def log_quantities(self) -> bool:
        """Its removals are importance samples: a positive quantity whose logarithm is
        affine (``tau``, ``sigma``) is taken too."""
        return True

    @property
    def reweights_the_draws(self) -> bool:
        """Its removals are fresh samples, their band the prior's error."""
        return False

    @property
    def decided_by(self) -> str:
        """How an answer decided in this model was worked out (``AmipResult.decided_by``)."""
        return (
            "importance sampling at the Laplace approximation of the normal "
            "varying-intercept model recovered from the draws (each observation's group "
            "effect, value and predictors recovered exactly, the group effects integrated "
            "out, the prior from the draws); its Pareto k-hat checked"
        )

    def parameters(self, theta: np.ndarray) -> np.ndarray:
        """The draws ``theta`` (S, P) of the posterior's quantities with ``tau`` and
        ``sigma`` by their logarithms: what :func:`~bayesij.array.amip_logistic.affine_in`
        reads a quantity in."""
        phi = np.array(theta, dtype=float)
        scales = self.hierarchy.basis[:, 1:3].argmax(axis=0)
        phi[:, scales] = np.log(phi[:, scales])
        return phi

    def removal(self, dropped, quantity: Affine, sign: int, z: float) -> Removal | None:
        """The metric ``mean + sign z sd`` of the quantity without ``dropped`` by
        importance sampling (:meth:`importance_sample`), with its moves toward each
        batch's prior (:class:`~bayesij.array.amip_logistic.Removal`); None where the
        posterior without them has no mode."""
        toward = self.batches - self.precision
        return sampled_removal(self.importance_sample(dropped), quantity, (sign, z), toward)

    def importance_sample(self, dropped, seed: int = 0) -> tuple | None:
        """Draws ``u`` (M, R), normalised weights (M,) and their Pareto k-hat of the
        posterior without ``dropped``, from a multivariate t at its Laplace
        approximation; None where it has no mode (each set drawn once)."""
        return remembered(self, dropped, seed, LaplaceHierarchy.drawn_sample)

    def drawn_sample(self, dropped, seed: int = 0) -> tuple | None:
        """:meth:`importance_sample`, drawn now."""
        keep = _kept(self.hierarchy, dropped)
        return sample_at_mode(_laplace(self, keep), partial(_log_posterior, self, keep), seed)

    def first_order(self, quantity: Affine, goal, dropped=()) -> np.ndarray:
        """Each observation's change (N,) of the goal's metric when it is dropped beside
        ``dropped``, each one's removal reweighted exactly
        (:meth:`~bayesij.array.amip_hierarchy.HierarchyModel.first_order_of`)."""
        return self.hierarchy.first_order_of(quantity.at(self.u), goal, dropped)

    def ranking(self, quantity: Affine, goal, k_max: int) -> np.ndarray:
        """The observations (K,), at most ``k_max``, whose removal alone moves the goal's
        metric toward its target, largest first (:meth:`first_order`)."""
        return top_positive(goal.direction * self.first_order(quantity, goal), k_max)


def laplace_hierarchy(model: HierarchyModel, theta: np.ndarray) -> LaplaceHierarchy | None:
    """``model`` with removals at their Laplace approximation (:class:`LaplaceHierarchy`),
    its prior estimated from the posterior's draws of ``psi`` (whitened) and the
    integrated likelihood's gradient there; ``theta`` (S, P): the quantities ``model``
    was recovered from. None where the draws of ``psi`` do not vary in every direction."""
    phi = model.phi
    psi = np.column_stack([phi[:, 0], np.log(phi[:, 1]), np.log(phi[:, 2]), phi[:, 3:]])
    whitened = _whitened(psi)
    if whitened is None or whitened[1].shape[1] != psi.shape[1]:
        return None
    centre, root, u = whitened
    columns = model.basis.argmax(axis=0)  # mu, tau, sigma, the slopes
    mean = np.zeros(theta.shape[1])
    basis = np.zeros((theta.shape[1], psi.shape[1]))
    mean[columns], basis[columns] = centre, root
    gradient = _log_lik_gradient(_kept(model, []), psi) @ root  # in u
    precision, batches = _prior_precision(u, gradient)
    found = LaplaceHierarchy(mean, basis, model, centre, root, u, precision, np.zeros(0), batches)
    return found._replace(pull=-gradient.mean(axis=0), samples={})


def _kept(model: HierarchyModel, dropped) -> GroupStats:
    """The :class:`~bayesij.array.amip_hierarchy.GroupStats` of the observations not in
    ``dropped``."""
    keep = np.ones(model.y.size, dtype=bool)
    keep[np.asarray(dropped, dtype=int)] = False
    return kept_stats(model, keep)


def _psi(model: LaplaceHierarchy, u: np.ndarray) -> np.ndarray:
    """``psi`` (M, R) at ``u`` (M, R)."""
    return model.centre + u @ model.root.T


def _phi(psi: np.ndarray) -> np.ndarray:
    """``(mu, tau, sigma, beta)`` (M, R) from ``psi`` (M, R)."""
    return np.column_stack([psi[:, 0], np.exp(psi[:, 1]), np.exp(psi[:, 2]), psi[:, 3:]])


def _log_lik(stats: GroupStats, psi: np.ndarray) -> np.ndarray:
    """The kept observations' log-likelihood (M,), the group effects integrated out, at
    ``psi`` (M, R)."""
    phi = _phi(psi)
    return _log_marginal(residual_sums(stats, phi[:, 3:]), phi).sum(axis=1)


def _log_lik_gradient(stats: GroupStats, psi: np.ndarray) -> np.ndarray:
    """The gradient (M, R) of :func:`_log_lik` in ``psi``: with ``d = rbar - mu``,
    ``J = sigma^2 + n tau^2`` and ``W`` the residuals' sum of squares about their mean,
    each group adds ``n d / J`` to ``mu``'s, ``n tau^2 (n d^2 / J - 1) / J`` to
    ``log tau``'s, ``W / sigma^2 - (n - 1) - sigma^2 (1 - n d^2 / J) / J`` to
    ``log sigma``'s and ``(sum r x - n rbar xbar) / sigma^2 + n d xbar / J`` to the
    slopes'."""
    phi = _phi(psi)
    count, total, squares = residual_sums(stats, phi[:, 3:])
    n = count[None, :]
    mu, tau2, sigma2 = phi[:, :1], phi[:, 1:2] ** 2, phi[:, 2:3] ** 2
    joint = sigma2 + n * tau2
    present = n > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rbar = np.where(present, total / np.maximum(n, 1), 0.0)
        within = np.maximum(squares - n * rbar**2, 0.0)
        d = np.where(present, rbar - mu, 0.0)
        toward_mu = n * d / joint
        out = np.empty(psi.shape)
        out[:, 0] = toward_mu.sum(axis=1)
        out[:, 1] = (n * tau2 * (n * d**2 / joint - 1) / joint).sum(axis=1)
        grow = within / sigma2 - np.maximum(n - 1, 0) - sigma2 * (1 - n * d**2 / joint) / joint
        out[:, 2] = np.where(present, grow, 0.0).sum(axis=1)
    if stats.sx.shape[1]:
        xbar = stats.sx / np.maximum(count, 1)[:, None]  # (G, B)
        rx = stats.sxy[None] - np.einsum("gij,mj->mgi", stats.sxx, phi[:, 3:])  # sum r x
        spread = (rx - (n * rbar)[:, :, None] * xbar[None]) / sigma2[:, :, None]
        out[:, 3:] = (spread + toward_mu[:, :, None] * xbar[None]).sum(axis=1)
    return out


def _log_posterior(model: LaplaceHierarchy, keep: GroupStats, u: np.ndarray) -> np.ndarray:
    """The log posterior (M,; up to a constant) of the kept observations at ``u`` (M, R),
    the prior at its estimate."""
    prior = u @ model.pull - 0.5 * np.einsum("mi,mi->m", u @ model.precision, u)
    return prior + _log_lik(keep, _psi(model, u))


def _gradient(model: LaplaceHierarchy, keep: GroupStats, u: np.ndarray) -> np.ndarray:
    """The log posterior's gradient (R,) at ``u`` (R,)."""
    lik = _log_lik_gradient(keep, _psi(model, u[None, :]))[0] @ model.root
    return model.pull - model.precision @ u + lik


def _laplace(model: LaplaceHierarchy, keep: GroupStats) -> tuple | None:
    """The mode (R,) of the kept observations' posterior and the inverse of its negative
    Hessian there (R, R) (:func:`~bayesij.array.newton.laplace_mode` from the draws'
    mean, each Hessian by central differences of the analytic gradient); None where it
    finds none.

    A set that moves ``sigma`` or ``tau`` by many posterior sds (a t(4) outlier 14 where
    the others lie within 7) leaves the log posterior not concave at the draws' mean;
    where the estimated prior is negative along ``log tau`` (Stein's estimate of a flat
    prior, Monte Carlo error), not concave on the way
    (``tests/array/test_amip_hierarchy_laplace.py``)."""
    return laplace_mode(
        lambda u: _log_posterior(model, keep, u[None, :])[0],
        lambda u: (_gradient(model, keep, u), _hessian(model, keep, u)),
        np.zeros(model.root.shape[0]),
    )


def _hessian(model: LaplaceHierarchy, keep: GroupStats, u: np.ndarray) -> np.ndarray:
    """The log posterior's Hessian (R, R) at ``u``, by central differences of
    :func:`_gradient` (symmetrised)."""
    r = u.size
    out = np.empty((r, r))
    for i in range(r):
        step = np.zeros(r)
        step[i] = HESSIAN_STEP
        out[i] = (_gradient(model, keep, u + step) - _gradient(model, keep, u - step)) / (
            2 * HESSIAN_STEP
        )
    return 0.5 * (out + out.T)
