"""The bootstrap that resamples clusters: a group drawn ``k`` times enters the refit as
``k`` new groups, each with its own local parameters.

:func:`bayesij.refit.bootstrap` with ``groups=`` reweights: a group drawn ``k`` times
counts ``k`` times with its one effect, "the same group with ``k`` times its data". For a
hierarchy's global parameters that is not the sampling variability of drawing groups from
their population (Davison & Hinkley 1997, section 3.8; Field & Welsh 2007): the effect of
a group drawn twice is estimated as if it were known twice as well. Here the model is
refitted to the resampled data, rebuilt by a factory the user gives.

References
----------
.. [1] Davison, A. C. and Hinkley, D. V. (1997). Bootstrap Methods and their Application,
   section 3.8. Cambridge University Press.
.. [2] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. JRSS B 69(3),
   369-390.
.. [3] Giordano, R. and Broderick, T. (2023). The Bayesian infinitesimal jackknife for
   variance. arXiv:2305.06466.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from bayesij.array.checks import check_replicates, check_seed, fail
from bayesij.data.fit import read
from bayesij.refit.backends import (
    Backend,
    _callable_digest,
    _callable_name,
    returned_posterior,
)
from bayesij.refit.campaign import run_campaign
from bayesij.refit.experiments import bootstrap_report, bootstrap_tasks
from bayesij.refit.report import RefitReport
from bayesij.stats.jackknife import ij_covariance, integrated_ij

__all__ = ["cluster_bootstrap", "ClusterResampling"]


def _cluster_codes(labels) -> np.ndarray:
    """Each observation's cluster as codes 0 to K - 1, in the order of the sorted labels:
    any labels (integers with gaps or below 0, strings), one per observation; a
    non-integral number or a missing value is refused (it would be truncated or dropped)."""
    values = np.asarray(labels)
    if values.ndim != 1 or values.size == 0:
        raise fail("codes", f"shape {values.shape}", "one cluster label per observation (1-D)")
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
            raise fail(
                "codes",
                "labels that are not whole numbers (or missing)",
                "integer or string cluster labels",
            )
    elif values.dtype.kind not in "iuUSO":
        raise fail("codes", f"labels of dtype {values.dtype}", "integer or string cluster labels")
    try:
        return np.unique(values, return_inverse=True)[1].reshape(-1).astype(int)
    except TypeError:  # mixed objects that do not sort
        raise fail("codes", "labels of mixed types", "integer or string cluster labels") from None


class ClusterResampling(Backend):
    """A refit backend that turns cluster counts into resampled data for a model factory.

    ``fit(weights)`` reads the count of each cluster from its observations' weights (all
    equal within a cluster), lays out every drawn copy of a cluster as a new cluster
    (codes 0, 1, ... in the order of the clusters, copies together) and returns
    ``model(rows, groups)``: ``rows`` the observations' positions in the original data
    (repeated for clusters drawn more than once), ``groups`` their new cluster codes.

    Parameters
    ----------
    model : callable
        ``model(rows, groups) -> Posterior or InferenceData``: the model fitted to the data
        at ``rows`` with the clusters ``groups`` (a PyMC model rebuilt with those data and
        sampled; a Stan program's data dict rebuilt and sampled).
    codes : array_like of int, shape (n_obs,)
        The cluster of each original observation.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesij import refit
    >>> resampling = refit.ClusterResampling(lambda rows, groups: None, [0, 0, 1, 2])
    >>> rows, groups = resampling.resampled([2.0, 2.0, 0.0, 1.0])  # cluster 0 drawn twice
    >>> rows.tolist(), groups.tolist()  # two new clusters from it, each its own code
    ([0, 1, 0, 1, 3], [0, 0, 1, 1, 2])
    """

    def __init__(self, model: Callable, codes):
        if not callable(model):
            raise fail("model", f"a {type(model).__name__}", "a callable model(rows, groups)")
        self.model, self.codes = model, _cluster_codes(codes)
        self.n_obs = self.codes.size
        self.members = [np.flatnonzero(self.codes == g) for g in range(self.codes.max() + 1)]

    def resampled(self, weights) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, groups)`` of the data the cluster counts in ``weights`` describe."""
        w = self.checked_weights(weights)
        rows, groups = [], []
        for members in self.members:
            count = w[members[0]]
            if count != round(count) or np.any(w[members] != count):
                raise fail(
                    "weights",
                    f"{w[members][:3].tolist()} in one cluster",
                    "one whole count per cluster (a bootstrap draw)",
                )
            for _ in range(int(count)):
                rows.append(members)
                groups.append(np.full(members.size, len(groups)))
        return np.concatenate(rows), np.concatenate(groups)

    def fit(self, weights):
        rows, groups = self.resampled(weights)
        return returned_posterior(self.model(rows, groups), "model")

    def __repr__(self) -> str:
        clusters = hashlib.sha256(self.codes.tobytes()).hexdigest()[:12]
        return (
            f"ClusterResampling({_callable_name(self.model)}, "
            f"digest={_callable_digest(self.model)}, clusters={clusters})"
        )


def cluster_bootstrap(
    post,
    model: Callable,
    B: int,
    seed: int = 0,
    store=None,
    executor=None,
    *,
    groups,
    quantities=None,
    marginal_log_lik=None,
    progress: bool = True,
    retry_failed: bool = False,
    timeout: float | None = None,
) -> RefitReport:
    """Exact bootstrap of posterior means that resamples clusters as new clusters.

    ``B`` refits of ``model`` to data whose clusters are drawn with replacement: a cluster
    drawn ``k`` times enters as ``k`` clusters with their own local parameters (their own
    intercepts), as drawing new clusters from their population would. The bootstrap
    variance of each posterior mean (less the refits' Monte Carlo noise) is compared with
    the posterior variance and with the IJ over the clusters, which approximates the
    *weight* bootstrap (:func:`bayesij.refit.bootstrap` with ``groups=``: a cluster drawn
    ``k`` times counts ``k`` times with one effect) unless the clusters' log-likelihoods
    integrate their effects out (``marginal_log_lik``).

    Parameters
    ----------
    post : Posterior, InferenceData or DataTree
        The fit (anything :func:`bayesij.read` accepts).
    model : callable
        ``model(rows, groups) -> Posterior or InferenceData``: the model fitted to the
        observations at positions ``rows`` (repeats allowed) with cluster codes ``groups``
        (0 to K - 1), reporting the quantities of ``post`` (see :class:`ClusterResampling`).
    B : int
        Number of bootstrap refits.
    seed : int, default 0
    store, executor, progress, retry_failed, timeout
        As :func:`bayesij.refit.run_campaign` (a store makes the campaign resumable).
    groups : array_like, mapping or str
        The clusters: labels, one per observation, or the name of the fit's grouping.
    quantities : str or list of str, optional
        The global quantities to compare (a cluster's own effect has no counterpart in a
        refit of resampled clusters).
    marginal_log_lik : array_like of shape (n_chains, n_draws, n_clusters), optional
        Each cluster's log-likelihood with its effect integrated out, at the draws of
        ``post``, columns in the order the clusters first appear among the observations
        (:func:`bayesij.array.hierarchy.normal_group_log_lik` for a normal hierarchy,
        :func:`~bayesij.array.hierarchy.intercept_group_log_lik` by adaptive quadrature
        for any likelihood with a normal random intercept): the IJ over these, row
        ``'ij (marginal)'``, approximates this bootstrap.

    Returns
    -------
    RefitReport
        Rows per quantity for ``'posterior'``, ``'ij (weights)'`` and with
        ``marginal_log_lik`` ``'ij (marginal)'``: each approximation's variance against
        the cluster bootstrap's (``exact``) and its standard error over the replicates.

    Examples
    --------
    A normal mean observed in 12 clusters with a shared shift each; the model factory
    refits it in closed form (flat prior, known sds: ``mu`` is the precision-weighted mean
    of the cluster means):

    >>> import numpy as np, bayesij
    >>> from bayesij import refit
    >>> rng = np.random.default_rng(0)
    >>> codes = np.repeat(np.arange(12), 5)
    >>> y = rng.normal(size=12)[codes] + rng.normal(size=60)
    >>> def fit_mu(rows, groups):
    ...     means = np.bincount(groups, y[rows]) / np.bincount(groups)
    ...     mu = means.mean() + rng.normal(size=(2, 500, 1)) * np.sqrt(1.2 / means.size)
    ...     return bayesij.from_arrays(mu, -0.5 * (y[rows] - mu) ** 2, quantity_names=["mu"])
    >>> post = fit_mu(np.arange(60), codes)
    >>> report = refit.cluster_bootstrap(
    ...     post, fit_mu, B=50, groups=codes, executor="sequential", progress=False
    ... )
    >>> sorted(report.comparisons["method"].unique())
    ['ij (weights)', 'posterior']
    """
    fit = read(post, groups=groups, argument="post")
    container = fit.posterior()
    B, seed = check_replicates(B, "B", minimum=2), check_seed(seed)
    labels = fit.units.labels if fit.units.labels is not None else groups
    codes, units = container.unit_codes(labels)
    if quantities is not None:
        container = container.select(quantities)
    if units.size < 2:
        raise fail("groups", f"{units.size} cluster", "at least 2 clusters to resample")
    # What needs no refit is computed (and its inputs checked) before the B refits run.
    rows = {"posterior": None, "ij (weights)": ij_covariance(container, groups=labels)}
    if marginal_log_lik is not None:
        rows["ij (marginal)"] = _marginal_ij(container, marginal_log_lik, units.size)
    records = run_campaign(
        bootstrap_tasks("cluster", codes, units.size, B, seed),
        ClusterResampling(model, codes),
        reference=container,
        experiment="cluster_bootstrap",
        settings={"B": B, "seed": seed, "clusters": int(units.size)},
        store=store,
        executor=executor,
        progress=progress,
        retry_failed=retry_failed,
        timeout=timeout,
    )
    summary = {"clusters": int(units.size)}
    return bootstrap_report("cluster_bootstrap", records, container, rows, B, summary)


def _marginal_ij(container, marginal_log_lik, n_clusters: int):
    """The IJ over clusters whose log-likelihoods integrate their effects out."""
    return integrated_ij(
        container.quantities.values, container.quantity_names, marginal_log_lik, n_clusters
    )
