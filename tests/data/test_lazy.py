"""Lazy log-likelihoods (a function evaluated block by block, dask-backed arrays, a netCDF
file opened with chunks, a dask.distributed cluster): the same PSIS-LOO and WAIC as the
in-memory matrix, with a peak memory of one block."""

import tracemalloc
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayesij

pytest.importorskip("dask")


def _normal(y_block, mu):
    return -0.5 * (y_block - mu) ** 2 - 0.5 * np.log(2 * np.pi)


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(4)
    y = rng.standard_t(5, size=3000)
    mu = rng.normal(y.mean(), 1 / np.sqrt(3000), size=(2000, 1))
    return y, mu, _normal(y, mu).reshape(4, 500, -1)


def _same(lazy, eager):
    np.testing.assert_array_equal(lazy.pointwise.index, eager.pointwise.index)
    first = lazy.pointwise.columns[0]  # elpd_loo or elpd_waic
    np.testing.assert_allclose(lazy.pointwise[first], eager.pointwise[first], rtol=1e-13)
    # The MCSE of a near-constant column cancels to ~1e-7: its rounding differs by 1e-12.
    np.testing.assert_allclose(lazy.pointwise, eager.pointwise, rtol=1e-12, atol=1e-10)


def test_a_log_likelihood_function_gives_the_in_memory_results(model):
    y, mu, matrix = model
    lazy = bayesij.loglik_function(_normal, y, mu, n_chains=4, block_size=700)
    _same(bayesij.loo(lazy), bayesij.loo(matrix))
    _same(bayesij.waic(lazy), bayesij.waic(matrix))
    r_eff = np.linspace(0.5, 1.0, y.size)  # sliced to each block
    _same(
        bayesij.loo(lazy, convention=bayesij.PsisOptions(r_eff=r_eff)),
        bayesij.loo(matrix, convention=bayesij.PsisOptions(r_eff=r_eff)),
    )
    # A DataFrame's index names the observations; a dict of columns is sliced by rows.
    frame = pd.DataFrame({"y": y}, index=[f"day {i}" for i in range(y.size)])
    named = bayesij.loo(
        bayesij.loglik_function(lambda d, m: _normal(d["y"].to_numpy(), m), frame, mu, n_chains=4)
    )
    assert named.pointwise.index[5] == "day 5"
    columns = bayesij.loo(
        bayesij.loglik_function(lambda d, m: _normal(d["y"], m), {"y": y}, mu, n_chains=4)
    )
    assert columns.elpd == pytest.approx(bayesij.loo(matrix).elpd, rel=1e-13)


def test_dask_backed_arrays_and_a_chunked_netcdf_file(model, tmp_path):
    y, mu, matrix = model
    eager = bayesij.loo(matrix)
    array = xr.DataArray(matrix, dims=("chain", "draw", "obs")).chunk({"obs": 800})
    _same(bayesij.loo(array), eager)
    _same(bayesij.waic(array), bayesij.waic(matrix))
    path = tmp_path / "log_lik.nc"
    xr.Dataset({"y": array.compute()}).to_netcdf(path)
    with xr.open_dataset(path, chunks={"obs": 1000}) as stored:
        assert hasattr(stored["y"].data, "dask")
        _same(bayesij.loo(stored), eager)
    import dask.array as da

    _same(bayesij.loo(da.from_array(matrix, chunks=(4, 500, 900))), eager)
    group = xr.Dataset({"y": array})
    if hasattr(xr, "DataTree"):  # ArviZ 1.x's container: a DataTree with lazy groups
        tree = xr.DataTree.from_dict({"log_likelihood": group})
        _same(bayesij.loo(tree), eager)
    from tests.helpers.peers import ARVIZ_1

    if not ARVIZ_1:  # ArviZ 0.23's InferenceData
        import arviz as az

        _same(bayesij.loo(az.InferenceData(log_likelihood=group)), eager)


