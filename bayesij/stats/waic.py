"""WAIC with Watanabe's functional cumulants (and tempered posteriors), labelled."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from typing import ClassVar

import numpy as np
import pandas as pd

from bayesij.array import waic as info
from bayesij.array.checks import check_ddof, check_real
from bayesij.array.numeric import elpd_standard_error
from bayesij.data.fit import as_log_lik_source
from bayesij.data.source import map_blocks, unit_members
from bayesij.stats.elpd import ElpdResult

__all__ = ["waic", "WaicResult", "generating_function"]

#: R loo's threshold on the pointwise variance of the log-likelihood.
P_WAIC_WARNING = 0.4
#: Warn when |N x predicted CV - WAIC gap| exceeds this fraction of the SE of elpd_waic.
GAP_WARNING = 0.25


@dataclass(frozen=True)
class WaicResult(ElpdResult):
    """WAIC on the elpd scale (as ArviZ and R loo report it) and on Watanabe's loss scale.

    Attributes
    ----------
    elpd_waic, p_waic, se, waic : float
        ``elpd_waic = sum_n lppd_n - beta p_waic_n``, ``p_waic = sum_n Var(l_n)``, the
        standard error ``sqrt(N) sd_n(elpd_waic_n)``, and ``waic = -2 elpd_waic``.
    pointwise : pandas.DataFrame
        Columns ``elpd_waic`` and ``p_waic``, one row per unit.
    btl, gtl : float
        Bayes and Gibbs training losses, per observation.
    functional_variance : float
        ``V = sum_n Var(l_n)`` (equal to ``p_waic``).
    waic_loss : float
        ``btl + beta V / N`` (equal to ``-elpd_waic / N``).
    cumulants : pandas.Series
        Functional cumulants Y1..Y4.
    cv_loss : float
        Importance-sampling cross-validation loss ``F(-beta) - F(1 - beta)``.
    predicted_cv_gap : float
        Predicted ``cv_loss - waic_loss``: ``Y4/12`` at beta = 1, ``(beta - beta^2)/2 Y3``
        otherwise.
    beta : float
        Inverse temperature of the posterior the draws come from.
    ddof : int
        Divisor convention of the variances (0: ArviZ and Watanabe; 1: R loo).
    grouping : str, optional
        Set when these are per-observation values of a fit whose structure names a
        grouping (as ``az.waic``): the grouping and how to ask for it (``groups=``).

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> log_lik = np.random.default_rng(0).normal(-1.0, 0.1, size=(4, 500, 20))
    >>> list(bayesij.waic(log_lik).estimates().index)
    ['elpd_waic', 'p_waic', 'waic']
    """

    elpd_waic: float
    p_waic: float
    se: float
    pointwise: pd.DataFrame
    btl: float
    gtl: float
    cumulants: pd.Series
    cv_loss: float
    predicted_cv_gap: float
    beta: float
    ddof: int
    n_draws: int
    grouping: str | None = field(default=None, repr=False, compare=False)
    members: pd.Series | None = field(default=None, repr=False, compare=False)

    criterion: ClassVar[str] = "waic"
    elpd_column: ClassVar[str] = "elpd_waic"
    p_column: ClassVar[str | None] = "p_waic"
    in_arviz: ClassVar[bool] = True
    number_format: ClassVar[str] = ".4g"

    @property
    def elpd(self) -> float:
        """``elpd_waic``."""
        return self.elpd_waic

    @property
    def waic(self) -> float:
        return -2 * self.elpd_waic

    @property
    def functional_variance(self) -> float:
        return self.p_waic

    @property
    def waic_loss(self) -> float:
        return self.btl + self.beta * self.functional_variance / self.n_units

    def watanabe(self) -> pd.Series:
        """Watanabe's quantities on his per-observation loss scale."""
        values = {
            "btl": self.btl,
            "gtl": self.gtl,
            "functional_variance": self.functional_variance,
            "waic_loss": self.waic_loss,
            "cv_loss": self.cv_loss,
            "predicted_cv_gap": self.predicted_cv_gap,
        }
        return pd.concat([pd.Series(values), self.cumulants])

    def _title(self) -> str:
        tempered = f", inverse temperature {self.beta:g}" if self.beta != 1 else ""
        return (
            f"WAIC from {self.n_draws} draws and {self.n_units} units{tempered} "
            f"(variances with ddof={self.ddof})"
        )

    def _details(self) -> list[str]:
        scale = self.watanabe().to_string(float_format=lambda v: f"{v:.4g}")
        return ["", "Watanabe's per-observation loss scale", scale]


