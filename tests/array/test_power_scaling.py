"""Power-scaling sensitivity's pieces against their definitions (Kallioinen et al. 2024;
Nguyen & Vreeken 2015): the weights exp((alpha - 1) c) (Pareto-smoothed only in their
largest tail, normalised), the cumulative Jensen-Shannon distance written out here from the
two step ECDFs as integrals over the sorted draws, and its values at the extremes."""

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesij.array.power_scaling import cjs_distance, power_scaling_log_weights


def _cjs_reference(x: np.ndarray, w: np.ndarray) -> float:
    """sqrt((CJS(P||Q) + CJS(Q||P)) / (int F_P + int F_Q)) in bits, term by term."""
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    n = x.size
    total = {"pq": 0.0, "qp": 0.0, "p": 0.0, "q": 0.0}
    f_q = 0.0
    for i in range(n - 1):
        f_p = (i + 1) / n
        f_q += w[i]
        dx = x[i + 1] - x[i]
        m = 0.5 * (f_p + f_q)
        total["p"] += f_p * dx
        total["q"] += f_q * dx
        total["pq"] += dx * (f_p * np.log2(f_p / m) if f_p > 0 else 0.0)
        total["qp"] += dx * (f_q * np.log2(f_q / m) if f_q > 0 else 0.0)
    pq = total["pq"] + (total["q"] - total["p"]) / (2 * np.log(2))
    qp = total["qp"] + (total["p"] - total["q"]) / (2 * np.log(2))
    return float(np.sqrt((max(pq, 0) + max(qp, 0)) / (total["p"] + total["q"])))


def test_cjs_distance_is_its_definition():
    rng = np.random.default_rng(4)
    draws = rng.normal(size=(300, 3))
    weights = np.exp(0.3 * draws[:, 0])
    weights /= weights.sum()
    ours = cjs_distance(draws, weights)
    for k in range(3):
        assert ours[k] == pytest.approx(_cjs_reference(draws[:, k], weights), rel=1e-10)
    uniform = np.full(300, 1 / 300)
    # Uniform weights: the same distribution, no distance.
    np.testing.assert_allclose(cjs_distance(draws, uniform), 0.0, atol=1e-7)
    assert ours[0] > 0.05


def test_power_scaling_weights_are_the_powered_ratios_outside_the_tail():
    rng = np.random.default_rng(5)
    component = rng.normal(size=1000)
    log_weights = power_scaling_log_weights(component, 1.1)
    assert logsumexp(log_weights) == pytest.approx(0.0, abs=1e-12)
    raw = 0.1 * component - logsumexp(0.1 * component)
    body = np.argsort(component)[:-100]  # far from the largest ratios: not smoothed
    shift = log_weights[body] - raw[body]
    np.testing.assert_allclose(shift, shift[0], atol=1e-12)  # equal up to normalisation
    assert power_scaling_log_weights(component, 1.0) == pytest.approx(np.full(1000, -np.log(1000)))
