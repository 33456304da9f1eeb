"""The one source door: every public estimator that takes ``data`` gives the same numbers
(1e-12) on a matrix in memory, a dask-backed log-likelihood and a log-likelihood function,
or refuses a lazy log-likelihood with the one message of ``bayesij.data.source``. A new
public estimator missing from the tables below fails :func:`test_every_estimator_is_listed`.
"""

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayesij
from bayesij.data.fit import as_source
from bayesij.data.source import join_blocks, map_blocks

pytest.importorskip("dask")

N_CHAINS, N_DRAWS, N_OBS = 4, 250, 600


def _normal(frame, theta):
    """Log-likelihood of y ~ normal(a + b x, 1) at (S, 2) draws of (a, b): (S, b)."""
    mean = theta[:, :1] + theta[:, 1:2] * np.asarray(frame["x"])[None, :]
    return -0.5 * (np.asarray(frame["y"])[None, :] - mean) ** 2 - 0.5 * np.log(2 * np.pi)


@pytest.fixture(scope="module")
def inputs():
    """The same log-likelihood as a Posterior, a container whose log_likelihood group is
    dask-backed (chunks of 200 observations), and a function (blocks of 150)."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=N_OBS)
    y = 0.3 + 0.5 * x + rng.standard_t(4, size=N_OBS)
    frame = pd.DataFrame({"x": x, "y": y})
    theta = np.array([0.3, 0.5]) + rng.normal(size=(N_CHAINS * N_DRAWS, 2)) / np.sqrt(N_OBS)
    matrix = _normal(frame, theta).reshape(N_CHAINS, N_DRAWS, N_OBS)
    draws = theta.reshape(N_CHAINS, N_DRAWS, 2)
    memory = bayesij.from_arrays(draws, matrix, quantity_names=["a", "b"])
    posterior = xr.Dataset(
        {"a": (("chain", "draw"), draws[..., 0]), "b": (("chain", "draw"), draws[..., 1])}
    )
    log_lik = xr.Dataset({"y": (("chain", "draw", "obs"), matrix)}).chunk({"obs": 200})
    function = bayesij.loglik_function(
        _normal, frame, theta, n_chains=N_CHAINS, block_size=150, names=["a", "b"]
    )
    return {"memory": memory, "dask": _container(posterior, log_lik), "function": function}


def _container(posterior: xr.Dataset, log_lik: xr.Dataset):
    if hasattr(xr, "DataTree"):
        return xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": log_lik})
    import arviz as az

    return az.InferenceData(posterior=posterior, log_likelihood=log_lik)


def _numbers(value) -> list:
    """Every number a result reports, for comparison."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return [value.to_numpy(dtype=float)]
    if isinstance(value, xr.Dataset):
        return [value[name].values for name in sorted(value.data_vars)]
    if isinstance(value, float):
        return [np.array(value)]
    if hasattr(value, "pointwise"):  # an ELPD result
        return _numbers(value.pointwise) + [np.array([value.elpd, value.se])]
    raise TypeError(type(value))


#: Estimators that run block by block: name -> call(data) -> what to compare.
BLOCKWISE = {
    "loo": lambda d: bayesij.loo(d),
    "loo (ij)": lambda d: bayesij.loo(
        d, method="ij", convention=bayesij.PsisOptions(r_eff=np.linspace(0.5, 1.0, N_OBS))
    ),
    "loo (cumulant)": lambda d: bayesij.loo(d, method="cumulant"),
    "waic": lambda d: bayesij.waic(d, beta=0.8),
    "generating_function": lambda d: bayesij.generating_function(d, 0.5),
    "holdout": lambda d: bayesij.holdout(d),
    "influence": lambda d: bayesij.influence(d, quantities="b"),
    "ij_covariance": lambda d: [
        bayesij.ij_covariance(d, n_boot=20).covariance,
        bayesij.ij_covariance(d, n_boot=20).mcse_covariance,
    ],
    "linearity": lambda d: [
        bayesij.linearity(d, quantities="a").delta_is,
        bayesij.linearity(d, quantities="a").delta_lin,
    ],
    "amip": lambda d: bayesij.amip(d, "b", "significance", method="linear").curve,
    "loo_subsample": lambda d: bayesij.loo_subsample(d, 150, seed=3),
    "loo_i": lambda d: bayesij.loo_i(d, 3).pointwise,  # one column read
    "audit": lambda d: _audit_numbers(bayesij.audit(d, settings={"method": "linear"})),
}


def _audit_numbers(result) -> list:
    """What an audit reports, for comparison: IJ, LOO, linearity, WAIC and AMIP curves."""
    curves = [r.curve[["n_drop", "linear"]] for r in result.amip.values()]
    return [
        result.ij.covariance,
        result.ij.mcse_covariance,
        result.loo,
        result.ij.linearity.delta_is,
        result.waic.pointwise,
        *curves,
    ]


