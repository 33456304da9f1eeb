"""The text report's tables: the most influential units are those of largest |psi| per
quantity (psi = Cov(f, l_u) computed here), ranked from 1, with the first-order change
-psi and its size in posterior sds; the report holds every section."""

import numpy as np

import bayesij
from bayesij.report.text import influence_report, most_influential


def test_most_influential_units_are_the_largest_covariances():
    rng = np.random.default_rng(3)
    y = np.r_[rng.normal(size=20), 6.0]  # one outlier
    mu = y.mean() + rng.normal(size=(2, 400, 1)) / np.sqrt(21)
    post = bayesij.from_arrays(mu, -0.5 * (y - mu) ** 2, quantity_names=["mu"])
    table = most_influential(post, top=3)
    flat_mu, flat_l = mu.reshape(800), (-0.5 * (y - mu) ** 2).reshape(800, 21)
    psi = np.array([np.cov(flat_mu, flat_l[:, n])[0, 1] for n in range(21)])
    expected = np.argsort(-np.abs(psi))[:3]
    assert list(table.index.get_level_values("rank")) == [1, 2, 3]
    assert table["obs"].tolist() == expected.tolist() and expected[0] == 20
    np.testing.assert_allclose(table["change_if_removed"], -psi[expected], rtol=1e-8)
    np.testing.assert_allclose(table["change_in_sd"], -psi[expected] / flat_mu.std(ddof=1))
    report = influence_report(post, top=2)
    for section in ("Posterior summary", "Most influential units", "PSIS-LOO"):
        assert section in report
