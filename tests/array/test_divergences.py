"""priorsense's divergences of a reweighted sample against R 4.2's density() on the same
draws and weights (values saved by tests/reference/r_divergences/divergences.R), and the
empirical distances against SciPy and exact cases."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from bayesij.array.divergences import bandwidth_nrd0, r_density, reweighting_divergence

REFERENCE = Path(__file__).parents[1] / "reference" / "r_divergences"


@pytest.fixture(scope="module")
def reference():
    inputs = np.genfromtxt(REFERENCE / "inputs.csv", delimiter=",", names=True)
    values = json.loads((REFERENCE / "values.json").read_text())
    return [(inputs[f"x{k}"], inputs[f"w{k}"], values[f"q{k}"]) for k in (1, 2, 3)]


def test_the_kernel_density_is_r_s(reference):
    for x, w, r in reference:
        assert bandwidth_nrd0(x) == pytest.approx(r["bw"], rel=1e-14)
        np.testing.assert_allclose(r_density(x, None, x.min(), x.max()), r["p"], atol=1e-14)
        np.testing.assert_allclose(r_density(x, w, x.min(), x.max()), r["q"], atol=1e-14)


@pytest.mark.parametrize("measure", ["js_div", "hellinger_dist", "kl_div", "ws_dist"])
def test_the_divergences_are_r_s_on_the_same_draws(reference, measure):
    for x, w, r in reference:
        assert reweighting_divergence(x, w, measure) == pytest.approx(r[measure], rel=1e-10)


def test_the_square_roots_and_the_empirical_distances():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=500), rng.uniform(size=500)
    js, kl = reweighting_divergence(x, w, "js_div"), reweighting_divergence(x, w, "kl_div")
    assert reweighting_divergence(x, w, "js_dist") == pytest.approx(np.sqrt(js))
    assert reweighting_divergence(x, w, "kl_dist") == pytest.approx(np.sqrt(kl))
    assert reweighting_divergence(x, w, "ws_dist") == pytest.approx(
        wasserstein_distance(x, x, None, w), rel=1e-12
    )
    # all the weight on the upper half of 0..9: the CDFs differ by 1/2 at 4
    ten = np.arange(10.0)
    assert reweighting_divergence(ten, (ten > 4.5).astype(float), "ks_dist") == pytest.approx(0.5)
    assert reweighting_divergence(x, np.ones(500), "ks_dist") == pytest.approx(0.0, abs=1e-12)
