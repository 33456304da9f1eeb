"""bayesij: audit Bayesian fits from the MCMC draws you already have.

Influence scores, infinitesimal-jackknife bootstrap variances, approximate cross-validation,
WAIC, DIC and influential subsets, computed from posterior draws and the pointwise
log-likelihood without refitting, and checked against exact refits (``bayesij.refit``).
The layers and where each estimator lives: ``docs/architecture.md``.

Importing ``bayesij`` is cheap: the public names below load their modules on first use.
"""

from importlib import import_module

__version__ = "0.1.0"

_PUBLIC = {
    # data: the one door (a fit read once) and the container
    "read": "bayesij.data.fit",
    "Fit": "bayesij.data.fit",
    "Posterior": "bayesij.data.posterior",
    "as_posterior": "bayesij.data.convert",
    "from_arrays": "bayesij.data.arrays",
    "from_inference_data": "bayesij.data.inference_data",
    # adapters: Stan fits and files
    "from_cmdstanpy": "bayesij.adapters.cmdstan",
    "from_pystan": "bayesij.adapters.pystan",
    "from_csv": "bayesij.adapters.r_csv",
    # stats: labelled estimators, one module each
    "influence": "bayesij.stats.influence",
    "ij_covariance": "bayesij.stats.jackknife",
    "IJCovariance": "bayesij.stats.jackknife",
    "linearity": "bayesij.stats.linearity",
    "LinearityResult": "bayesij.stats.linearity",
    "loo": "bayesij.stats.loo",
    "LooResult": "bayesij.stats.loo",
    "PsisOptions": "bayesij.stats.peers",
    "loo_expectation": "bayesij.stats.loo",
    "loo_influence": "bayesij.stats.loo_influence",
    "loo_integrated": "bayesij.stats.integrated",
    "GlmDensity": "bayesij.stats.integrated",
    "GlmSlope": "bayesij.stats.integrated",
    "LooShift": "bayesij.stats.loo_influence",
    "loo_pit": "bayesij.stats.loo",
    "loo_i": "bayesij.stats.loo",
    "loo_nonfactorized": "bayesij.stats.nonfactorized",
    "loo_weighted": "bayesij.stats.weighted_loo",
    "loo_approximate_posterior": "bayesij.stats.approximate_loo",
    "loo_mixture": "bayesij.stats.approximate_loo",
    "WeightedLooResult": "bayesij.stats.weighted_loo",
    "compare": "bayesij.stats.compare",
    "model_weights": "bayesij.stats.compare",
    "hierarchical_stacking": "bayesij.stats.hierarchical_stacking",
    "weight_predictions": "bayesij.stats.compare",
    "score_weights": "bayesij.stats.score_stacking",
    "pit_ecdf": "bayesij.stats.pit",
    "pit_density": "bayesij.stats.pit",
    "uniformity_test": "bayesij.stats.pit",
    "mchain_uniformity_test": "bayesij.stats.pit",
    "calibration": "bayesij.stats.calibration",
    "loo_calibration": "bayesij.stats.calibration",
    "psense": "bayesij.stats.power_scaling",
    "psense_sequence": "bayesij.stats.power_scaling",
    "power_scaled_draws": "bayesij.stats.power_scaling",
    "pareto_khat": "bayesij.stats.pareto",
    "pareto_smooth": "bayesij.stats.pareto",
    "bayesian_r2": "bayesij.stats.r2",
    "residual_r2": "bayesij.stats.r2",
    "loo_r2": "bayesij.stats.r2",
    "loo_subsample": "bayesij.stats.subsample",
    "LooSubsample": "bayesij.stats.subsample",
    "update_subsample": "bayesij.stats.subsample",
    "loglik_function": "bayesij.data.lazy",
    "LogLikFunction": "bayesij.data.lazy",
    "loo_moment_match": "bayesij.stats.moment_match",
    "loo_score": "bayesij.stats.scores",
    "loo_metrics": "bayesij.stats.scores",
    "LooScore": "bayesij.stats.scores",
    "waic": "bayesij.stats.waic",
    "WaicResult": "bayesij.stats.waic",
    "generating_function": "bayesij.stats.waic",
    "dic": "bayesij.stats.dic",
    "DicResult": "bayesij.stats.dic",
    "holdout": "bayesij.stats.holdout",
    "HoldoutResult": "bayesij.stats.holdout",
    "prediction_errors": "bayesij.stats.holdout",
    "PredictionErrors": "bayesij.stats.holdout",
    "lfo": "bayesij.refit.lfo",
    "LfoResult": "bayesij.stats.lfo",
    "convergence": "bayesij.stats.convergence",
    "Convergence": "bayesij.stats.convergence",
    "amip": "bayesij.refit.amip",
    "AmipResult": "bayesij.stats.amip",
    # report
    "audit": "bayesij.report.audit",
    "Audit": "bayesij.report.audit",
    "AuditSettings": "bayesij.report.audit",
}

#: The conventions of every public estimator (``tests/test_conventions.py`` enforces them on
#: every name of ``_PUBLIC`` whose first parameter is ``data``): ``data`` first, then the
#: estimator's own required inputs, positional, in the order of ``POSITIONAL`` (siblings
#: share one: observed values before predictive draws); every other parameter keyword-only,
#: the common selectors first, in this order.
COMMON_KEYWORDS = ("groups", "quantities", "var_name")
POSITIONAL = {
    "amip": ("quantity", "target"),
    "bayesian_r2": ("pred_mean", "scale"),
    "residual_r2": ("pred_mean", "y"),
    "dic": ("log_lik_at_point",),
    "generating_function": ("alpha",),
    "lfo": ("backend",),
    "loo_approximate_posterior": ("log_p", "log_g"),
    "loo_expectation": ("values",),
    "loo_i": ("unit",),
    "loo_integrated": ("density",),
    "loo_metrics": ("y", "y_pred"),
    "loo_calibration": ("y", "y_pred"),
    "loo_moment_match": ("model",),
    "loo_pit": ("y", "y_pred"),
    "loo_r2": ("y", "y_pred"),
    "loo_score": ("y", "y_pred"),
    "loo_subsample": ("observations",),
    "loo_weighted": ("weights",),
}

#: Subpackages reachable as attributes (``bayesij.refit.bootstrap(...)``), loaded on first use.
_SUBPACKAGES = {
    name: f"bayesij.{name}"
    for name in ("array", "data", "adapters", "stats", "refit", "report", "stan_models")
}
_SUBPACKAGES["plots"] = "bayesij.report.plots"

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return import_module(_SUBPACKAGES[name])
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayesij' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBPACKAGES))