def waic(
    data, *, groups=None, var_name=None, beta: float = 1.0, ddof: int = 0, client=None
) -> WaicResult:
    """Widely applicable information criterion, with Watanabe's functional cumulants.

    Parameters
    ----------
    data : Posterior, InferenceData, DataArray, array_like or LogLikFunction
        The pointwise log-likelihood, as a container, an ``InferenceData`` (its
        ``log_likelihood`` group), or an array of shape (n_draws, n_obs) or
        (n_chains, n_draws, n_obs); dask-backed arrays and :func:`bayesij.loglik_function`
        are read block by block (peak memory one block).
    beta : float, default 1.0
        Inverse temperature of the posterior the draws come from
        (``p(theta | x) ~ prior x prod_n p(x_n | theta)^beta``); 1 is ordinary Bayes.
    groups : array_like or mapping, optional
        Leave-group-out: the units are groups, with summed log-likelihoods.
    ddof : {0, 1}, default 0
        Divisor of the posterior variances in ``p_waic`` and of the SE: 0 reproduces ArviZ
        (``az.waic``) and Watanabe's definitions; 1 reproduces R ``loo::waic``.
    var_name : str or list of str, optional
        Log-likelihood variable of an ``InferenceData``.
    client : dask.distributed.Client, optional
        For a lazy log-likelihood (a :func:`bayesij.loglik_function`, or a dask-backed
        array / xarray / log_likelihood group), which is read one block of observations at
        a time: run the blocks as tasks on this cluster.

    Returns
    -------
    WaicResult

    Warns
    -----
    UserWarning
        When some ``Var(l_n) > 0.4`` (R loo's threshold; WAIC is then unreliable and PSIS-LOO
        is preferred), and when the predicted CV - WAIC gap, times N, exceeds 0.25 SE.

    References
    ----------
    .. [1] Watanabe, S. (2010). Asymptotic equivalence of Bayes cross validation and widely
       applicable information criterion in singular learning theory. JMLR 11, 3571-3594.
    .. [2] Vehtari, A., Gelman, A. and Gabry, J. (2017). Practical Bayesian model evaluation
       using leave-one-out cross-validation and WAIC. Statistics and Computing 27, 1413-1432.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(0, 0.1, size=(4000, 1))
    >>> y = rng.normal(size=100)
    >>> result = bayesij.waic(-0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi))
    >>> round(result.p_waic, 1)
    1.0
    """
    beta = check_real(beta, "beta", 0.0, low_open=True)
    ddof = check_ddof(ddof)
    source = as_log_lik_source(data, groups=groups, var_name=var_name)
    parts = map_blocks(source, partial(info.waic_parts, beta=beta, check=False), client=client)
    result = waic_result(parts, source.index, beta, ddof, source.n_draws)
    return replace(result, grouping=source.grouping, members=unit_members(source))


def waic_result(parts: info.WaicParts, index, beta: float, ddof: int, n_draws: int) -> WaicResult:
    moments = info.LogLikMoments(*parts[:5], n_draws)
    variance = moments.variance(ddof)
    elpd = moments.lppd - beta * variance
    pointwise = pd.DataFrame({"elpd_waic": elpd, "p_waic": variance}, index=index)
    cumulants = info.functional_cumulants(moments)
    result = WaicResult(
        elpd_waic=float(elpd.sum()),
        p_waic=float(variance.sum()),
        se=elpd_standard_error(elpd, ddof),
        pointwise=pointwise,
        btl=-float(moments.lppd.mean()),
        gtl=-float(moments.mean.mean()),
        cumulants=pd.Series(cumulants, index=["Y1", "Y2", "Y3", "Y4"]),
        cv_loss=float(np.mean(parts.cv_term)),
        predicted_cv_gap=info.predicted_cv_gap(cumulants, beta),
        beta=float(beta),
        ddof=ddof,
        n_draws=n_draws,
    )
    _warn_about(result, variance)
    return result


def _warn_about(result: WaicResult, variance: np.ndarray) -> None:
    large = int(np.sum(variance > P_WAIC_WARNING))
    if large:
        warnings.warn(
            f"{large} of {variance.size} units have p_waic (posterior variance of the "
            f"log-likelihood) above {P_WAIC_WARNING}: WAIC is unreliable for them; "
            "PSIS-LOO is preferred.",
            UserWarning,
            stacklevel=3,
        )
    gap = abs(result.predicted_cv_gap) * result.n_units
    if np.isfinite(result.se) and gap > GAP_WARNING * result.se:
        warnings.warn(
            f"The predicted gap between cross-validation and WAIC on the elpd scale "
            f"({gap:.3g}) exceeds {GAP_WARNING} x SE ({result.se:.3g}): WAIC is a poor "
            "approximation of LOO here.",
            UserWarning,
            stacklevel=3,
        )


def generating_function(data, alpha: float, *, groups=None, var_name=None) -> float:
    """Watanabe's ``F(alpha) = (1/N) sum_n log E[p(x_n | theta)^alpha]``.

    ``F(-beta) - F(1 - beta)`` is the importance-sampling cross-validation loss of a posterior
    at inverse temperature ``beta`` (:attr:`WaicResult.cv_loss`); ``-F(1)`` is the Bayes
    training loss.

    Parameters
    ----------
    data : Posterior, InferenceData, DataTree, xarray or array_like
        As :func:`waic`.
    alpha : float
    groups, var_name
        As :func:`waic`.

    References
    ----------
    .. [1] Watanabe, S. (2010). Asymptotic equivalence of Bayes cross validation and widely
       applicable information criterion in singular learning theory. JMLR 11, 3571-3594.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> log_lik = np.log(np.full((100, 3), 0.5))  # p(x_n | theta) = 0.5 at every draw
    >>> round(bayesij.generating_function(log_lik, 2.0), 6)  # log 0.5^2
    -1.386294
    """
    alpha = check_real(alpha, "alpha")
    source = as_log_lik_source(data, groups=groups, var_name=var_name)
    kernel = partial(info.log_mean_exp, alpha=alpha, check=False)
    return float(map_blocks(source, kernel).mean())
