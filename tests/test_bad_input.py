"""Every public entry point rejects the bad inputs of docs/architecture.md ("Bad input")
with one template.

The message names the argument, what was found and what was expected.
"""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesij
from bayesij import array


def _draws(rng, n_draws=40, n_obs=5):
    return rng.normal(size=(n_draws, 2)), rng.normal(size=(n_draws, n_obs))


def _with(values, index, value):
    values = values.copy()
    values[index] = value
    return values


BAD_DRAWS = {
    "nan in log_lik": (
        lambda f, l: (f, _with(l, (3, 1), np.nan)),
        r"log_lik: found 1 NaN value\(s\) \(first at draw 3, column 1\); "
        r"expected finite values within ±1e\+30, or -inf",
    ),
    "+inf in log_lik": (
        lambda f, l: (f, _with(l, (0, 4), np.inf)),
        r"log_lik: found 1 \+inf value\(s\) .*; expected finite values within ±1e\+30, or -inf",
    ),
    "mismatched draws": (
        lambda f, l: (f, l[:30]),
        r"log_lik: found 30 draws while quantities has 40; expected the same",
    ),
    "single draw": (
        lambda f, l: (f[:1], l[:1]),
        r"quantities: found 1 draw; expected at least 2 posterior draws",
    ),
    "nan in quantities": (
        lambda f, l: (_with(f, (2, 0), np.nan), l),
        r"quantities: found 1 non-finite value\(s\)",
    ),
    "1e300 in log_lik": (
        lambda f, l: (f, _with(l, (2, 2), -1e300)),
        r"log_lik: found 1 value\(s\) beyond ±1e\+30 \(first at draw 2, column 2\); "
        r"expected finite values within ±1e\+30, or -inf. A log density this large",
    ),
    "-inf in quantities": (
        lambda f, l: (_with(f, (4, 0), -np.inf), l),
        r"quantities: found 1 non-finite value\(s\)",
    ),
    "1e300 in quantities": (
        lambda f, l: (_with(f, (5, 1), 1e300), l),
        r"quantities: found 1 value\(s\) beyond ±1e\+40 .*Rescale them",
    ),
    "1-D log_lik": (
        lambda f, l: (f, l[:, 0]),
        r"log_lik: found an array with 1 dimensions, shape \(40,\)",
    ),
}


@pytest.mark.parametrize(
    "function",
    [array.influence_scores, array.ij_covariance],
    ids=["influence_scores", "ij_covariance"],
)
@pytest.mark.parametrize("case", sorted(BAD_DRAWS))
def test_array_layer_rejects(function, case, rng):
    change, message = BAD_DRAWS[case]
    f, l = change(*_draws(rng))
    with pytest.raises(ValueError, match=message):
        function(f, l)


@pytest.mark.parametrize("case", sorted(set(BAD_DRAWS) - {"single draw", "mismatched draws"}))
def test_container_rejects(case, rng):
    change, message = BAD_DRAWS[case]
    f, l = change(*_draws(rng))
    with pytest.raises(ValueError, match=message):
        bayesij.from_arrays(f, l)


def test_container_rejects_mismatched_and_single_draws(rng):
    f, l = _draws(rng)
    with pytest.raises(ValueError, match=r"log_lik: found 1 chains x 30 draws while quantities"):
        bayesij.from_arrays(f, l[:30])
    with pytest.raises(ValueError, match=r"quantities: found a single draw"):
        bayesij.from_arrays(f[:1], l[:1])


