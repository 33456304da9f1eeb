"""bayesij: audit Bayesian fits from the MCMC draws you already have.

Influence scores, infinitesimal-jackknife bootstrap variances and (in later modules)
approximate cross-validation, computed from posterior draws and the pointwise
log-likelihood, without refitting.

Importing ``bayesij`` is cheap: the public names below load their modules on first use.
"""

from importlib import import_module

__version__ = "0.1.0"

_PUBLIC = {
    "Posterior": "bayesij.posterior",
    "from_arrays": "bayesij.adapters.arrays",
    "from_inference_data": "bayesij.adapters.inference_data",
    "from_cmdstanpy": "bayesij.adapters.cmdstan",
    "from_pystan": "bayesij.adapters.pystan",
    "influence": "bayesij.sensitivity",
    "ij_covariance": "bayesij.sensitivity",
    "IJCovariance": "bayesij.sensitivity",
    "waic": "bayesij.information",
    "WaicResult": "bayesij.information",
    "dic": "bayesij.information",
    "DicResult": "bayesij.information",
    "loo": "bayesij.crossval",
    "LooResult": "bayesij.crossval",
    "loo_expectation": "bayesij.crossval",
    "loo_pit": "bayesij.crossval",
    "compare": "bayesij.crossval",
    "linearity": "bayesij.nonlinearity",
    "LinearityResult": "bayesij.nonlinearity",
    "amip": "bayesij.influential",
    "AmipResult": "bayesij.influential",
    "audit": "bayesij.model_audit",
    "Audit": "bayesij.model_audit",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayesij' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
