"""Convergence before anything: R-hat, bulk and tail ESS equal to the installed ArviZ
generation's (ArviZ 0.23's ``rhat`` / ``ess``, or arviz-stats 1.x's), computed here in the
test on the same draws; divergences read from ``sample_stats``; the audit says so first."""

import warnings

import numpy as np
import pytest
import xarray as xr

import bayesij
from peers import ARVIZ_1


def _draws(n_draws: int, seed: int = 0) -> np.ndarray:
    """Four chains of three quantities: one chain shifted, ties, and a random walk."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, n_draws, 3))
    x[1, :, 0] += 0.3
    x[:, ::7, 1] = 0.0  # ties, averaged in the ranks
    x[:, :, 2] = np.cumsum(x[:, :, 2], axis=1) * 0.1
    return x


def _peer(x: np.ndarray) -> dict:
    """The installed ArviZ generation's R-hat, bulk and tail ESS (tails at 5 % and 95 %:
    arviz-stats' default tail is its ci_prob, 0.89)."""
    if ARVIZ_1:
        import arviz_stats

        tree = xr.DataTree.from_dict({"posterior": xr.Dataset({"x": (("chain", "draw", "k"), x)})})
        return {
            "rhat": arviz_stats.rhat(tree, method="rank")["x"].values,
            "ess_bulk": arviz_stats.ess(tree, method="bulk")["x"].values,
            "ess_tail": arviz_stats.ess(tree, method="tail", prob=(0.05, 0.95))["x"].values,
        }
    import arviz

    dataset = arviz.convert_to_dataset(x)
    return {
        "rhat": arviz.rhat(dataset, method="rank")["x"].values,
        "ess_bulk": arviz.ess(dataset, method="bulk")["x"].values,
        "ess_tail": arviz.ess(dataset, method="tail")["x"].values,
    }


@pytest.mark.parametrize("n_draws", [250, 251])
def test_r_hat_and_ess_are_the_peers(n_draws):
    x = _draws(n_draws)
    names = ["a", "b", "c"]
    result = bayesij.convergence(
        bayesij.from_arrays(x, np.zeros((4, n_draws, 2)), quantity_names=names)
    )
    for column, expected in _peer(x).items():
        np.testing.assert_allclose(result.table[column].to_numpy(), expected, rtol=1e-10)
    assert result.table.loc["c", "rhat"] > 1.5 and not result.converged


def test_independent_draws_converge_and_a_stuck_chain_does_not():
    rng = np.random.default_rng(1)
    good = rng.normal(size=(4, 1000, 2))
    post = bayesij.from_arrays(good, np.zeros((4, 1000, 2)), quantity_names=["a", "b"])
    assert bayesij.convergence(post).converged
    stuck = good.copy()
    stuck[2] = 0.5 + 0.01 * stuck[2]  # a chain that never moved
    found = bayesij.convergence(
        bayesij.from_arrays(stuck, np.zeros((4, 1000, 2)), quantity_names=["a", "b"])
    )
    assert not found.converged and "R-hat up to" in found.problems()[0]


def test_divergences_are_read_from_sample_stats_and_the_audit_says_so_first():
    rng = np.random.default_rng(2)
    y = rng.normal(1.0, 1.0, size=30)
    mu = rng.normal(y.mean(), 1 / np.sqrt(30), size=(4, 500))
    diverging = np.zeros((4, 500), dtype=bool)
    diverging[1, [3, 40, 41]] = True
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}),
            "log_likelihood": xr.Dataset(
                {"y": (("chain", "draw", "obs"), -0.5 * (y - mu[..., None]) ** 2)}
            ),
            "sample_stats": xr.Dataset({"diverging": (("chain", "draw"), diverging)}),
        }
    )
    found = bayesij.convergence(tree)
    assert found.divergent == 3 and not found.converged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = bayesij.audit(tree, targets=("sign",))
    first = report.summary()[0]
    assert first.startswith("The draws have not converged") and "3 divergent" in first
    tree["sample_stats"] = xr.DataTree(
        xr.Dataset({"diverging": (("chain", "draw"), np.zeros((4, 500), dtype=bool))})
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quiet = bayesij.audit(tree, targets=("sign",))
    assert quiet.convergence.converged
    assert not any(s.startswith("The draws have not converged") for s in quiet.summary())


def test_too_few_draws_are_refused_by_name():
    post = bayesij.from_arrays(np.zeros((2, 3, 1)) + [[[0.1], [0.2], [0.3]]], np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="data: found 3 draws per chain"):
        bayesij.convergence(post)
