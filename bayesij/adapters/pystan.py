"""Build a posterior container from a PyStan 3 fit."""

from __future__ import annotations

import math

import numpy as np

from bayesij.adapters._stan_names import split_columns
from bayesij.array.checks import fail
from bayesij.data.arrays import element_names, from_arrays
from bayesij.data.posterior import Posterior

__all__ = ["from_pystan"]


def _variable_draws(fit, name: str, n_warmup: int) -> tuple[np.ndarray, list[str]]:
    """Draws of one variable as (chain, draw, elements) and its element names.

    ``fit[name]`` has shape (*dims, n_draws * n_chains) with the chain varying fastest.
    """
    values = np.asarray(fit[name], dtype=float)
    dims = tuple(fit.dims[fit.param_names.index(name)])
    flat = values.reshape(-1, values.shape[-1] // fit.num_chains, fit.num_chains)
    flat = flat[:, n_warmup:, :]
    return np.transpose(flat, (2, 1, 0)), element_names(name, dims)


def from_pystan(fit, log_lik="log_lik", quantities=None) -> Posterior:
    """A posterior container from a PyStan 3 fit (``stan.fit.Fit``).

    Parameters
    ----------
    fit : stan.fit.Fit
        The result of ``model.sample(...)``.
    log_lik : str, default "log_lik"
        Generated quantity holding the pointwise log-likelihood.
    quantities : str or list of str, optional
        Variables (``'beta'``) or elements (``'beta[1]'``). Default: every parameter,
        transformed parameter and generated quantity except ``log_lik``.

    Returns
    -------
    Posterior
        Element names are Stan-style and 1-based (``'Omega[1,2]'``); observation ids are
        Stan's 1-based indices of ``log_lik``. Saved warmup draws are left out.

    Examples
    --------
    Compiling a Stan program takes a minute the first time (PyStan caches it), so the test
    suite runs this example with the Stan tests, outside the fast loop:

    >>> import stan, bayesij
    >>> from bayesij.stan_models import example_data, stan_code
    >>> data = example_data("linear_regression", n=20)
    >>> program = stan_code("linear_regression")  # a Stan program emitting log_lik
    >>> model = stan.build(program, data=data, random_seed=1)  # doctest: +ELLIPSIS
    Building...
    >>> fit = model.sample(num_chains=2, num_samples=200, num_warmup=200)
    >>> post = bayesij.from_pystan(fit, quantities=["beta"])
    >>> post.quantity_names, post.n_obs
    (['beta[1]', 'beta[2]'], 20)
    """
    if not hasattr(fit, "param_names") or not hasattr(fit, "num_chains"):
        raise fail("fit", f"a {type(fit).__name__}", "a PyStan 3 fit (stan.fit.Fit)")
    n_warmup = math.ceil(fit.num_warmup * fit.save_warmup / fit.num_thin)
    blocks, columns = [], []
    for name in fit.param_names:
        values, names = _variable_draws(fit, name, n_warmup)
        blocks.append(values)
        columns.extend(names)
    draws = np.concatenate(blocks, axis=2)
    values, names, ll_values, obs = split_columns(draws, columns, log_lik, quantities)
    return from_arrays(values, ll_values, quantity_names=names, obs_names=obs)
