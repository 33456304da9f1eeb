"""DIC's ingredients against their definitions (Spiegelhalter et al. 2002; Gelman et al.
2004, section 6.7), computed here draw by draw: the mean deviance, Spiegelhalter's p_D at a
plug-in point, Gelman's p_V = Var(D) / 2 (divisor S - 1) and the Bayes training loss."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesij.array.dic import dic_terms


@pytest.fixture(scope="module")
def draws():
    rng = np.random.default_rng(2)
    y = rng.normal(size=30)
    mu = rng.normal(y.mean(), 0.2, size=(200, 1))
    return y, mu, -0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi)


def test_terms_are_their_definitions(draws):
    y, mu, log_lik = draws
    at_mean = -0.5 * (y - mu.mean()) ** 2 - 0.5 * np.log(2 * np.pi)
    terms = dic_terms(log_lik, at_mean)
    deviance = np.array([-2 * row.sum() for row in log_lik])
    assert terms.mean_deviance == pytest.approx(deviance.mean(), rel=1e-13)
    assert terms.deviance_at_point == pytest.approx(-2 * at_mean.sum(), rel=1e-13)
    assert terms.p_d == pytest.approx(deviance.mean() + 2 * at_mean.sum(), rel=1e-10)
    assert terms.p_v == pytest.approx(deviance.var(ddof=1) / 2, rel=1e-12)
    btl = -np.mean([logsumexp(log_lik[:, n]) - np.log(200) for n in range(30)])
    assert terms.btl == pytest.approx(btl, rel=1e-13)
    # A normal mean with known variance: p_D is the posterior variance over the data's.
    assert terms.p_d == pytest.approx(30 * mu.var(), rel=1e-10)


def test_without_a_point_p_d_is_nan_and_bad_points_are_refused(draws):
    _, _, log_lik = draws
    assert np.isnan(dic_terms(log_lik).p_d)
    with pytest.raises(ValueError, match=r"^log_lik_at_point: found shape \(29,\)"):
        dic_terms(log_lik, np.zeros(29))
    with pytest.raises(ValueError, match=r"^log_lik_at_point: found non-finite values"):
        dic_terms(log_lik, np.full(30, np.nan))
    impossible = log_lik.copy()
    impossible[0, 0] = -np.inf
    with pytest.raises(ValueError, match=r"^log_lik: found -inf values"):
        dic_terms(impossible)
