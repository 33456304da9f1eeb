"""WAIC with Watanabe's functional cumulants (and tempered posteriors), and DIC, labelled."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayesij._checks import fail
from bayesij.array import information as info
from bayesij.array.information import elpd_standard_error
from bayesij.inputs import log_lik_units, unit_index
from bayesij.posterior import Posterior

__all__ = ["waic", "WaicResult", "dic", "DicResult"]

#: R loo's threshold on the pointwise variance of the log-likelihood.
P_WAIC_WARNING = 0.4
#: Warn when |N x predicted CV - WAIC gap| exceeds this fraction of the SE of elpd_waic.
GAP_WARNING = 0.25


@dataclass(frozen=True)
class WaicResult:
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
    _log_lik: np.ndarray = field(repr=False, compare=False)

    @property
    def waic(self) -> float:
        return -2 * self.elpd_waic

    @property
    def n_units(self) -> int:
        return len(self.pointwise)

    @property
    def functional_variance(self) -> float:
        return self.p_waic

    @property
    def waic_loss(self) -> float:
        return self.btl + self.beta * self.functional_variance / self.n_units

    def generating_function(self, alpha: float) -> float:
        """``F(alpha) = (1/N) sum_n log E[p(x_n | theta)^alpha]``."""
        return float(info.log_mean_exp(self._log_lik, alpha).mean())

    def cv_loss_at(self, beta: float) -> float:
        """``F(-beta) - F(1 - beta)``: leave-one-out loss of a posterior at temperature beta.

        Meaningful for the beta the draws were made at (``self.beta``).
        """
        return self.generating_function(-beta) - self.generating_function(1 - beta)

    def estimates(self) -> pd.DataFrame:
        """Estimates and SEs of elpd_waic, p_waic and waic, as R loo's ``estimates``."""
        se_p = elpd_standard_error(self.pointwise["p_waic"].to_numpy(), self.ddof)
        return pd.DataFrame(
            {"Estimate": [self.elpd_waic, self.p_waic, self.waic],
             "SE": [self.se, se_p, 2 * self.se]},
            index=["elpd_waic", "p_waic", "waic"],
        )

    def watanabe(self) -> pd.Series:
        """Watanabe's quantities on his per-observation loss scale."""
        values = {
            "btl": self.btl, "gtl": self.gtl,
            "functional_variance": self.functional_variance, "waic_loss": self.waic_loss,
            "cv_loss": self.cv_loss, "predicted_cv_gap": self.predicted_cv_gap,
        }
        return pd.concat([pd.Series(values), self.cumulants])

    def __str__(self) -> str:
        fmt = {"float_format": lambda v: f"{v:.4g}"}
        tempered = f", inverse temperature {self.beta:g}" if self.beta != 1 else ""
        return "\n".join([
            f"WAIC from {self.n_draws} draws and {self.n_units} units{tempered} "
            f"(variances with ddof={self.ddof})",
            self.estimates().to_string(**fmt),
            "",
            "Watanabe's per-observation loss scale",
            self.watanabe().to_string(**fmt),
        ])


