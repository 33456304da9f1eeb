"""Weighted Stan models shipped with bayesij (installed as ``bayesij.stan_models``).

Every model takes a ``weights`` data vector that multiplies each observation's
log-likelihood (all ones reproduces the ordinary fit, 0 deletes, counts bootstrap) and emits
the unweighted pointwise log-likelihood as ``vector[N] log_lik`` in generated quantities.
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
