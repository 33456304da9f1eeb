"""The posterior container: construction, selection, groups, bad input."""

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayesij


def test_from_arrays_two_and_three_dimensional_agree(rng):
    f = rng.normal(size=(3, 40, 2))
    l = rng.normal(size=(3, 40, 5))
    chains = np.tile(np.arange(3), 40)  # interleaved rows, as PyStan stores them
    flat_f = np.transpose(f, (1, 0, 2)).reshape(120, 2)
    flat_l = np.transpose(l, (1, 0, 2)).reshape(120, 5)
    a = bayesij.from_arrays(f, l)
    b = bayesij.from_arrays(flat_f, flat_l, chain_ids=chains)
    xr.testing.assert_equal(a.quantities, b.quantities)
    xr.testing.assert_equal(a.log_lik, b.log_lik)


def test_repr_and_sizes(rng):
    post = bayesij.from_arrays(
        rng.normal(size=(2, 10, 3)),
        rng.normal(size=(2, 10, 4)),
        quantity_names=["a", "b[1]", "b[2]"],
        groups=[0, 0, 1, 1],
    )
    assert post.n_draws == 20 and post.n_chains == 2 and post.n_obs == 4
    assert repr(post) == (
        "Posterior: 2 chain(s) x 10 draws, 3 quantities (a, b[1], b[2]), 4 observations in 2 groups"
    )
    assert post.select("b").quantity_names == ["b[1]", "b[2]"]


def test_units_sum_the_log_lik_of_each_group(rng):
    l = rng.normal(size=(2, 10, 5))
    post = bayesij.from_arrays(rng.normal(size=(2, 10, 1)), l)
    summed, labels = post.units(["x", "y", "x", "z", "y"])
    assert list(labels.values) == ["x", "y", "z"] and labels.dims == ("group",)
    np.testing.assert_allclose(summed[..., 0], l[..., 0] + l[..., 2])
    np.testing.assert_allclose(summed[..., 2], l[..., 3])


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f, l: (f, np.where(np.arange(5) == 2, np.nan, l)), r"log_lik: found \d+ NaN"),
        (lambda f, l: (f, np.where(np.arange(5) == 2, np.inf, l)), r"log_lik: found \d+ \+inf"),
        (lambda f, l: (f, l[:, :7]), r"log_lik: found 2 chains x 7 draws while quantities"),
        (lambda f, l: (f[:1, :1], l[:1, :1]), r"quantities: found a single draw"),
        (
            lambda f, l: (np.where(np.arange(2) == 1, np.inf, f), l),
            r"quantities: found \d+ non-finite",
        ),
        (lambda f, l: (f[0, 0], l), r"quantities: found an array with 1 dimensions, shape \(2,\)"),
    ],
)
def test_bad_draws(rng, change, message):
    f, l = change(rng.normal(size=(2, 10, 2)), rng.normal(size=(2, 10, 5)))
    with pytest.raises(ValueError, match=message):
        bayesij.from_arrays(f, l)


def test_negative_infinity_is_legal_input(rng):
    l = rng.normal(size=(2, 10, 3))
    l[0, 0, 1] = -np.inf
    assert bayesij.from_arrays(rng.normal(size=(2, 10, 1)), l).n_obs == 3


@pytest.mark.parametrize(
    "groups, message",
    [
        ([0, 1, 2], r"groups: found shape \(3,\); expected one label per observation"),
        ({0: "a", 1: "b"}, r"groups: found no group for 3 of 5 observation\(s\)"),
        ([0, 1, None, 1, 0], r"groups: found 1 missing label\(s\) \(first at observation 2\)"),
        ([0, 1, np.nan, 1, 0], r"groups: found 1 missing label\(s\) \(first at observation 2\)"),
    ],
)
def test_groups_must_cover_every_observation(rng, groups, message):
    with pytest.raises(ValueError, match=message):
        bayesij.from_arrays(rng.normal(size=(2, 10, 1)), rng.normal(size=(2, 10, 5)), groups=groups)