def waic(data, beta: float = 1.0, groups=None, *, ddof: int = 0, log_lik=None) -> WaicResult:
    """Widely applicable information criterion, with Watanabe's functional cumulants.

    Parameters
    ----------
    data : Posterior, InferenceData, DataArray or array_like
        The pointwise log-likelihood, as a container, an ``InferenceData`` (its
        ``log_likelihood`` group), or an array of shape (n_draws, n_obs) or
        (n_chains, n_draws, n_obs).
    beta : float, default 1.0
        Inverse temperature of the posterior the draws come from
        (``p(theta | x) ~ prior x prod_n p(x_n | theta)^beta``); 1 is ordinary Bayes.
    groups : array_like or mapping, optional
        Leave-group-out: the units are groups, with summed log-likelihoods.
    ddof : {0, 1}, default 0
        Divisor of the posterior variances in ``p_waic`` and of the SE: 0 reproduces ArviZ
        (``az.waic``) and Watanabe's definitions; 1 reproduces R ``loo::waic``.
    log_lik : str or list of str, optional
        Log-likelihood variable of an ``InferenceData``.

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
    if not (isinstance(beta, (int, float)) and np.isfinite(beta) and beta > 0):
        raise fail("beta", repr(beta), "a finite inverse temperature > 0")
    if ddof not in (0, 1):
        raise fail("ddof", repr(ddof), "0 (ArviZ, Watanabe) or 1 (R loo)")
    values, units = log_lik_units(data, groups, log_lik)
    matrix = values.reshape(-1, values.shape[2])
    moments = info.log_lik_moments(matrix, check=False)  # checked by log_lik_units
    variance = moments.variance(ddof)
    elpd = moments.lppd - beta * variance
    pointwise = pd.DataFrame(
        {"elpd_waic": elpd, "p_waic": variance},
        index=unit_index(units),
    )
    cumulants = info.functional_cumulants(moments)
    result = WaicResult(
        elpd_waic=float(elpd.sum()),
        p_waic=float(variance.sum()),
        se=elpd_standard_error(elpd, ddof),
        pointwise=pointwise,
        btl=-float(moments.lppd.mean()),
        gtl=-float(moments.mean.mean()),
        cumulants=pd.Series(cumulants, index=["Y1", "Y2", "Y3", "Y4"]),
        cv_loss=float(np.mean(info.log_mean_exp(matrix, -beta, check=False)
                              - info.log_mean_exp(matrix, 1 - beta, check=False))),
        predicted_cv_gap=info.predicted_cv_gap(cumulants, beta),
        beta=float(beta),
        ddof=ddof,
        n_draws=matrix.shape[0],
        _log_lik=matrix,
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


@dataclass(frozen=True)
class DicResult:
    """DIC1 (Spiegelhalter p_D) and DIC2 (Gelman p_V) on two scales.

    Deviance scale (``D = -2 log p(y | theta)``, lower is better):
    ``dic1 = E[D] + p_d`` and ``dic2 = E[D] + p_v``. Watanabe's per-observation loss scale:
    ``dic1_loss = BtL + p_d / N`` and ``dic2_loss = BtL + p_v / N``, comparable with
    ``WaicResult.waic_loss`` and ``cv_loss``.
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
        lines = [f"DIC over {self.n_obs} observations (deviance scale: -2 log p(y | theta); "
                 "loss scale: per observation, as Watanabe 2010)",
                 self.table().to_string(float_format=lambda v: f"{v:.4g}")]
        if not np.isfinite(self.p_d):
            lines.append("DIC1 needs log_lik_at_point (the log-likelihood at a point estimate).")
        return "\n".join(lines)


def dic(post, log_lik_at_point=None, point: str = "mean") -> DicResult:
    """Deviance information criteria DIC1 and DIC2.

    Parameters
    ----------
    post : Posterior
    log_lik_at_point : array_like of shape (n_obs,) or callable, optional
        ``log p(x_n | theta_hat)`` at the plug-in point, or a function that receives the
        point estimate of the quantities (a pandas Series indexed by quantity name) and
        returns it. Without it only DIC2 is available.
    point : {"mean", "median"}, default "mean"
        The plug-in point: posterior mean or median of each quantity.

    Returns
    -------
    DicResult

    References
    ----------
    .. [1] Spiegelhalter, D. J., Best, N. G., Carlin, B. P. and van der Linde, A. (2002).
       Bayesian measures of model complexity and fit. JRSS B 64(4), 583-639.
    .. [2] Gelman, A., Carlin, J. B., Stern, H. S. and Rubin, D. B. (2004). Bayesian Data
       Analysis, 2nd ed.
    .. [3] Watanabe, S. (2010). JMLR 11, 3571-3594, section 6.
    """
    if not isinstance(post, Posterior):
        raise fail("post", f"a {type(post).__name__}", "a bayesij.Posterior")
    if point not in ("mean", "median"):
        raise fail("point", repr(point), "'mean' or 'median'")
    reduce = np.mean if point == "mean" else np.median
    estimate = pd.Series(reduce(post.quantities.values, axis=(0, 1)),
                         index=post.quantity_names, name=point)
    values = log_lik_at_point(estimate) if callable(log_lik_at_point) else log_lik_at_point
    matrix = post.log_lik.values.reshape(post.n_draws, post.n_obs)
    terms = info.dic_terms(matrix, values)
    return DicResult(
        p_d=terms.p_d, p_v=terms.p_v, mean_deviance=terms.mean_deviance,
        deviance_at_point=terms.deviance_at_point, btl=terms.btl,
        n_obs=post.n_obs, point=estimate if values is not None else None,
    )