#: Estimators that need the whole matrix in memory: name -> call(data).
WHOLE_MATRIX = {
    "dic": lambda d: bayesij.dic(d),
    "psense": lambda d: bayesij.psense(d, log_prior=np.zeros((N_CHAINS, N_DRAWS))),
    "psense_sequence": lambda d: bayesij.psense_sequence(
        d, log_prior=np.zeros((N_CHAINS, N_DRAWS))
    ),
    "power_scaled_draws": lambda d: bayesij.power_scaled_draws(
        d, log_prior=np.zeros((N_CHAINS, N_DRAWS))
    ),
    "loo_moment_match": lambda d: bayesij.loo_moment_match(d, object()),
    "loo_integrated": lambda d: bayesij.loo_integrated(d, object()),
    "lfo": lambda d: bayesij.lfo(d, min_train=500),
    "loo_expectation": lambda d: bayesij.loo_expectation(d, np.zeros((N_CHAINS, N_DRAWS, 1))),
    "loo_pit": lambda d: bayesij.loo_pit(d, np.zeros(N_OBS), np.zeros((4, 250, N_OBS))),
    "loo_score": lambda d: bayesij.loo_score(d, np.zeros(N_OBS), np.zeros((4, 250, N_OBS))),
    "loo_metrics": lambda d: bayesij.loo_metrics(d, np.zeros(N_OBS), np.zeros((4, 250, N_OBS))),
    "loo_calibration": lambda d: bayesij.loo_calibration(
        d, (np.arange(N_OBS) % 2).astype(float), np.zeros((4, 250, N_OBS)), n_bootstrap=20
    ),
    "loo_r2": lambda d: bayesij.loo_r2(d, np.zeros(N_OBS), np.zeros((4, 250, N_OBS))),
    "loo_weighted": lambda d: bayesij.loo_weighted(d, np.ones(N_OBS)),
    "loo_approximate_posterior": lambda d: bayesij.loo_approximate_posterior(
        d, np.zeros(N_CHAINS * N_DRAWS), np.zeros(N_CHAINS * N_DRAWS)
    ),
    "loo_mixture": lambda d: bayesij.loo_mixture(d),
    "loo_influence": lambda d: bayesij.loo_influence(d, group="posterior"),
}

#: Functions of posterior draws alone: no log-likelihood goes through the source door.
DRAWS_ONLY = {"pareto_khat", "pareto_smooth", "bayesian_r2", "residual_r2", "convergence"}