def test_a_lazy_dataset_of_two_variables_reads_the_one_named(model, tmp_path):
    # A chunked file holding two log-likelihood variables: var_name picks the one read
    # lazily (the other's values not read), as in memory; none named is refused by name.
    y, mu, matrix = model
    path = tmp_path / "two.nc"
    dims = ("chain", "draw", "obs")
    xr.Dataset({"a": (dims, matrix - 1.0), "b": (dims, matrix)}).to_netcdf(path)
    with xr.open_dataset(path, chunks={"obs": 1000}) as stored:
        fit = bayesij.read(stored, var_name="b")
        assert fit.lazy and fit.kind == "Dataset"
        _same(bayesij.loo(fit), bayesij.loo(matrix))
        with pytest.raises(ValueError, match=r"^var_name: found None with variables"):
            bayesij.loo(stored)


def test_blocks_run_on_a_dask_cluster_with_the_local_results(model):
    distributed = pytest.importorskip("distributed")
    y, mu, matrix = model
    lazy = bayesij.loglik_function(_normal, y, mu, n_chains=4, block_size=1000)
    array = xr.DataArray(matrix, dims=("chain", "draw", "obs")).chunk({"obs": 1000})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cluster's start-up notices
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        )
        with cluster, distributed.Client(cluster) as client:
            on_cluster = bayesij.loo(lazy, client=client), bayesij.waic(array, client=client)
    _same(on_cluster[0], bayesij.loo(matrix))
    _same(on_cluster[1], bayesij.waic(matrix))


