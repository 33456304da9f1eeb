"""Convergence before anything: each quantity's R-hat, bulk and tail ESS (the array
functions, tested against the peers in tests/array/test_convergence.py), divergences read
from ``sample_stats``, and the audit says so first."""

import warnings

import numpy as np
import pytest
import xarray as xr

import bayesij


@pytest.mark.parametrize("n_draws", [250, 251])
def test_the_table_holds_each_quantity_s_diagnostics(n_draws):
    from bayesij.array.convergence import bulk_ess, rank_rhat, tail_ess

    x = np.random.default_rng(0).normal(size=(4, n_draws, 3))
    x[:, :, 2] = np.cumsum(x[:, :, 2], axis=1) * 0.1
    names = ["a", "b", "c"]
    result = bayesij.convergence(
        bayesij.from_arrays(x, np.zeros((4, n_draws, 2)), quantity_names=names)
    )
    assert list(result.table.index) == names
    np.testing.assert_array_equal(result.table["rhat"], rank_rhat(x))
    np.testing.assert_array_equal(result.table["ess_bulk"], bulk_ess(x))
    np.testing.assert_array_equal(result.table["ess_tail"], tail_ess(x))
    assert not result.converged and result.problems()[0].startswith("R-hat up to")


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
    shifted = good.copy()
    shifted[0, :, 0] += 0.35  # one chain a little off: R-hat 1.013, ESS still 643
    mild = bayesij.convergence(
        bayesij.from_arrays(shifted, np.zeros((4, 1000, 2)), quantity_names=["a", "b"])
    )
    assert 1.01 < mild.table.loc["a", "rhat"] < 1.02 and mild.table.loc["a", "ess_bulk"] > 400
    assert mild.problems() == ["R-hat up to 1.01 (a; above 1.01)"]


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
        report = bayesij.audit(tree, settings={"targets": ("sign",)})
    first = report.summary()[0]
    assert first.startswith("The draws have not converged") and "3 divergent" in first
    assert not found.mixed
    tree["sample_stats"] = xr.DataTree(
        xr.Dataset({"diverging": (("chain", "draw"), np.zeros((4, 500), dtype=bool))})
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quiet = bayesij.audit(tree, settings={"targets": ("sign",)})
    assert quiet.convergence.converged
    few = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"mu": (("chain", "draw"), mu[:, :60])}),
            "log_likelihood": xr.Dataset(
                {"y": (("chain", "draw", "obs"), -0.5 * (y - mu[:, :60, None]) ** 2)}
            ),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        short = bayesij.audit(few, settings={"targets": ("sign",)})
    assert short.convergence.mixed and not short.convergence.converged  # 240 draws in all
    assert short.summary()[0].startswith("The draws are too few: ESS down to")
    assert not any(s.startswith("The draws have not converged") for s in quiet.summary())


def test_too_few_draws_are_refused_by_name():
    post = bayesij.from_arrays(np.zeros((2, 3, 1)) + [[[0.1], [0.2], [0.3]]], np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="data: found 3 draws per chain"):
        bayesij.convergence(post)


