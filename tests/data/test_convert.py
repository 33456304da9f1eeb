"""The one door: every input form gives the same container, the matrix is checked once per
public call and not copied when it is already float64 in (chain, draw, obs) layout, and
results do not keep the draws x observations matrix alive."""

import gc
import sys
import tracemalloc
import warnings

import numpy as np
import pytest
import xarray as xr

import bayesij
from bayesij.data.convert import as_posterior


def _counting_checks(monkeypatch):
    """Count calls of the log-likelihood value check, wherever it was imported."""
    from bayesij.array import checks

    calls = []
    original = checks.check_log_lik_values

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if (
            getattr(module, "__name__", "").startswith("bayesij")
            and getattr(module, "check_log_lik_values", None) is original
        ):
            monkeypatch.setattr(module, "check_log_lik_values", counted)
    return calls


@pytest.fixture
def log_lik(rng):
    return rng.normal(-1.0, 0.3, size=(4, 250, 30))


@pytest.mark.parametrize(
    "call",
    [
        lambda l: bayesij.loo(l),
        lambda l: bayesij.loo(l[0]),
        lambda l: bayesij.waic(l),
        lambda l: bayesij.loo_pit(l, np.zeros(30), np.zeros_like(l)),
        lambda l: bayesij.generating_function(l, 0.5),
    ],
    ids=["loo-3d", "loo-2d", "waic", "loo_pit", "generating_function"],
)
def test_the_matrix_is_checked_once_per_call(call, log_lik, monkeypatch):
    calls = _counting_checks(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call(log_lik)
    assert len(calls) == 1


def test_a_container_is_checked_when_built_and_trusted_after(log_lik, monkeypatch):
    post = bayesij.from_arrays(np.zeros((4, 250, 1)) + np.arange(250)[:, None], log_lik)
    calls = _counting_checks(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bayesij.loo(post)
        bayesij.waic(post)
        bayesij.ij_covariance(post, check_linearity=True)
        bayesij.amip(post, "f[1]")
        bayesij.audit(post)
    assert calls == []


def test_float64_chain_layout_is_not_copied(log_lik):
    assert np.shares_memory(as_posterior(log_lik).log_lik.values, log_lik)
    single = log_lik[0]
    assert np.shares_memory(as_posterior(single).log_lik.values, single)
    post = bayesij.from_arrays(np.ones((4, 250, 1)) * np.arange(250)[:, None], log_lik)
    values, _ = post.units()
    assert np.shares_memory(values, log_lik)


def test_a_fit_s_log_likelihood_is_read_without_a_copy_and_left_writeable(log_lik):
    """A DataTree's (or InferenceData's) one log-likelihood variable is the fit's matrix
    itself (a copy doubled the peak memory of every audit of a saved fit), and the
    caller's arrays stay as writeable as they were."""
    draws = np.arange(1000.0).reshape(4, 250)
    tree = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"mu": (("chain", "draw"), draws)}),
            "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), log_lik)}),
        }
    )
    from bayesij.data.fit import read

    fit = read(tree)
    assert np.shares_memory(fit.log_lik_source().matrix(), log_lik)
    assert np.shares_memory(fit.source(need_quantities=True).matrix(), log_lik)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = bayesij.loo(log_lik.copy()).pointwise
        np.testing.assert_array_equal(bayesij.loo(tree).pointwise.values, expected.values)
    assert log_lik.flags.writeable and tree["log_likelihood"]["y"].values.flags.writeable
    two = tree.copy()
    y = tree["log_likelihood"]["y"]
    two["log_likelihood"] = xr.Dataset({"y": y, "z": y})
    both = read(two, var_name=["y", "z"]).log_lik_source().matrix()
    assert both.shape[-1] == 2 * log_lik.shape[-1]  # two variables: concatenated


def test_every_input_form_gives_the_same_log_lik(log_lik):
    data_array = xr.DataArray(log_lik, dims=("chain", "draw", "y_dim_0"))
    for form in (log_lik, data_array, data_array.to_dataset(name="y")):
        np.testing.assert_array_equal(as_posterior(form).log_lik.values, log_lik)
    tree = xr.DataTree.from_dict({"log_likelihood": xr.Dataset({"y": data_array})})
    np.testing.assert_array_equal(as_posterior(tree).log_lik.values, log_lik)


def test_inputs_without_quantities_are_refused_where_quantities_are_needed(log_lik):
    with pytest.raises(ValueError, match="data: found no posterior draws of quantities"):
        bayesij.influence(log_lik)
    with pytest.raises(ValueError, match=r"data: found the path 'fit.nc'; expected"):
        bayesij.loo("fit.nc")


