"""The demo fit (a real PyStan regression with three high-leverage points): the data are
what the README says, and the audit's tools find those points."""

import pytest

from bayesij import ij_covariance
from bayesij.demo import demo_data
from bayesij.report.text import most_influential


def test_the_demo_data_end_with_three_high_leverage_points():
    data = demo_data()
    x, y = data["X"][:, 0], data["y"]
    assert data["N"] == y.size == 80 and data["K"] == 1 and (data["weights"] == 1).all()
    far = abs(x - x[:-3].mean()) > 3 * x[:-3].std()
    assert list(far.nonzero()[0]) == [77, 78, 79]
    assert (y[-3:] < 0).all() and (demo_data(seed=1)["y"] != y).any()


@pytest.fixture(scope="module")
def demo_fit():
    pytest.importorskip("stan")
    from bayesij.demo import fit_demo

    return fit_demo()


@pytest.mark.stan
@pytest.mark.slow
def test_demo_fit_flags_the_three_high_leverage_points(demo_fit):
    post, data = demo_fit
    top = most_influential(post, top=3).loc["beta[1]"]
    assert set(top["obs"]) == {data["N"] - 2, data["N"] - 1, data["N"]}
    # Removing them is predicted to move the negative slope up by over a posterior sd each.
    assert (top["change_in_sd"] > 0.5).all()
    table = ij_covariance(post).table()
    # The three points make the residuals heavy-tailed: IJ sd exceeds the posterior sd.
    assert table.loc["beta[1]", "ij_sd"] > 1.3 * table.loc["beta[1]", "posterior_sd"]