@pytest.mark.parametrize("kind", ["DataTree", "InferenceData", "lazy"])
def test_the_same_fit_in_every_container_gives_the_same_diagnostics(kind, tmp_path):
    # ArviZ 0.23's InferenceData (skipped on ArviZ 1.x), a DataTree, and the DataTree
    # opened lazily from a file: the same R-hat, ESS and divergences.
    rng = np.random.default_rng(4)
    mu = rng.normal(size=(4, 300))
    mu[0] += 0.4
    diverging = np.zeros((4, 300), dtype=bool)
    diverging[2, 7] = True
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}),
            "log_likelihood": xr.Dataset(
                {"y": (("chain", "draw", "obs"), rng.normal(size=(4, 300, 5)))}
            ),
            "sample_stats": xr.Dataset({"diverging": (("chain", "draw"), diverging)}),
        }
    )
    expected = bayesij.convergence(tree)
    if kind == "InferenceData":
        from peers import ARVIZ_1

        if ARVIZ_1:
            pytest.skip("ArviZ 1.x has no InferenceData (the DataTree is tested)")
        import arviz

        data = arviz.InferenceData(**{name: tree[name].to_dataset() for name in tree.children})
    elif kind == "lazy":
        tree.to_netcdf(tmp_path / "fit.nc")
        data = xr.open_datatree(tmp_path / "fit.nc", chunks={})
    else:
        data = tree
    found = bayesij.convergence(data)
    assert found.divergent == expected.divergent == 1
    np.testing.assert_allclose(found.table.to_numpy(), expected.table.to_numpy(), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audited = bayesij.audit(data, settings={"targets": ("sign",)}).convergence
    np.testing.assert_allclose(audited.table.to_numpy(), expected.table.to_numpy(), rtol=1e-12)
    assert audited.divergent == 1


def test_a_chain_whose_energy_barely_moves_is_said_first():
    # Energies that wander as a random walk (momentum resampling exploring them poorly):
    # E-BFMI far below 0.3 in every chain; energies drawn afresh each draw: near 2.
    rng = np.random.default_rng(3)
    y = rng.normal(1.0, 1.0, size=30)
    mu = rng.normal(y.mean(), 1 / np.sqrt(30), size=(4, 500))

    def tree(energy):
        return xr.DataTree.from_dict(
            {
                "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}),
                "log_likelihood": xr.Dataset(
                    {"y": (("chain", "draw", "obs"), -0.5 * (y - mu[..., None]) ** 2)}
                ),
                "sample_stats": xr.Dataset({"energy": (("chain", "draw"), energy)}),
            }
        )

    stuck = bayesij.convergence(tree(np.cumsum(rng.normal(size=(4, 500)), axis=1)))
    assert np.all(stuck.bfmi < 0.3) and not stuck.converged
    assert any(p.startswith("E-BFMI down to") for p in stuck.problems())
    fresh = bayesij.convergence(tree(rng.normal(size=(4, 500))))
    np.testing.assert_allclose(fresh.bfmi, 2.0, atol=0.3)  # E (x_t - x_t-1)^2 = 2 var
    assert fresh.converged


def test_the_verdict_agrees_with_arviz_stats_diagnose():
    """arviz-stats' diagnose on the same DataTree: the same quantities flagged for R-hat
    (the larger of the rank-normalised and folded, above 1.01), the same divergences, the
    same chains flagged for E-BFMI, the same bulk-ESS floor (100 per chain); bayesij also
    holds the tail ESS to that floor, so it may flag more, never less."""
    arviz_stats = pytest.importorskip("arviz_stats", reason="arviz-stats (Python >= 3.12)")
    rng = np.random.default_rng(11)
    good = rng.normal(size=(4, 300))
    stuck = rng.normal(size=(4, 300)) + np.array([[0.0], [0.0], [0.0], [0.7]])
    sticky = np.cumsum(rng.normal(scale=0.1, size=(4, 300)), axis=1)  # few effective draws
    energy = rng.normal(size=(4, 300))
    energy[2] = np.cumsum(rng.normal(size=300))  # one chain's energy barely moves
    diverging = np.zeros((4, 300), dtype=bool)
    diverging[1, [5, 80]] = True
    coords = {"chain": np.arange(4), "draw": np.arange(300)}
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset(
                {
                    name: (("chain", "draw"), v)
                    for name, v in (("good", good), ("stuck", stuck), ("sticky", sticky))
                },
                coords=coords,
            ),
            "log_likelihood": xr.Dataset(
                {"y": (("chain", "draw", "obs"), rng.normal(size=(4, 300, 3)))}
            ),
            "sample_stats": xr.Dataset(
                {
                    "energy": (("chain", "draw"), energy),
                    "diverging": (("chain", "draw"), diverging),
                },
                coords=coords,
            ),
        }
    )
    has_errors, theirs = arviz_stats.diagnose(tree, show_diagnostics=False, return_diagnostics=True)
    ours = bayesij.convergence(tree)
    flagged = set(ours.table.index[ours.table["rhat"] > 1.01])
    assert flagged == set(theirs["rhat"]["bad_params"])
    assert ours.divergent == theirs["divergent"]["n_divergent"] == 2
    assert np.flatnonzero(ours.bfmi < 0.3).tolist() == theirs["bfmi"]["failed_chains"] == [2]
    np.testing.assert_allclose(ours.bfmi, theirs["bfmi"]["bfmi_values"], rtol=1e-12)
    bulk = arviz_stats.ess(tree, method="bulk")
    bulk = getattr(bulk, "ds", bulk)  # a DataTree node or a Dataset
    for name in ("good", "stuck", "sticky"):
        their = float(bulk[name].values)
        assert ours.table.loc[name, "ess_bulk"] == pytest.approx(their, rel=1e-10)
    their_low = {name for name in ("good", "stuck", "sticky") if float(bulk[name].values) < 400}
    assert set(ours.table.index[ours.table["ess_bulk"] < 400]) == their_low != set()
    assert has_errors and not ours.converged