def test_influence_ij_covariance_and_linearity_of_a_lazy_log_likelihood(model):
    y, mu, matrix = model
    post = bayesij.from_arrays(mu.reshape(4, 500, 1), matrix, quantity_names=["mu"])
    eager = bayesij.influence(post)
    lazy = bayesij.loglik_function(_normal, y, mu, n_chains=4, block_size=600, names=["mu"])
    for scores in (
        bayesij.influence(lazy),
        bayesij.influence(
            xr.DataTree.from_dict(
                {
                    "posterior": xr.Dataset({"mu": (("chain", "draw"), mu.reshape(4, 500))}),
                    "log_likelihood": xr.Dataset(
                        {
                            "y": xr.DataArray(matrix, dims=("chain", "draw", "obs")).chunk(
                                {"obs": 700}
                            )
                        }
                    ),
                }
            )
        )
        if hasattr(xr, "DataTree")
        else bayesij.influence(lazy, quantities="mu"),
    ):
        np.testing.assert_allclose(scores["psi"], eager["psi"], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(scores["mcse"], eager["mcse"], rtol=1e-10, atol=1e-15)
    with pytest.raises(ValueError, match=r"groups: found groups with a lazy log-likelihood"):
        bayesij.influence(lazy, groups=np.arange(y.size) % 2)
    # The IJ covariance: the same running sums over blocks as over in-memory chunks.
    lazy_ij, eager_ij = bayesij.ij_covariance(lazy), bayesij.ij_covariance(post)
    for name in ("covariance", "covariance_corrected", "mcse_covariance", "posterior_covariance"):
        np.testing.assert_allclose(getattr(lazy_ij, name), getattr(eager_ij, name), rtol=1e-12)
    with pytest.raises(ValueError, match=r"check_linearity: found check_linearity with a lazy"):
        bayesij.ij_covariance(lazy, check_linearity=True)
    # The linearity check: per-unit linear and PSIS changes, joined over blocks.
    lazy_lin, eager_lin = bayesij.linearity(lazy), bayesij.linearity(post)
    np.testing.assert_allclose(lazy_lin.delta_is, eager_lin.delta_is, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lazy_lin.delta_lin, eager_lin.delta_lin, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lazy_lin.index, eager_lin.index, rtol=1e-12)
    assert lazy_lin.verdict.equals(eager_lin.verdict)
    with pytest.raises(ValueError, match=r"data: found a loglik_function without an \(S, D\)"):
        bayesij.influence(bayesij.loglik_function(lambda d: np.zeros((8, len(d))), y))


@pytest.mark.slow
def test_loo_of_200000_lazy_observations_keeps_one_block_in_memory():
    rng = np.random.default_rng(5)
    y = rng.normal(size=200_000)
    mu = rng.normal(y.mean(), 0.002, size=(400, 1))
    lazy = bayesij.loglik_function(_normal, y, mu, n_chains=4, block_size=5000)
    # Kernels loaded (from numba's cache, or compiled) before the trace: that is once per
    # process, tens of MB of Python objects, and not what a block costs.
    bayesij.loo(bayesij.loglik_function(_normal, y[:50], mu, n_chains=4, block_size=25))
    tracemalloc.start()
    result = bayesij.loo(lazy)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    matrix_bytes = 400 * y.size * 8  # 640 MB as float64
    assert peak < 0.15 * matrix_bytes, peak / 2**20
    eager = bayesij.loo(_normal(y, mu).reshape(4, 100, -1))
    _same(result, eager)


def test_lazy_arguments_are_checked(model):
    y, mu, _ = model
    lazy = bayesij.loglik_function(_normal, y, mu, n_chains=4)
    with pytest.raises(ValueError, match=r"groups: found groups with a lazy log-likelihood"):
        bayesij.loo(lazy, groups=np.arange(y.size) % 3)
    with pytest.raises(ValueError, match=r"save_psis: found save_psis with a lazy"):
        bayesij.loo(lazy, save_psis=True)
    with pytest.raises(ValueError, match=r"fn: found 2000 draws; expected a multiple of"):
        bayesij.loo(bayesij.loglik_function(_normal, y, mu, n_chains=3))
    with pytest.raises(ValueError, match=r"fn: found shape \(1, 2000, 1\) for 3000 observations"):
        bayesij.loo(bayesij.loglik_function(lambda d, m: _normal(d[:1], m), y, mu))
    with pytest.raises(ValueError, match=r"fn: found a int; expected a function"):
        bayesij.loglik_function(3, y)
    with pytest.raises(ValueError, match=r"client: found a str; expected a dask.distributed"):
        bayesij.loo(lazy, client="localhost")


def _amip_model():
    """A regression slope near zero whose sign a few observations decide."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=2000)
    y = 0.04 * x + rng.standard_t(3, size=2000)
    precision = x @ x
    slope = rng.normal((x @ y) / precision, 1 / np.sqrt(precision), size=(2000, 1))
    data = np.column_stack([x, y])
    return data, slope


def _regression(d, slope):
    return -0.5 * (d[:, 1] - slope * d[:, 0]) ** 2


def test_linear_amip_of_a_lazy_log_likelihood_equals_the_in_memory_one():
    data, slope = _amip_model()
    matrix = _regression(data, slope).reshape(4, 500, -1)
    post = bayesij.from_arrays(slope.reshape(4, 500, 1), matrix, quantity_names=["slope"])
    lazy = bayesij.loglik_function(
        _regression, data, slope, n_chains=4, block_size=300, names=["slope"]
    )
    groups = {
        "posterior": xr.Dataset({"slope": (("chain", "draw"), slope.reshape(4, 500))}),
        "log_likelihood": xr.Dataset(
            {"y": xr.DataArray(matrix, dims=("chain", "draw", "obs")).chunk({"obs": 700})}
        ),
    }
    from tests.helpers.peers import ARVIZ_1

    if ARVIZ_1:  # ArviZ 1.x: a DataTree with a lazy log_likelihood group
        container = xr.DataTree.from_dict(groups)
    else:  # ArviZ 0.23: InferenceData
        import arviz as az

        container = az.InferenceData(**groups)
    for target in ("sign", "significance", 0.01):
        eager = bayesij.amip(post, "slope", target, method="linear")
        for source in (lazy, container):
            found = bayesij.amip(source, "slope", target, method="linear")
            assert found.drop_ids == eager.drop_ids and found.stopped == eager.stopped
            assert found.n_units == eager.n_units == 2000
            np.testing.assert_allclose(found.predicted_change, eager.predicted_change, rtol=1e-10)
            np.testing.assert_allclose(found.predicted_mean, eager.predicted_mean, rtol=1e-10)
            np.testing.assert_allclose(found.curve["linear"], eager.curve["linear"], rtol=1e-10)
            assert found.monte_carlo.keys() == eager.monte_carlo.keys()
            for key in ("naive", "split", "mcse"):
                if key in eager.monte_carlo:
                    np.testing.assert_allclose(
                        found.monte_carlo[key], eager.monte_carlo[key], rtol=1e-10
                    )
    assert eager.drop_ids  # the target is within reach: a set was found
    blocks = []

    def counted(d, s):
        blocks.append(len(d))
        return _regression(d, s)

    counting = bayesij.loglik_function(counted, data, slope, n_chains=4, block_size=300)
    bayesij.amip(counting, "theta[1]", 0.01, method="linear")
    assert sorted(blocks) == sorted([1] + [300] * 6 + [200])  # its shape, then each block once
    with pytest.raises(ValueError, match=r"method: found 'reweighted' with a lazy"):
        bayesij.amip(lazy, "slope")
    with pytest.raises(ValueError, match=r"backend: found backend with a lazy"):
        bayesij.amip(lazy, "slope", method="linear", backend=object())


def test_a_dask_chunk_is_computed_in_the_reading_thread_unless_a_scheduler_is_configured():
    # The reader already has a thread of its own: dask's local pool would only add a hand-off
    # (and contend with the kernel's threads). A configured scheduler is respected.
    import threading

    import dask
    import dask.array as da
    import xarray as xr

    from bayesij.data.lazy import LazyArray

    threads = []

    def block():
        threads.append(threading.get_ident())
        return np.zeros((2, 5, 3))

    chunk = da.from_delayed(dask.delayed(block)(), shape=(2, 5, 3), dtype=float)
    reader = LazyArray(xr.DataArray(chunk, dims=("chain", "draw", "obs")))
    np.testing.assert_array_equal(reader.block(0, 3), np.zeros((2, 5, 3)))
    assert threads == [threading.get_ident()]
    with dask.config.set(scheduler="threads", num_workers=1):
        reader.block(0, 3)  # the local pool, named: still read here
    assert threads[-1] == threading.get_ident()
    with dask.config.set(scheduler="processes", num_workers=1):
        np.testing.assert_array_equal(reader.block(0, 3), np.zeros((2, 5, 3)))
    assert len(threads) == 2  # computed in the configured scheduler's process, not here


def test_a_dask_chunk_is_handed_over_without_dask_s_copy():
    # dask's compute copies a single chunk (its finalize); the reader takes the chunk as
    # the graph computed it (0.09 s of a 0.46 s read of a 320 MB chunk), and joins a block
    # that dask splits further (along the draws) into one array as usual.
    import dask
    import dask.array as da
    import xarray as xr

    from bayesij.data.lazy import LazyArray

    made = []

    def block(shift):
        made.append(np.arange(30.0).reshape(2, 5, 3) + shift)
        return made[-1]

    chunks = [
        da.from_delayed(dask.delayed(block)(10.0 * i), shape=(2, 5, 3), dtype=float)
        for i in range(2)
    ]
    reader = LazyArray(xr.DataArray(da.concatenate(chunks, axis=2), dims=("chain", "draw", "obs")))
    second = reader.block(3, 6)
    assert np.shares_memory(second, made[-1])
    np.testing.assert_array_equal(second, np.arange(30.0).reshape(2, 5, 3) + 10.0)
    split = xr.DataArray(
        da.from_array(np.arange(60.0).reshape(2, 5, 6), chunks=(2, 2, 3)),
        dims=("chain", "draw", "obs"),
    )
    np.testing.assert_array_equal(
        LazyArray(split).block(3, 6), np.arange(60.0).reshape(2, 5, 6)[:, :, 3:]
    )


def _stored_fit(tmp_path, order):
    """A DataTree file whose log_likelihood draws are the posterior's in the ``order``
    given."""
    rng = np.random.default_rng(12)
    y = rng.standard_t(4, size=40)
    mu = rng.normal(y.mean(), 0.2, size=(4, 200))
    log_lik = -0.5 * (y - mu[..., None]) ** 2
    posterior = xr.Dataset(
        {"mu": (("chain", "draw"), mu)}, coords={"chain": range(4), "draw": range(200)}
    )
    stored = xr.Dataset(
        {"y": (("chain", "draw", "obs"), log_lik)},
        coords={"chain": range(4), "draw": range(200), "obs": range(40)},
    ).isel(draw=order)  # the draws keep their labels in another order
    path = tmp_path / "fit.nc"
    xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": stored}).to_netcdf(path)
    return path


@pytest.mark.skipif(not hasattr(xr, "DataTree"), reason="xarray without DataTree")
def test_a_lazy_file_pairs_draws_by_label_as_in_memory(tmp_path):
    """Draws of the log_likelihood group in another order than the posterior's are paired
    by their labels, lazily as in memory; thinned or relabelled ones are refused alike."""
    order = np.random.default_rng(3).permutation(200)
    path = _stored_fit(tmp_path, order)
    with xr.open_datatree(path) as opened:
        eager = opened.load()
    with xr.open_datatree(path, chunks={}) as lazy:
        np.testing.assert_allclose(
            bayesij.influence(lazy)["psi"], bayesij.influence(eager)["psi"], rtol=1e-12, atol=0
        )
        lazy_audit = bayesij.audit(lazy, settings={"method": "linear"})
        eager_audit = bayesij.audit(eager, settings={"method": "linear"})
    for name, table in eager_audit.tables().items():
        pd.testing.assert_frame_equal(lazy_audit.tables()[name], table, rtol=1e-12)
    assert lazy_audit.summary() == eager_audit.summary()
    for labels, found in (
        (np.arange(0, 200, 2), r"log_likelihood draws \[0, 2, \.\.\., 198\]"),
        (np.arange(200) + 1000, r"log_likelihood draws \[1000, 1001, \.\.\., 1199\]"),
    ):
        rng = np.random.default_rng(12)
        y = rng.standard_t(4, size=40)
        mu = rng.normal(y.mean(), 0.2, size=(4, 200))
        tree = xr.DataTree.from_dict(
            {
                "posterior": xr.Dataset(
                    {"mu": (("chain", "draw"), mu)}, coords={"draw": range(200)}
                ),
                "log_likelihood": xr.Dataset(
                    {"y": (("chain", "draw", "obs"), -0.5 * (y - mu[..., None]) ** 2)},
                    coords={"draw": range(200)},
                )
                .isel(draw=slice(0, len(labels)))
                .assign_coords(draw=labels),
            }
        )
        bad = tmp_path / f"bad{labels[1]}.nc"
        tree.to_netcdf(bad)
        for chunks in (None, {}):
            with xr.open_datatree(bad, chunks=chunks) as opened:
                with pytest.raises(ValueError, match=r"idata: found " + found):
                    bayesij.influence(opened)


def test_a_lazy_log_likelihood_of_complex_or_boolean_values_is_refused_before_reading():
    da = pytest.importorskip("dask.array")
    for values, found in (
        (np.ones((2, 10, 5)) + 1j, "complex values"),
        (np.ones((2, 10, 5), dtype=bool), "values of type bool"),
    ):
        with pytest.raises(ValueError, match=r"found " + found + "; expected real numbers"):
            bayesij.loo(values)
        with pytest.raises(ValueError, match=r"found " + found + "; expected real numbers"):
            bayesij.loo(da.from_array(values, chunks=(2, 10, 2)))