#: Options of block-wise estimators that need the whole matrix: (call, refused argument).
WHOLE_MATRIX_OPTIONS = [
    (lambda d: bayesij.loo(d, save_psis=True), "save_psis"),
    (lambda d: bayesij.waic(d, groups=np.arange(N_OBS) // 2), "groups"),
    (lambda d: bayesij.amip(d, "b", method="reweighted"), "method"),
    (lambda d: bayesij.ij_covariance(d, check_linearity=True), "check_linearity"),
    (lambda d: bayesij.audit(d, settings={"method": "reweighted"}), "method"),
    (lambda d: bayesij.audit(d, log_prior=np.zeros((N_CHAINS, N_DRAWS))), "log_prior"),
]


def _call(call, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = call(data)
    return [n for part in (out if isinstance(out, list) else [out]) for n in _numbers(part)]


@pytest.mark.parametrize("name", sorted(BLOCKWISE))
def test_blockwise_estimators_agree_on_every_source(inputs, name):
    reference = _call(BLOCKWISE[name], inputs["memory"])
    for kind in ("dask", "function"):
        got = _call(BLOCKWISE[name], inputs[kind])
        assert len(got) == len(reference)
        for a, b in zip(got, reference, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"{name}, {kind}")


@pytest.mark.parametrize("name", sorted(WHOLE_MATRIX))
def test_whole_matrix_estimators_refuse_a_lazy_source_in_one_way(inputs, name):
    for kind in ("dask", "function"):
        with pytest.raises(ValueError, match=r"^data: found a lazy log-likelihood for .* needs "):
            WHOLE_MATRIX[name](inputs[kind])


@pytest.mark.parametrize("case", range(len(WHOLE_MATRIX_OPTIONS)))
def test_whole_matrix_options_are_refused_by_name(inputs, case):
    call, argument = WHOLE_MATRIX_OPTIONS[case]
    with pytest.raises(ValueError, match=rf"^{argument}: found .* with a lazy log-likelihood"):
        call(inputs["function"])


def test_every_estimator_is_listed():
    """Every public function whose first parameter is ``data`` is in one of the tables."""
    listed = {name.split(" ")[0] for name in (*BLOCKWISE, *WHOLE_MATRIX, *DRAWS_ONLY)}
    takes_data = {
        name
        for name in bayesij.__all__
        if inspect.isfunction(getattr(bayesij, name))
        and next(iter(inspect.signature(getattr(bayesij, name)).parameters)) == "data"
        and name not in ("as_posterior", "read")
    }
    assert takes_data == listed


def test_a_source_knows_its_shape_chains_units_and_blocks(inputs):
    memory = as_source(inputs["memory"])
    dask = as_source(inputs["dask"], quantities="b")
    function = as_source(inputs["function"])
    for source in (memory, dask, function):
        assert source.shape == (N_CHAINS, N_DRAWS) and source.n_units == N_OBS
    assert memory.bounds() == [(0, N_OBS)] and not memory.lazy
    assert dask.bounds() == [(0, 200), (200, 400), (400, 600)] and dask.lazy  # dask chunks
    assert function.bounds()[1] == (150, 300)
    assert dask.quantity_names == ("b",) and dask.quantity_draws.shape == (4, 250, 1)
    np.testing.assert_array_equal(function.block(100, 400), memory.block(0, N_OBS)[..., 100:400])
    np.testing.assert_array_equal(dask.rows([5, 3]), memory.rows([5, 3]))


def test_groups_sum_the_units_of_an_in_memory_source(inputs):
    groups = np.arange(N_OBS) % 7
    source = as_source(inputs["memory"], groups=groups)
    assert source.units.dims == ("group",) and source.n_units == 7
    values = inputs["memory"].log_lik.values
    np.testing.assert_allclose(source.block(0, 7)[..., 3], values[..., groups == 3].sum(axis=2))


def test_map_blocks_cuts_per_unit_arguments_and_joins_on_the_last_axis(inputs):
    source = as_source(inputs["function"])
    seen = []

    def kernel(block, weight=None):
        seen.append(weight.size)
        return np.vstack([block.mean(axis=(0, 1)), weight])

    weights = np.arange(N_OBS, dtype=float)
    out = map_blocks(source, kernel, per_unit={"weight": weights})
    assert seen == [150, 150, 150, 150]
    np.testing.assert_array_equal(out[1], weights)
    memory = inputs["memory"].log_lik.values
    np.testing.assert_allclose(out[0], memory.mean(axis=(0, 1)), rtol=1e-13)
    parts = [{"x": bayesij.array.InfluenceScores(np.ones((2, 3)), None)}] * 2
    assert join_blocks(parts)["x"].psi.shape == (2, 6)
    # only some blocks, in the order asked for (the AMIP's second read of the sets' blocks)
    seen.clear()
    some = map_blocks(source, kernel, per_unit={"weight": weights}, join=False, blocks=[2, 0])
    np.testing.assert_array_equal(some[0][1], weights[300:450])
    np.testing.assert_array_equal(some[1][1], weights[:150])
    assert seen == [150, 150] and map_blocks(source, kernel, blocks=[]) == []


def test_a_lazy_value_error_is_found_in_the_block_that_holds_it(inputs):
    frame = inputs["function"].data.copy()
    frame.loc[400, "y"] = np.nan
    broken = bayesij.loglik_function(_normal, frame, inputs["function"].draws, n_chains=4)
    with pytest.raises(ValueError, match=r"^log_lik: found 1000 NaN value"):
        bayesij.loo(broken)


def test_joining_blocks_lets_go_of_each_block_as_it_is_copied():
    # The audit's per-unit results of 10^6 units are ~10 GB: the join must never hold them
    # twice. Arrays, NamedTuples, tuples (the AMIP block sums split by goal) and dicts are
    # joined along the units; each block's array is let go once copied.
    import tracemalloc
    import weakref

    from bayesij.array import InfluenceScores

    rng = np.random.default_rng(0)
    width, n_blocks, goals = 2000, 4, 4

    def block():
        sums = tuple(rng.normal(size=(50, 1, width)) for _ in range(goals))  # 0.8 MB each
        return {"all": InfluenceScores(rng.normal(size=(goals, width)), None, sums)}

    tracemalloc.start()
    parts = [block() for _ in range(n_blocks)]
    expected = [
        np.concatenate([part["all"].block_sums[g] for part in parts], axis=-1) for g in range(goals)
    ]
    psi = np.concatenate([part["all"].psi for part in parts], axis=-1)
    pieces = [weakref.ref(part["all"].block_sums[0]) for part in parts]
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    joined = join_blocks(parts)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert parts == [None] * n_blocks and all(piece() is None for piece in pieces)
    np.testing.assert_array_equal(joined["all"].psi, psi)
    for g in range(goals):
        np.testing.assert_array_equal(joined["all"].block_sums[g], expected[g])
    assert joined["all"].mcse is None
    blocks_bytes = n_blocks * goals * 50 * width * 8
    # Held at most: the blocks, plus one goal's joined sums (not the blocks twice over).
    assert peak - held < blocks_bytes / goals + 2**20


def _logged_source(events: list):
    """A log-likelihood function source (N_OBS units, blocks of 150) that logs each block
    it computes, ``("read", first unit)``, and the blocks it gave out (weak references)."""
    import weakref

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"x": rng.normal(size=N_OBS), "y": rng.normal(size=N_OBS)})
    theta = rng.normal(size=(N_CHAINS * N_DRAWS, 2)) / 10
    function = bayesij.loglik_function(_normal, frame, theta, n_chains=N_CHAINS, block_size=150)
    source = as_source(function)
    original, given = source.reader.block, []

    def block(start, stop):
        events.append(("read", start, [ref() is not None for ref in given]))
        out = original(start, stop)
        given.append(weakref.ref(out))
        return out

    source.reader.block = block
    return source


@pytest.mark.parametrize("case", ["ahead", "asked not to", "blocks too large"])
def test_the_next_block_is_read_ahead_unless_asked_not_to(case, monkeypatch):
    # Reading ahead holds a second block, and what computing it takes, beside the first:
    # a kernel that only copies some columns (the AMIP's second read) reads one block at a
    # time, each let go (the reader's future does not hold it) before the next is read; so
    # is a source whose blocks are larger than READ_AHEAD_BYTES (a user's large chunks).
    import threading

    import bayesij.data.source as source_module

    events: list = []
    source = _logged_source(events)
    if case == "blocks too large":
        monkeypatch.setattr(source_module, "READ_AHEAD_BYTES", 8 * source.n_draws * 150 - 1)
    else:  # the test's blocks of 150 units are within it
        assert 8 * source.n_draws * 150 <= source_module.READ_AHEAD_BYTES
    read_ahead = case == "ahead"
    next_read = threading.Event()

    def kernel(block, positions=None):
        if read_ahead and positions[-1] + 1 < N_OBS:
            assert next_read.wait(10)  # the next block is read while this one is computed
            next_read.clear()
        events.append(("kernel", int(positions[0])))
        return positions

    logged = source.reader.block

    def noting(start, stop):
        out = logged(start, stop)
        if start:
            next_read.set()
        return out

    source.reader.block = noting
    per_unit = {"positions": np.arange(N_OBS)}
    out = map_blocks(
        source, kernel, per_unit=per_unit, join=False, read_ahead=case != "asked not to"
    )
    np.testing.assert_array_equal(np.concatenate(out), np.arange(N_OBS))
    reads = [e for e in events if e[0] == "read"]
    assert [e[1] for e in reads] == [0, 150, 300, 450]
    if not read_ahead:
        order = [(e[0], e[1]) for e in events]
        assert order == [(what, s) for s in (0, 150, 300, 450) for what in ("read", "kernel")]
        assert not any(any(alive) for _, _, alive in reads)  # the previous blocks let go


def test_a_source_s_relative_efficiency_follows_each_peer_s_rule(inputs):
    """The split rule is ArviZ's relative ESS of the mean of exp(l_n - max) over split
    chains (R loo's from 2.9, ``posterior::ess_basic``), block by block on a lazy source as
    in memory; the posterior rule ArviZ's one number (the mean relative ESS of every
    posterior element); the chains rule is left to the kernels; a given one is checked."""
    az = pytest.importorskip("arviz")
    memory, dask = as_source(inputs["memory"]), as_source(inputs["dask"])
    values = inputs["memory"].log_lik.values
    likelihood = np.exp(values - values.max(axis=(0, 1), keepdims=True))
    ess = az.ess(az.convert_to_dataset(likelihood[..., None]), method="mean", relative=True)
    expected = np.asarray(ess["x"].values).reshape(-1)
    np.testing.assert_allclose(memory.relative_eff("split"), expected, rtol=1e-8)
    np.testing.assert_allclose(dask.relative_eff("split"), memory.relative_eff("split"))
    draws = inputs["memory"].quantities.values
    per_element = az.ess(az.convert_to_dataset(draws), method="mean", relative=True)
    posterior = float(np.mean(np.asarray(per_element["x"].values)))
    assert memory.relative_eff("posterior") == pytest.approx(posterior, rel=1e-8)
    assert memory.relative_eff("chains") is None
    np.testing.assert_array_equal(memory.relative_eff("split", given=0.5), np.full(N_OBS, 0.5))
    with pytest.raises(ValueError, match=r"^r_eff: found shape \(3,\); expected a finite"):
        memory.relative_eff("chains", given=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match=r"^convention: found 'ArviZ 0.23' with a lazy"):
        as_source(inputs["function"]).relative_eff("posterior", "ArviZ 0.23")
