"""Deviance information criteria DIC1 and DIC2, labelled."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesij.array.checks import as_float_array, fail
from bayesij.array.dic import dic_terms
from bayesij.data.fit import read
from bayesij.stats.elpd import Summary

__all__ = ["dic", "DicResult"]


@dataclass(frozen=True)
class DicResult(Summary):
    """DIC1 (Spiegelhalter p_D) and DIC2 (Gelman p_V) on two scales.

    Deviance scale (``D = -2 log p(y | theta)``, lower is better):
    ``dic1 = E[D] + p_d`` and ``dic2 = E[D] + p_v``. Watanabe's per-observation loss scale:
    ``dic1_loss = BtL + p_d / N`` and ``dic2_loss = BtL + p_v / N``, comparable with
    ``WaicResult.waic_loss`` and ``cv_loss``.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> bayesij.dic(post, -0.5 * (y - mu.mean()) ** 2).table().index.tolist()
    ['DIC1 (Spiegelhalter p_D)', 'DIC2 (Gelman p_V)']
    """

    p_d: float
    p_v: float
    mean_deviance: float
    deviance_at_point: float
    btl: float
    n_obs: int
    point: pd.Series | None

    @property
    def dic1(self) -> float:
        return self.mean_deviance + self.p_d

    @property
    def dic2(self) -> float:
        return self.mean_deviance + self.p_v

    @property
    def dic1_loss(self) -> float:
        return self.btl + self.p_d / self.n_obs

    @property
    def dic2_loss(self) -> float:
        return self.btl + self.p_v / self.n_obs

    def table(self) -> pd.DataFrame:
        """Both DICs on both scales, labelled."""
        return pd.DataFrame(
            {
                "p_eff": [self.p_d, self.p_v],
                "deviance_scale": [self.dic1, self.dic2],
                "loss_scale": [self.dic1_loss, self.dic2_loss],
            },
            index=pd.Index(["DIC1 (Spiegelhalter p_D)", "DIC2 (Gelman p_V)"], name="criterion"),
        )

    def __str__(self) -> str:
        lines = [
            f"DIC over {self.n_obs} observations (deviance scale: -2 log p(y | theta); "
            "loss scale: per observation, as Watanabe 2010)",
            self.table().to_string(float_format=lambda v: f"{v:.4g}"),
        ]
        if not np.isfinite(self.p_d):
            lines.append("DIC1 needs log_lik_at_point (the log-likelihood at a point estimate).")
        return "\n".join(lines)


def dic(data, log_lik_at_point=None, *, var_name=None, point: str = "mean") -> DicResult:
    """Deviance information criteria DIC1 and DIC2.

    Parameters
    ----------
    data : Posterior, InferenceData or DataTree
        Draws of the quantities (for the plug-in point) and the pointwise log-likelihood.
    log_lik_at_point : array_like of shape (n_obs,) or callable, optional
        ``log p(x_n | theta_hat)`` at the plug-in point, or a function that receives the
        point estimate of the quantities (a pandas Series indexed by quantity name) and
        returns it. Without it only DIC2 is available.
    point : {"mean", "median"}, default "mean"
        The plug-in point: posterior mean or median of each quantity.
    var_name : str or list of str, optional
        Log-likelihood variable of an InferenceData or DataTree.

    Returns
    -------
    DicResult

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(1.0, 1.0, size=40)
    >>> mu = rng.normal(y.mean(), 1 / np.sqrt(40), size=(4, 500, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    >>> result = bayesij.dic(post, -0.5 * (y - mu.mean()) ** 2)  # log-likelihood at the mean
    >>> p_d = result.table()["p_eff"].iloc[0]  # one parameter
    >>> bool(0.8 < p_d < 1.2)
    True

    References
    ----------
    .. [1] Spiegelhalter, D. J., Best, N. G., Carlin, B. P. and van der Linde, A. (2002).
       Bayesian measures of model complexity and fit. JRSS B 64(4), 583-639.
    .. [2] Gelman, A., Carlin, J. B., Stern, H. S. and Rubin, D. B. (2004). Bayesian Data
       Analysis, 2nd ed.
    .. [3] Watanabe, S. (2010). JMLR 11, 3571-3594, section 6.
    """
    post = read(data, var_name=var_name).in_memory("dic", need_quantities=True)
    if point not in ("mean", "median"):
        raise fail("point", repr(point), "'mean' or 'median'")
    reduce = np.mean if point == "mean" else np.median
    estimate = pd.Series(
        reduce(post.quantities.values, axis=(0, 1)), index=post.quantity_names, name=point
    )
    values = log_lik_at_point(estimate) if callable(log_lik_at_point) else log_lik_at_point
    if values is not None:
        values = as_float_array(values, "log_lik_at_point")
    matrix = post.log_lik.values.reshape(post.n_draws, post.n_obs)
    terms = dic_terms(matrix, values, check=False)
    return DicResult(
        p_d=terms.p_d,
        p_v=terms.p_v,
        mean_deviance=terms.mean_deviance,
        deviance_at_point=terms.deviance_at_point,
        btl=terms.btl,
        n_obs=post.n_obs,
        point=estimate if values is not None else None,
    )
