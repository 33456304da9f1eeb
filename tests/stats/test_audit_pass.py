"""One pass over the draws for the whole audit: every result equals what its own
estimator gives for the same fit (IJ covariance and influence, PSIS-LOO, the linearity
check, WAIC, AMIP), in memory, over groups and from a lazy dask log-likelihood read one
chunk at a time; and the linearity check's importance-sampling change is the exact
leave-one-out change of a conjugate model."""

import warnings

import numpy as np
import pytest

import bayesij
from bayesij.array.influence import InfluenceScores
from bayesij.data.fit import as_source
from bayesij.data.source import map_blocks
from bayesij.stats.audit_pass import audit_pass
from conjugate import hierarchical_normal

QUESTIONS = [("mu", "sign"), ("mu", "significance"), ("alpha[2]", 0.2)]


def _hierarchical(rng):
    model, groups = hierarchical_normal(8, 6, np.random.default_rng(2), tau=0.5)
    theta = model.draws(4000, rng)
    names = ["mu"] + [f"alpha[{g + 1}]" for g in range(8)]
    post = bayesij.from_arrays(
        theta.reshape(4, 1000, -1), model.log_lik(theta).reshape(4, 1000, -1), quantity_names=names
    )
    return model, groups, post


def _assert_same(found, data, groups, method):
    ij = bayesij.ij_covariance(data, groups=groups)
    np.testing.assert_allclose(found.ij.covariance, ij.covariance, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(found.ij.mcse_covariance, ij.mcse_covariance, rtol=1e-12)
    saved = bayesij.loo(data, groups=groups, save_psis=True)
    for column in ("elpd_loo", "pareto_k", "mcse_elpd_loo", "p_loo"):
        np.testing.assert_allclose(found.loo.pointwise[column], saved.pointwise[column], 1e-12)
    scores = InfluenceScores(ij.influence["psi"].values, ij.influence["mcse"].values)
    checked = bayesij.linearity(data, groups=groups, scores=scores, psis=saved)
    np.testing.assert_allclose(found.linearity.delta_is, checked.delta_is, rtol=0, atol=1e-13)
    np.testing.assert_allclose(found.linearity.index, checked.index, rtol=1e-10)
    waic = bayesij.waic(data, groups=groups)
    np.testing.assert_allclose(found.waic.pointwise, waic.pointwise, rtol=1e-12)
    alone = [bayesij.amip(data, q, t, groups=groups, method=method) for q, t in QUESTIONS]
    for ours, theirs in zip(found.amip, alone, strict=True):
        assert ours.drop_ids == theirs.drop_ids and ours.answer == theirs.answer
        assert ours.predicted_change == pytest.approx(theirs.predicted_change, rel=1e-10)


@pytest.mark.parametrize("by_group", [False, True])
def test_one_pass_gives_what_each_estimator_gives(rng, by_group):
    _, groups, post = _hierarchical(rng)
    groups = groups if by_group else None
    source = as_source(post, groups=groups, need_quantities=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k-hat of whole groups
        found = audit_pass(source, QUESTIONS, method="reweighted", alpha_max=0.1)
        _assert_same(found, post, groups, "reweighted")


def _lazy_chunks(matrix, computed=None):
    """``matrix`` (4, 1000, 48) as a dask array of four delayed chunks of 12 units, each
    computation noted in ``computed``."""
    da = pytest.importorskip("dask.array")
    import dask
    import xarray as xr

    def chunk(i):
        if computed is not None:
            computed.append(i)
        return matrix[:, :, 12 * i : 12 * (i + 1)]

    blocks = [
        da.from_delayed(dask.delayed(chunk)(i), shape=(4, 1000, 12), dtype=float) for i in range(4)
    ]
    return xr.DataArray(da.concatenate(blocks, axis=2), dims=("chain", "draw", "obs"))


def test_a_lazy_log_likelihood_is_read_once_for_everything(rng):
    import xarray as xr

    _, _, post = _hierarchical(rng)
    matrix = post.log_lik.values
    computed = []
    lazy = _lazy_chunks(matrix, computed)
    posterior = xr.Dataset({"mu": (("chain", "draw"), post.quantities.values[..., 0])})
    tree = xr.DataTree.from_dict(
        {"posterior": posterior, "log_likelihood": xr.Dataset({"y": lazy})}
    )
    source = as_source(tree, need_quantities=True)
    assert source.lazy and len(source.bounds()) == 4
    questions = QUESTIONS[:2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = audit_pass(source, questions, method="linear", alpha_max=0.1)
    # Each chunk once for every estimator, the AMIP sets' sums included (their columns
    # were kept as the chunks went by).
    assert sorted(computed) == [0, 1, 2, 3]
    assert all(result.drop_ids for result in found.amip)  # there were sets to sum
    in_memory = bayesij.from_arrays(post.quantities.values[..., :1], matrix, quantity_names=["mu"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = audit_pass(
            as_source(in_memory, need_quantities=True), questions, method="linear", alpha_max=0.1
        )
    np.testing.assert_allclose(found.ij.covariance, memory.ij.covariance, rtol=1e-12)
    np.testing.assert_allclose(found.loo.pointwise, memory.loo.pointwise, rtol=1e-12)
    np.testing.assert_allclose(found.linearity.delta_is, memory.linearity.delta_is, 1e-12)
    for ours, theirs in zip(found.amip, memory.amip, strict=True):
        assert ours.drop_ids == theirs.drop_ids
        np.testing.assert_allclose(ours.predicted_interval, theirs.predicted_interval, 1e-12)
        for key in ("naive", "split", "mcse"):
            np.testing.assert_allclose(ours.monte_carlo[key], theirs.monte_carlo[key], 1e-12)
        # The block bootstrap's answer from the candidate units' sums alone (the lazy
        # pass keeps no others): that of every unit's.
        assert (ours.answer, ours.upper_bound) == (theirs.answer, theirs.upper_bound)
        for name in ("share_reached", "size_interval", "change_interval", "draws_needed"):
            np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), 1e-12)
    # Kept too few columns (one per ranking), the sets' chunks are read again, with the
    # same sums to the bit.
    import bayesij.stats.amip as stats_amip

    computed.clear()
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patch.setattr(stats_amip, "kept_capacity", lambda *args: 1)
        again = audit_pass(source, questions, method="linear", alpha_max=0.1)
    assert len(computed) > 4 and sorted(computed[:4]) == [0, 1, 2, 3]
    for ours, theirs in zip(again.amip, found.amip, strict=True):
        assert ours.drop_ids == theirs.drop_ids
        assert ours.predicted_interval == theirs.predicted_interval
        assert ours.monte_carlo == theirs.monte_carlo


def test_the_linearity_change_is_the_exact_leave_one_out_change(rng):
    model, _, post = _hierarchical(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = audit_pass(
            as_source(post, need_quantities=True), [], method="linear", alpha_max=0.1
        )
    weights = np.ones(model.n_obs)
    weights[0] = 0
    exact = model.posterior(weights)[0] - model.posterior()[0]
    np.testing.assert_allclose(found.linearity.delta_is[0].to_numpy(), exact, atol=0.02)
    assert found.amip == []


@pytest.mark.parametrize("single", [False, True])
def test_the_installed_arviz_container_with_a_lazy_log_likelihood_is_audited(single, monkeypatch):
    """ArviZ 0.23's InferenceData (Python 3.11) or ArviZ 1.x's DataTree (3.12+), its
    log_likelihood group chunked with dask: the audit reads it lazily (linear AMIP, said in
    the report) and reports what it reports for the same container in memory; also with the
    second-order model's rows held in float32 (``single``: as past the budget)."""
    import bayesij.stats.amip as stats_amip

    if single:
        monkeypatch.setattr(stats_amip, "SINGLE_PRECISION_BYTES", 0)
    az = pytest.importorskip("arviz")
    pytest.importorskip("dask")
    import xarray as xr

    rng = np.random.default_rng(3)
    y = 0.4 + rng.standard_t(4, size=120)
    mu = y.mean() + y.std() / np.sqrt(120) * rng.normal(size=(4, 250))
    log_lik = -0.5 * (y - mu[..., None]) ** 2
    groups = {"posterior": {"mu": mu}, "log_likelihood": {"y": log_lik}}
    if int(az.__version__.split(".")[0]) >= 1:
        memory = az.from_dict(groups)
        posterior = memory["posterior"].to_dataset()
        lazy_ll = memory["log_likelihood"].to_dataset().chunk({"y_dim_0": 40})
        lazy = xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": lazy_ll})
    else:
        memory = az.from_dict(**groups)
        lazy_ll = memory.log_likelihood.chunk({"y_dim_0": 40})
        lazy = az.InferenceData(posterior=memory.posterior, log_likelihood=lazy_ll)
    assert as_source(lazy).lazy and not as_source(memory).lazy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = bayesij.audit(lazy)
        reference = bayesij.audit(memory, settings={"method": "linear"})
    assert ours.method == "linear" and any("linear method" in s for s in ours.skipped_words())
    np.testing.assert_allclose(ours.ij.covariance, reference.ij.covariance, rtol=1e-12)
    np.testing.assert_allclose(ours.loo.pointwise, reference.loo.pointwise, rtol=1e-12)
    for key, result in reference.amip.items():
        assert ours.amip[key].drop_ids == result.drop_ids
        assert ours.amip[key].answer == result.answer


@pytest.mark.processes
def test_the_audit_runs_on_a_dask_cluster_with_the_local_results(rng):
    """``audit(..., client=)``: the pass over a lazy log-likelihood's chunks and the linear
    sets' sums run as tasks on the workers (each chunk computed there, never on the
    client); every result equals the lazy audit without a cluster and the in-memory
    linear audit (1e-10)."""
    distributed = pytest.importorskip("distributed")
    import xarray as xr

    _, _, post = _hierarchical(rng)
    matrix = post.log_lik.values
    lazy = _lazy_chunks(matrix)
    mu = post.quantities.values[..., 0]
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}),
            "log_likelihood": xr.Dataset({"y": lazy}),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cluster's start-up notices; k-hat
        local = bayesij.audit(tree)
        memory = bayesij.audit(
            bayesij.from_arrays(mu[..., None], matrix, quantity_names=["mu"]),
            settings={"method": "linear"},
        )
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        )
        with cluster, distributed.Client(cluster) as client:
            submitted = []
            submit = client.submit
            client.submit = lambda *a, **k: submitted.append(a[0]) or submit(*a, **k)
            remote = bayesij.audit(tree, settings={"client": client})
    kernels = {getattr(f, "__name__", "") for f in submitted}
    assert kernels == {"_checked_then"}  # each chunk computed on a worker, checked there
    assert any(result.drop_ids for result in remote.amip.values())
    assert len(submitted) > 4  # the pass's 4 chunks, then those holding the sets, for sums
    assert remote.method == local.method == "linear"
    for reference in (local, memory):
        np.testing.assert_allclose(remote.ij.covariance, reference.ij.covariance, rtol=1e-10)
        np.testing.assert_allclose(remote.loo.pointwise, reference.loo.pointwise, rtol=1e-10)
        np.testing.assert_allclose(remote.waic.pointwise, reference.waic.pointwise, rtol=1e-10)
        for key, result in reference.amip.items():
            ours = remote.amip[key]
            assert ours.drop_ids == result.drop_ids and ours.answer == result.answer
            np.testing.assert_allclose(ours.predicted_interval, result.predicted_interval, 1e-10)
            for name in ("share_reached", "size_interval", "change_interval"):  # bootstrap
                np.testing.assert_allclose(getattr(ours, name), getattr(result, name), 1e-10)
    assert remote.summary() == local.summary()


def test_a_block_s_columns_and_set_sums_on_a_worker_are_its_own():
    # The tasks a cluster runs for the second read: the block of units 10..19 gives the
    # columns of the asked units inside it (both ends included) and its share of each sum.
    from bayesij.stats.amip import _block_columns, _block_set_sums

    block = np.arange(2 * 3 * 10, dtype=float).reshape(2, 3, 10)
    positions = np.arange(10, 20)
    units = np.array([5, 10, 13, 19, 25])
    np.testing.assert_array_equal(_block_columns(block, positions, units), block[:, :, [0, 3, 9]])
    sums = _block_set_sums(block, positions, [units, np.array([19])])
    np.testing.assert_array_equal(sums[..., 0], block[:, :, [0, 3, 9]].sum(axis=2))
    np.testing.assert_array_equal(sums[..., 1], block[:, :, 9])


def test_the_second_order_columns_are_read_a_block_at_a_time(rng, monkeypatch):
    """The lazy audit's columns for the second-order model not kept by the pass come from
    the blocks holding them, each computed once, written into the rows as read, one block
    at a time (``map_blocks(read_ahead=False)``, whose order is tested in
    tests/data/test_source.py: this read only copies columns, and reading ahead would
    hold the next block's computation beside them)."""
    import xarray as xr

    import bayesij.stats.amip as stats_amip

    _, _, post = _hierarchical(rng)
    matrix = post.log_lik.values
    computed = []
    source = as_source(xr.Dataset({"y": _lazy_chunks(matrix, computed)}))
    wanted = np.array([1, 3, 26, 27, 35])  # in blocks 0, 2 and 3

    class Kept:
        columns = {3: matrix[:, :, 3], 35: matrix[:, :, 35]}  # block 3's only unit kept

    asked = []

    def noted(*args, **options):
        asked.append(options.get("read_ahead", True))
        return map_blocks(*args, **options)

    monkeypatch.setattr(stats_amip, "map_blocks", noted)
    rows, finite = stats_amip._ranked_rows(source, wanted, Kept())
    columns = np.ascontiguousarray(matrix[:, :, wanted].reshape(4000, -1).T)
    np.testing.assert_array_equal(rows, columns - columns.mean(axis=1, keepdims=True))
    assert rows.dtype == np.float64 and finite.all()
    assert computed == [0, 2] and asked == [False]
    # Past the budget, held in float32: centred in float64, then rounded
    monkeypatch.setattr(stats_amip, "SINGLE_PRECISION_BYTES", 0)
    single, _ = stats_amip._ranked_rows(source, wanted, Kept())
    assert single.dtype == np.float32
    np.testing.assert_array_equal(single, rows.astype(np.float32))


def test_an_audit_leaves_nothing_of_its_own_in_reference_cycles(rng):
    # The second-order model's store (every question's rows) takes the screen's arrays,
    # not the screen, which holds the store: a cycle would keep the rows alive past the
    # audit until a garbage collection (a report calling audit repeatedly grew by them).
    import gc

    from bayesij.array import amip_curvature

    _, _, post = _hierarchical(rng)
    screened = []
    taken = amip_curvature.CentredColumns.screened_by

    def spy(store, screen):
        screened.append(taken(store, screen))
        return screened[-1]

    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore")
        patch.setattr(amip_curvature.CentredColumns, "screened_by", spy)
        gc.collect()
        enabled = gc.isenabled()
        gc.disable()
        try:
            found = bayesij.audit(
                post, quantities=["mu", "alpha[2]"], settings={"method": "reweighted"}
            )
            assert found.amip
            del found
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            cycled = [o for o in gc.garbage if type(o).__module__.startswith("bayesij")]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            if enabled:
                gc.enable()
    assert screened == [True]  # the store took the screen's coefficients
    assert not cycled