@pytest.mark.parametrize(
    "function", [bayesij.influence, bayesij.ij_covariance], ids=["influence", "ij_covariance"]
)
def test_labelled_functions_reject_bad_groups_and_names(function, rng):
    post = bayesij.from_arrays(*_draws(rng), quantity_names=["a", "b"])
    with pytest.raises(ValueError, match=r"groups: found shape \(4,\); expected one label"):
        function(post, groups=[0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"groups: found no group for 2 of 5 observation"):
        function(post, groups={0: "x", 1: "x", 2: "y"})
    with pytest.raises(ValueError, match=r"quantities: found the unknown name 'c'; expected"):
        function(post, quantities=["a", "c"])


def test_chain_ids_checked(rng):
    f, l = _draws(rng)
    with pytest.raises(ValueError, match=r"chain_ids: found shape \(3,\); expected one chain id"):
        array.influence_scores(f, l, chain_ids=[0, 1, 2])
    with pytest.raises(ValueError, match=r"chain_ids: found chain ids together with 3-D input"):
        array.influence_scores(f[None], l[None], chain_ids=np.zeros(40))


def test_checks_report_the_right_position_when_working_in_pieces(monkeypatch):
    from bayesij.array import checks as _checks

    slices = _checks.column_slices
    monkeypatch.setattr(_checks, "column_slices", lambda shape: slices(shape, max_items=30))
    assert len(_checks.column_slices((10, 100))) == 34
    log_lik = np.zeros((10, 100))
    log_lik[7, 95] = np.nan
    log_lik[2, 96] = np.nan
    with pytest.raises(ValueError, match=r"found 2 NaN value\(s\) \(first at draw 7, column 95\)"):
        _checks.check_log_lik_values(log_lik)
    log_lik[:] = 0
    log_lik[4, 50] = -np.inf
    assert np.flatnonzero(_checks.impossible_columns(log_lik)).tolist() == [50]


@pytest.mark.parametrize(
    "r_eff, found",
    [
        (np.ones(3), r"shape \(3,\)"),
        (np.ones((5, 1)), r"shape \(5, 1\)"),
        ("0.9", r"'0.9'"),
        (0.0, "values that are not finite and positive"),
        (np.nan, "values that are not finite and positive"),
        (-1.0, "values that are not finite and positive"),
        ([0.9, 0.9, 0.9, 0.9, 1j], "values of type complex128"),
    ],
)
def test_r_eff_is_checked_everywhere(r_eff, found, rng):
    f, l = _draws(rng)
    post = bayesij.from_arrays(f, l)
    expected = r"r_eff: found " + found + r"; expected a finite positive number, or one per unit"
    for call in (
        lambda: bayesij.loo(post, convention=bayesij.PsisOptions(r_eff=r_eff)),
        lambda: bayesij.linearity(post, convention=bayesij.PsisOptions(r_eff=r_eff)),
        lambda: bayesij.loo_expectation(post, l, convention=bayesij.PsisOptions(r_eff=r_eff)),
    ):
        with pytest.raises(ValueError, match=expected):
            call()


@pytest.mark.parametrize("bad, found", [(1j, "complex values"), ("x", "values of type <U")])
def test_non_real_input_is_refused_not_cast(bad, found, rng):
    f, l = _draws(rng)
    l = l.astype(complex if bad == 1j else object)
    l[0, 0] = bad
    for call in (
        lambda: bayesij.loo(l),
        lambda: bayesij.from_arrays(f, l),
        lambda: array.influence_scores(f, l),
    ):
        with pytest.raises(
            ValueError,
            match=r"(data|log_lik): found (complex values|values "
            r"of type)",
        ):
            call()


def test_chains_of_one_draw_give_defined_answers(rng):
    log_lik = rng.normal(-1, 0.3, size=(40, 1, 6))
    post = bayesij.from_arrays(rng.normal(size=(40, 1, 2)), log_lik)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bayesij.loo(post)
        assert np.all(result.pointwise["r_eff"] == 1.0)  # no autocorrelation to estimate
        assert np.isfinite(result.elpd)
        assert np.isfinite(bayesij.loo_expectation(post, log_lik)["value"]).all()
        assert np.isfinite(bayesij.linearity(post).index).all()
        assert bayesij.amip(post, "f[1]").stopped
        assert bayesij.audit(post).summary()


def test_empty_inputs_and_paths_name_the_argument(rng):
    with pytest.raises(ValueError, match=r"data: found no observations \(shape \(1, 100, 0\)\)"):
        bayesij.loo(np.zeros((100, 0)))
    with pytest.raises(ValueError, match=r"idata: found the path 'fit.nc'; expected an"):
        bayesij.from_inference_data("fit.nc")
    with pytest.raises(ValueError, match=r"data: found the path 'fit.nc'; expected"):
        bayesij.waic("fit.nc")


def test_a_constant_quantity_is_called_constant_everywhere(rng):
    theta = rng.normal(size=(4, 250, 1)) * 0.2
    log_lik = -0.5 * (rng.normal(size=30) - theta) ** 2
    draws = np.concatenate([theta, np.full_like(theta, 2.0)], axis=2)
    post = bayesij.from_arrays(draws, log_lik, quantity_names=["mu", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no NaN arithmetic on the way
        for target in ("sign", "significance"):
            with pytest.raises(ValueError, match=r"quantity: found 'c', constant over the"):
                bayesij.amip(post, "c", target=target)
        assert bayesij.linearity(post).verdict.to_dict() == {"mu": "reliable", "c": "constant"}
        ij = bayesij.ij_covariance(post)
        assert ij.table().loc["c", "ij_sd"] == 0.0
        assert "c: constant over the draws, so the IJ variance is 0" in str(ij)
        assert "run more draws" not in str(ij)
        audited = bayesij.audit(post)
        summary = " ".join(audited.summary())
    assert "No influence search for c: constant over the draws" in audited.to_markdown()
    assert audited.comparison_table.loc["c", "verdict"] == "constant"
    assert "linear approximation is doubtful or unreliable" not in summary
    with pytest.raises(ValueError, match=r"groups: found 1 group; expected at least 2 units"):
        bayesij.ij_covariance(post, groups=np.zeros(30, dtype=int))


# ---------------------------------------------------------------- round three (issue 29)
def test_inputs_are_paired_by_label_or_refused(rng):
    """Masked arrays, (chain, draw) MultiIndex frames, ragged chains, a DataTree node, and
    InferenceData groups whose draws are in another order or are other draws."""
    import pandas as pd
    import xarray as xr

    log_lik = rng.normal(-1, 0.1, (4, 100, 10))
    masked = np.ma.masked_array(log_lik, mask=np.zeros_like(log_lik, dtype=bool))
    assert bayesij.loo(masked).elpd == pytest.approx(bayesij.loo(log_lik).elpd)  # no mask set
    masked.mask[0, 0, 0] = True
    with pytest.raises(ValueError, match=r"data: found a masked array with 1 masked value"):
        bayesij.loo(masked)
    index = pd.MultiIndex.from_product([range(4), range(100)], names=["chain", "draw"])
    frame = pd.DataFrame(log_lik.reshape(400, 10), index=index).sample(frac=1, random_state=2)
    by_label = bayesij.loo(frame)  # rows shuffled: put back by (chain, draw), 4 chains kept
    np.testing.assert_allclose(by_label.pointwise["r_eff"], bayesij.loo(log_lik).pointwise["r_eff"])
    with pytest.raises(ValueError, match=r"data: found a DataFrame with a MultiIndex \['a', 'b'\]"):
        bayesij.loo(frame.rename_axis(["a", "b"]))
    with pytest.raises(ValueError, match=r"data: found a sequence that is not a regular array"):
        bayesij.loo([log_lik[0], log_lik[1][:50]])
    coords = {"chain": range(4), "draw": range(100)}
    mu = xr.Dataset({"mu": (("chain", "draw"), rng.normal(size=(4, 100)))}, coords=coords)
    ll = xr.Dataset({"y": (("chain", "draw", "obs"), log_lik)}, coords=coords)
    tree = xr.DataTree.from_dict({"posterior": mu, "log_likelihood": ll})
    assert bayesij.waic(tree["log_likelihood"]).elpd == pytest.approx(bayesij.waic(tree).elpd)
    reversed_ = xr.DataTree.from_dict(
        {"posterior": mu, "log_likelihood": ll.isel(draw=slice(None, None, -1))}
    )
    np.testing.assert_array_equal(bayesij.from_inference_data(reversed_).log_lik.values, log_lik)
    other = xr.DataTree.from_dict(
        {"posterior": mu, "log_likelihood": ll.assign_coords(chain=[4, 5, 6, 7])}
    )
    with pytest.raises(
        ValueError, match=r"idata: found log_likelihood chains \[4, 5, 6, 7\] while"
    ):
        bayesij.from_inference_data(other)


def test_r_csv_files_are_paired_by_their_draw_columns(rng, tmp_path):
    import pandas as pd

    meta = pd.DataFrame(
        {
            ".chain": np.repeat([1, 2], 100),
            ".iteration": np.tile(np.arange(1, 101), 2),
            ".draw": np.arange(1, 201),
        }
    )
    draws = rng.normal(size=(200, 2))
    log_lik = rng.normal(-1, 0.1, (200, 5)) + draws[:, :1]
    pd.concat([pd.DataFrame(draws, columns=["a", "b"]), meta], axis=1).to_csv(
        tmp_path / "draws.csv", index=False
    )
    table = pd.concat([pd.DataFrame(log_lik, columns=[f"V{i}" for i in range(1, 6)]), meta], axis=1)
    table.sample(frac=1, random_state=1).to_csv(tmp_path / "shuffled.csv", index=False)
    post = bayesij.from_csv(tmp_path / "draws.csv", tmp_path / "shuffled.csv")
    np.testing.assert_array_equal(post.log_lik.values.reshape(200, 5), log_lik)
    other = table.assign(**{".draw": table[".draw"] + 1})
    other.to_csv(tmp_path / "other.csv", index=False)
    with pytest.raises(ValueError, match=r"log_lik: found draws \(.chain, .draw\) that are not"):
        bayesij.from_csv(tmp_path / "draws.csv", tmp_path / "other.csv")


def test_a_callable_backend_is_known_by_what_it_computes():
    import functools

    from bayesij import refit

    def fit(weights, X):
        return X

    data = np.arange(2000.0)
    changed = data.copy()
    changed[1500] = -1.0  # NumPy's repr abbreviates this away
    same = repr(refit.CallableBackend(functools.partial(fit, X=data)))
    assert same == repr(refit.CallableBackend(functools.partial(fit, X=data.copy())))
    assert same != repr(refit.CallableBackend(functools.partial(fit, X=changed)))
    scale = 2.0
    first = repr(refit.CallableBackend(lambda w: scale * w))
    scale = 3.0
    assert repr(refit.CallableBackend(lambda w: scale * w)) != first


def test_sys_exit_and_an_interrupt_inside_a_refit_are_its_failures(rng):
    import sys

    from bayesij import refit
    from bayesij.refit.campaign import Task, execute

    def leaves(weights):
        sys.exit(3)

    def interrupted(weights):
        raise KeyboardInterrupt

    task = Task("t", np.ones(3))
    record = execute(refit.CallableBackend(leaves, 3), task)
    assert record["status"] == "failed" and record["reason"] == "the refit called sys.exit(3)"
    assert "KeyboardInterrupt" in execute(refit.CallableBackend(interrupted, 3), task)["reason"]
    with pytest.raises(KeyboardInterrupt):  # in this process, Ctrl-C is the user's
        execute(refit.CallableBackend(interrupted, 3), task, in_worker=False)


def test_values_checked_by_from_arrays_cannot_change_afterwards(rng):
    log_lik = rng.normal(-1, 0.1, (4, 100, 5))
    draws = rng.normal(size=(4, 100, 1))
    post = bayesij.from_arrays(draws, log_lik)
    assert np.shares_memory(post.log_lik.values, log_lik)  # shared, not copied
    for held in (log_lik, draws, post.log_lik.values, post.quantities.values):
        with pytest.raises(ValueError, match="read-only"):
            held[0, 0, 0] = np.nan
    passing = rng.normal(-1, 0.1, (4, 100, 5))
    bayesij.loo(passing)  # an estimator's passing container leaves the caller's array as is
    passing[0, 0, 0] = -1.0


def test_a_pickled_or_copied_container_stays_read_only(rng):
    """Dask, loky and joblib pickle what they send: the copy's new arrays are as protected
    as the checked originals, so NaN cannot be written into one to give a finite elpd."""
    import copy
    import pickle

    post = bayesij.from_arrays(
        rng.normal(size=(4, 100, 1)), rng.normal(-1, 0.1, (4, 100, 5)), groups=[0, 0, 1, 1, 2]
    )
    for copied in (pickle.loads(pickle.dumps(post)), copy.deepcopy(post)):
        assert not np.shares_memory(copied.log_lik.values, post.log_lik.values)
        for held in (copied.log_lik.values, copied.quantities.values, copied.groups.values):
            with pytest.raises(ValueError, match="read-only"):
                held[(0,) * held.ndim] = np.nan if held.dtype.kind == "f" else held.flat[1]
        assert bayesij.loo(copied).elpd == bayesij.loo(post).elpd


def _tree(posterior, log_lik):
    import xarray as xr

    if hasattr(xr, "DataTree"):
        return xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": log_lik})
    import arviz as az

    return az.InferenceData(posterior=posterior, log_likelihood=log_lik)


def test_estimators_of_the_log_likelihood_do_not_read_the_posterior_s_variables(rng):
    """LOO, WAIC and held-out scores need the log-likelihood alone: a boolean flag, a NaN in
    an unrelated deterministic or a variable without (chain, draw) in the posterior group
    does not refuse them (they refused before); estimators of quantities still refuse the
    unfit variable by name, and a peer's r_eff rule reads the posterior when it needs it."""
    import xarray as xr

    draws = rng.normal(size=(2, 50))
    log_lik = xr.Dataset({"y": (("chain", "draw", "obs"), rng.normal(-1, 0.2, (2, 50, 6)))})
    clean = xr.Dataset({"mu": (("chain", "draw"), draws)})
    odd = clean.assign(
        flag=(("chain", "draw"), draws > 0),
        det=(("chain", "draw"), np.where(np.arange(100).reshape(2, 50) == 3, np.nan, 1.0)),
        const=(("x",), np.arange(3.0)),
    )
    for estimator in (bayesij.loo, bayesij.waic, bayesij.holdout):
        expected = estimator(_tree(clean, log_lik)).elpd
        assert estimator(_tree(odd, log_lik)).elpd == expected
    assert bayesij.loo(
        _tree(odd, log_lik), convention=bayesij.PsisOptions("arviz-stats", r_eff=1.0)
    ).elpd == (
        bayesij.loo(
            _tree(clean, log_lik), convention=bayesij.PsisOptions("arviz-stats", r_eff=1.0)
        ).elpd
    )
    with pytest.raises(ValueError, match=r"flag: found values of type bool"):
        bayesij.loo(_tree(odd, log_lik), convention="arviz-stats")
    with pytest.raises(ValueError, match=r"flag: found values of type bool"):
        bayesij.influence(_tree(odd, log_lik))
    assert bayesij.influence(_tree(odd, log_lik), quantities="mu")["psi"].shape == (1, 6)


def test_a_var_name_that_is_not_a_name_and_repeated_draw_labels_are_named(rng):
    import xarray as xr

    log_lik = xr.Dataset({"y": (("chain", "draw", "obs"), rng.normal(-1, 0.2, (2, 50, 6)))})
    posterior = xr.Dataset({"mu": (("chain", "draw"), rng.normal(size=(2, 50)))})
    for bad in (3, {"y": 1}):
        with pytest.raises(ValueError, match=r"var_name: found .*; expected a name or a list"):
            bayesij.loo(_tree(posterior, log_lik), var_name=bad)
    repeated = log_lik.assign_coords(draw=[0] * 25 + [1] * 25)
    shuffled = posterior.assign_coords(draw=[1] * 25 + [0] * 25)
    for estimator in (bayesij.loo, bayesij.influence):
        with pytest.raises(ValueError, match=r"idata: found repeated draw labels"):
            estimator(_tree(shuffled, repeated))
    same = posterior.assign_coords(draw=[0] * 25 + [1] * 25)  # the same labels: by position
    assert np.isfinite(bayesij.influence(_tree(same, repeated))["psi"]).all()


def test_nullable_numbers_survey_weights_csv_headers_and_weighted_predictions(rng, tmp_path):
    """A nullable Float64 table is the numbers it holds (its pd.NA named); oversized
    weights are blamed on the weights; a repeated CSV column is named (pandas renamed it
    'a.1'); a weight given as text or a NaN prediction draw is refused (both were used)."""
    log_lik = rng.normal(-1, 0.2, (200, 5))
    frame = pd.DataFrame(log_lik).astype("Float64")
    assert bayesij.loo(frame).elpd == bayesij.loo(log_lik).elpd
    with pytest.raises(ValueError, match=r"data: found 10 missing value\(s\) \(pd.NA or None"):
        bayesij.loo(frame.mask(pd.DataFrame(np.arange(1000).reshape(200, 5) % 100 == 7)))
    with pytest.raises(ValueError, match=r"data: found values of type object"):
        bayesij.loo(pd.DataFrame({"a": ["x"] * 200, "b": [1.0] * 200}))
    for kind in ("survey", "frequency"):
        with pytest.raises(ValueError, match=r"weights: found 5 weight\(s\) so large"):
            bayesij.loo_weighted(log_lik, np.full(5, 1e300), kind=kind)
    pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "a", "b"]).to_csv(
        tmp_path / "draws.csv", index=False
    )
    pd.DataFrame(log_lik).to_csv(tmp_path / "log_lik.csv", index=False)
    with pytest.raises(ValueError, match=r"draws: found repeated column name\(s\) \['a'\]"):
        bayesij.from_csv(tmp_path / "draws.csv", tmp_path / "log_lik.csv")
    predictions = {"a": rng.normal(size=(200, 5)), "b": rng.normal(size=(200, 5))}
    for weights in ({"a": "0.5", "b": 0.5}, {"a": True, "b": 0.5}):
        with pytest.raises(ValueError, match=r"weights: found the weight"):
            bayesij.weight_predictions(predictions, weights)
    predictions["a"][3, 1] = np.nan
    with pytest.raises(ValueError, match=r"predictions\['a'\]: found 1 non-finite"):
        bayesij.weight_predictions(predictions, {"a": 0.5, "b": 0.5})
