"""Weighted Stan models shipped with bayesij (installed as ``bayesij.stan_models``).

Every model takes a ``weights`` data vector that multiplies each observation's
log-likelihood (all ones reproduces the ordinary fit, 0 deletes, counts bootstrap) and emits
the unweighted pointwise log-likelihood as ``vector[N] log_lik`` in generated quantities.
The exception is ``poisson_hmm``, whose likelihood does not split into terms: its weights
multiply the emission densities inside the forward algorithm, ``log_lik`` holds the one-step
predictive terms and ``weight_derivative`` the derivatives in the weights (see its header
and :mod:`bayesij.stan_models.hmm`).
"""

from importlib import resources

from bayesij.stan_models.examples import example_data

__all__ = ["stan_code", "available", "example_data"]


def available() -> list[str]:
    """Names of the shipped models."""
    return sorted(
        p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".stan")
    )


def stan_code(name: str) -> str:
    """The Stan program of the shipped model ``name`` (e.g. ``'linear_regression'``)."""
    if name not in available():
        raise ValueError(f"model: found {name!r}; expected one of {available()}.")
    return resources.files(__name__).joinpath(f"{name}.stan").read_text()