def _held_after_del(make):
    """Bytes still allocated after the input is deleted and only the result kept."""
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    result = make()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()
    return result, held


@pytest.mark.parametrize("estimator", ["waic", "amip", "loo", "audit"])
def test_results_do_not_hold_the_matrix(estimator):
    n_chains, n_draws, n_obs = 4, 500, 2000  # matrix of 32 MB
    matrix_bytes = n_chains * n_draws * n_obs * 8

    def make():
        rng = np.random.default_rng(0)
        theta = rng.normal(size=(n_chains, n_draws, 1)) * 0.05 + 0.3
        y = rng.normal(size=n_obs)
        log_lik = -0.5 * (y - theta) ** 2
        post = bayesij.from_arrays(theta, log_lik)
        del log_lik
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if estimator == "waic":
                return bayesij.waic(post)
            if estimator == "loo":
                return bayesij.loo(post)
            if estimator == "audit":
                return bayesij.audit(post, settings={"targets": ("sign",)})
            return bayesij.amip(post, "f[1]", target="sign")

    result, held = _held_after_del(make)
    assert result is not None
    assert held < 0.05 * matrix_bytes, f"{held / matrix_bytes:.1%} of the matrix held"


def _peak_bytes(call) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        call()
    except ValueError:
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.mark.parametrize("estimator", ["linearity", "kfold"])
def test_checks_for_minus_inf_need_no_matrix_sized_mask(estimator):
    n_chains, n_draws, n_obs = 4, 500, 8000  # matrix of 128 MB; a boolean mask is 16 MB
    log_lik = np.zeros((n_chains, n_draws, n_obs))
    log_lik[0, 0, 7] = -np.inf
    draws = np.random.default_rng(1).normal(size=(n_chains, n_draws, 1))
    post = bayesij.from_arrays(draws, log_lik)
    if estimator == "linearity":
        peak = _peak_bytes(lambda: bayesij.linearity(post))
    else:
        from bayesij.array.kfold import fold_elpd

        peak = _peak_bytes(lambda: fold_elpd(log_lik, np.arange(n_obs) % 4, check=False))
    assert peak < log_lik.nbytes / 16, (
        f"{peak / 2**20:.1f} MiB for a {log_lik.nbytes / 2**20:.0f} MiB matrix"
    )


def test_float32_log_lik_is_read_in_float64_chunks_with_float64_results():
    rng = np.random.default_rng(3)
    theta = rng.normal(size=(4, 200, 2)) * 0.1
    y = rng.normal(size=300)
    log_lik = (-0.5 * (y - theta[..., :1]) ** 2 - 0.9).astype(np.float32)
    single = bayesij.from_arrays(theta, log_lik)
    double = bayesij.from_arrays(theta, log_lik.astype(np.float64))
    assert single.log_lik.dtype == np.float32, "kept as given: no float64 copy"
    folds = np.arange(300) % 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, compute in {
            "loo": lambda p: bayesij.loo(p).pointwise,
            "loo ij": lambda p: bayesij.loo(p, method="ij").pointwise,
            "loo cumulant": lambda p: bayesij.loo(p, method="cumulant").pointwise,
            "waic": lambda p: bayesij.waic(p).pointwise,
            "influence": lambda p: bayesij.influence(p).to_array().values,
            "ij": lambda p: bayesij.ij_covariance(p).table(),
            "linearity": lambda p: bayesij.linearity(p).delta_is,
            "amip": lambda p: bayesij.amip(p, "f[1]").curve.select_dtypes("number"),
            "dic": lambda p: bayesij.dic(p).p_d,
            "expectation": lambda p: bayesij.loo_expectation(p, double.log_lik.values),
            "grouped loo": lambda p: bayesij.loo(p, groups=folds).pointwise,
            "kfold": lambda p: bayesij.array.kfold.fold_elpd(p.log_lik.values, folds).psis,
        }.items():
            np.testing.assert_allclose(
                np.asarray(compute(single), dtype=float),
                np.asarray(compute(double), dtype=float),
                rtol=1e-12,
                atol=1e-12,
                err_msg=name,
            )


def test_loo_of_float32_needs_no_float64_copy_of_the_matrix():
    log_lik = np.full((4, 500, 16000), -1.0, dtype=np.float32)  # 128 MB; float64: 256 MB
    log_lik += np.random.default_rng(0).normal(size=(4, 500, 1)).astype(np.float32) * 0.1
    post = bayesij.from_arrays(np.zeros((4, 500, 1)), log_lik)
    peak = _peak_bytes(lambda: bayesij.loo(post))  # working buffers only, about 100 MB
    assert peak < log_lik.nbytes, f"{peak / 2**20:.0f} MiB"
