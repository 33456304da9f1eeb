"""Exact checks: refit the model under observation weights and compare with the
approximations computed from the original draws.

Backends (:mod:`bayesij.refit.backends`) refit; experiments (:func:`bootstrap`, :func:`loo`,
:func:`kfold`, :func:`drop`, :func:`verify`, :func:`cluster_bootstrap`) plan refits as
resumable campaigns (a directory ``store``), run them sequentially, on local processes or
on Dask, and return a :class:`RefitReport` (:func:`verify`: the AMIP result with its refit
recorded).
"""

from bayesij.refit.backends import (
    Backend,
    CallableBackend,
    CmdStanPyBackend,
    ConjugateNormalBackend,
    FlatPriorRegressionBackend,
    OnceEach,
    PyStanBackend,
    RefitFailed,
)
from bayesij.refit.campaign import Task, run_campaign
from bayesij.refit.cluster import ClusterResampling, cluster_bootstrap
from bayesij.refit.experiments import bootstrap, drop, kfold, loo, lwcv
from bayesij.refit.pymc import PyMCBackend, PyMCDensity
from bayesij.refit.report import RefitReport
from bayesij.refit.scheduler import loo_priorities
from bayesij.refit.splits import (
    kfold_split_contiguous,
    kfold_split_grouped,
    kfold_split_random,
    kfold_split_stratified,
    lwcv_split,
)
from bayesij.refit.stan import stan_inits
from bayesij.refit.stan_density import PyStanDensity
from bayesij.refit.store import CampaignStore
from bayesij.refit.verify import verify

__all__ = [
    "Backend",
    "CallableBackend",
    "CmdStanPyBackend",
    "OnceEach",
    "ConjugateNormalBackend",
    "FlatPriorRegressionBackend",
    "PyStanBackend",
    "PyStanDensity",
    "stan_inits",
    "PyMCBackend",
    "PyMCDensity",
    "RefitFailed",
    "Task",
    "run_campaign",
    "bootstrap",
    "cluster_bootstrap",
    "ClusterResampling",
    "drop",
    "kfold",
    "loo",
    "lwcv",
    "lwcv_split",
    "RefitReport",
    "loo_priorities",
    "kfold_split_grouped",
    "kfold_split_contiguous",
    "kfold_split_random",
    "kfold_split_stratified",
    "CampaignStore",
    "verify",
]