def test_duplicate_ids_and_unequal_chains(rng):
    with pytest.raises(ValueError, match=r"obs_names: found 1 repeated label\(s\): 'a'"):
        bayesij.from_arrays(
            rng.normal(size=(2, 10, 1)), rng.normal(size=(2, 10, 3)), obs_names=["a", "b", "a"]
        )
    with pytest.raises(ValueError, match=r"chain_ids: found chains of unequal lengths \[6, 4\]"):
        bayesij.from_arrays(
            rng.normal(size=(10, 1)), rng.normal(size=(10, 3)), chain_ids=[0] * 6 + [1] * 4
        )


def test_a_grouped_source_checks_its_group_labels_once(monkeypatch):
    """The units' log-likelihood, labels and each observation's code come from one check of
    the labels (they were checked twice per grouped source: 0.1 s each at N = 10^5), and
    agree with units() and unit_codes() asked apart; a label that is a missing value is
    refused, one that is a sequence or the text "NA" is not."""
    from bayesij.data import posterior as module

    rng = np.random.default_rng(4)
    log_lik = rng.normal(-1, 0.1, (2, 50, 8))
    labels = ["a", "b", "a", "c", "b", "b", "NA", "c"]
    post = bayesij.from_arrays(rng.normal(size=(2, 50, 1)), log_lik)
    values, units, codes = post.unit_log_lik(labels)
    np.testing.assert_array_equal(values, post.units(labels)[0])
    np.testing.assert_array_equal(codes, post.unit_codes(labels)[0])
    assert units.values.tolist() == ["a", "b", "c", "NA"]
    np.testing.assert_allclose(values[..., 1], log_lik[..., [1, 4, 5]].sum(-1))
    alone, observations, own = post.unit_log_lik(None)  # no groups: each its own unit
    assert alone is post.log_lik.values and own.tolist() == list(range(8))
    assert observations.dims == ("obs",)
    checks = []
    original = module.Posterior._group_labels

    def counted(self, groups):
        checks.append(1)
        return original(self, groups)

    monkeypatch.setattr(module.Posterior, "_group_labels", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 50 draws
        result = bayesij.loo(log_lik, groups=labels)
    assert result.n_units == 4 and len(checks) == 1
    weird = np.empty(8, dtype=object)
    weird[:] = [(1, 2), (1, 2), "NA", "NA", 0, 0, 0.0, 1]
    assert post.unit_codes(weird)[0].tolist() == [0, 0, 1, 1, 2, 2, 2, 3]
    for missing in (pd.NA, None, np.nan, pd.NaT, float("nan")):
        with pytest.raises(ValueError, match=r"groups: found 1 missing label\(s\)"):
            post.unit_codes(["a"] * 7 + [missing])


def test_group_labels_are_grouped_by_equality_as_pandas_groups():
    """1 and 1.0 are one group, 1 and "1" two; pd.NA is missing, the text "NA" a label."""
    rng = np.random.default_rng(2)
    log_lik = rng.normal(-1, 0.1, (2, 50, 6))
    post = bayesij.from_arrays(rng.normal(size=(2, 50, 1)), log_lik)
    codes, labels = post.unit_codes([1, 1.0, "1", "1", "NA", 2])
    assert codes.tolist() == [0, 0, 1, 1, 2, 3]
    assert labels.values.tolist() == [1, "1", "NA", 2]
    expected = [log_lik[..., :2].sum(-1), log_lik[..., 2:4].sum(-1)]
    units, _ = post.units([1, 1.0, "1", "1", "NA", 2])
    np.testing.assert_array_equal(units[..., :2], np.stack(expected, axis=-1))
    for missing in (pd.NA, None, np.nan, pd.NaT):
        with pytest.raises(ValueError, match=r"groups: found 1 missing label\(s\)"):
            post.with_groups([1, 1, missing, 2, 2, 2])
    from bayesij.refit import kfold_split_grouped

    folds = kfold_split_grouped([1, 1.0, "1", "1", "b", "b"], K=3, seed=0)
    assert folds[0] == folds[1] and folds[2] == folds[3] and folds[4] == folds[5]
    assert len(set(folds.tolist())) == 3


def test_element_index_reads_the_labels_between_brackets():
    from bayesij.data.posterior import element_index

    assert element_index("Omega[1,2]") == ["1", "2"]
    assert element_index("a[US Steel]") == ["US Steel"]
    assert element_index("sigma") == [] and element_index("odd[1") == []
