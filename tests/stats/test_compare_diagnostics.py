"""bayesij.compare's diagnostics (Sivula et al. 2025; McLatchie & Vehtari 2024): p_worse /
p_better from the normal approximation, the diag_diff and diag_elpd flags, rank, a reference
model and the selection-bias check of many models — by their definitions, and equal to
arviz-stats' compare where it is installed (Python >= 3.12)."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import bayesij
from bayesij.stats.compare_diagnostics import selection_check
from peers import ARVIZ_1


def _normal_fits(n_units: int, shifts, seed: int = 0, noise: float = 0.0, convention=None) -> dict:
    """LOO results of models predicting ``y ~ N(0, 1)`` with posterior mean draws near 0:
    model j adds ``shifts[j]`` to its predictive mean, and ``noise`` per unit and model (so
    that the models predict about equally well, each better on some units)."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n_units)
    mu = rng.normal(0, 1 / np.sqrt(n_units), size=(2, 200, 1))
    fits = {}
    for j, shift in enumerate(shifts):
        offset = shift + noise * rng.normal(size=n_units)
        log_lik = norm.logpdf(y, mu + offset, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits[f"m{j}"] = bayesij.loo(
                log_lik, convention=bayesij.PsisOptions(convention, r_eff=1.0)
            )
    return fits


def test_p_worse_is_the_normal_probability_of_a_negative_difference():
    fits = _normal_fits(300, [0.0, 0.1, 0.2, 0.6])
    table = bayesij.compare(fits)
    assert list(table["rank"]) == [0, 1, 2, 3]
    assert math.isnan(table["p_worse"].iloc[0])
    for name in table.index[1:]:
        d, se = table.loc[name, ["elpd_diff", "se_diff"]]
        assert d < 0
        # P(D < 0), D ~ N(d, se^2), written with erfc (not scipy's cdf)
        assert table.loc[name, "p_worse"] == pytest.approx(0.5 * math.erfc(d / (se * 2**0.5)))
    assert list(table.columns) == [
        "elpd_diff",
        "se_diff",
        "p_worse",
        "diag_diff",
        "diag_elpd",
        "elpd",
        "se",
        "p",
        "ic",
        "rank",
    ]


def test_diag_diff_flags_small_data_and_similar_models():
    large = bayesij.compare(_normal_fits(300, [0.0, 0.05, 0.6]))
    assert large["diag_diff"].tolist() == ["", "|elpd_diff| < 4", ""]
    assert abs(large["elpd_diff"].iloc[1]) < 4 < abs(large["elpd_diff"].iloc[2])
    small = bayesij.compare(_normal_fits(60, [0.0, 1.0]))
    assert small["diag_diff"].tolist() == ["", "N < 100"]


def test_diag_elpd_counts_units_above_the_khat_threshold():
    fits = _normal_fits(300, [0.0, 0.3])
    good = fits["m0"]
    raw = np.zeros((2, 200, 300))
    raw[:] = norm.logpdf(np.linspace(-2, 2, 300), 0, 1)
    raw[..., :3] += np.random.default_rng(1).standard_t(1.5, size=(2, 200, 3)) * 20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        heavy = bayesij.loo(raw)
    expected = int((heavy.pointwise["pareto_k"] > heavy.k_threshold).sum())
    assert expected >= 1
    table = bayesij.compare({"good": good, "heavy": heavy})
    assert table.loc["heavy", "diag_elpd"] == f"{expected} k̂ > {heavy.k_threshold:.2f}"
    assert table.loc["good", "diag_elpd"] == ""
    waic = {name: bayesij.waic(np.zeros((1, 4, 3)) + i) for i, name in enumerate("ab")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert bayesij.compare(waic)["diag_elpd"].tolist() == ["", ""]  # no k-hat in WAIC


def test_reference_model_gives_p_better_and_differences_to_it():
    fits = _normal_fits(300, [0.0, 0.2, 0.5])
    table = bayesij.compare(fits, reference="m1")
    assert "p_better" in table.columns and "p_worse" not in table.columns
    assert table.loc["m1", "elpd_diff"] == 0 and math.isnan(table.loc["m1", "p_better"])
    d, se = table.loc["m0", ["elpd_diff", "se_diff"]]
    assert d > 0 and table.loc["m0", "p_better"] == pytest.approx(norm.sf(0, d, se))
    assert list(table.index) == ["m0", "m1", "m2"]  # still best first
    with pytest.raises(ValueError, match=r"reference: found 'm9'; expected one of the models"):
        bayesij.compare(fits, reference="m9")


def test_selection_check_warns_only_when_the_lead_is_within_chance():
    alike = _normal_fits(200, [0.0] * 13, noise=0.3, seed=0)
    with pytest.warns(UserWarning, match="may be due to selection"):
        table = bayesij.compare(alike)
    assert table.attrs["selection"].by_chance
    distinct = _normal_fits(200, [0.0] + [0.5 + 0.02 * j for j in range(12)], seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = bayesij.compare(distinct)
    check = table.attrs["selection"]
    assert not check.by_chance and check.best_lead > check.expected_by_chance
    assert bayesij.compare(_normal_fits(200, [0.0, 0.1])).attrs["selection"] is None


def test_selection_check_by_its_definition():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(rng.normal(size=(50, 13)), columns=[f"m{j}" for j in range(13)])
    order = list(frame.sum().sort_values(ascending=False).index)
    check = selection_check(frame, order)
    leads = (frame.sub(frame[order[6]], axis=0)).sum().to_numpy()
    upper = leads[leads >= np.median(leads)]
    sd = np.sqrt(np.mean(upper**2))
    assert check.best_lead == pytest.approx(leads.max())
    assert check.expected_by_chance == pytest.approx(norm.ppf(1 - 1 / 24) * sd)
    assert selection_check(frame.iloc[:, :11], order[:11]) is None


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' compare diagnostics (Python >= 3.12)")
@pytest.mark.parametrize("reference", [None, "m2"])
@pytest.mark.parametrize(
    ("n_units", "shifts", "noise", "seed"),
    [
        (300, [0.0, 0.05, 0.2, 0.6], 0.0, 5),
        (60, [0.0, 0.3, 1.0], 0.0, 5),
        (200, [0.0] * 13, 0.3, 0),  # selection check: lead within chance
        (200, [0.0] * 13, 0.3, 2),  # and beyond it
    ],
)
def test_diagnostics_equal_arviz_stats(n_units, shifts, noise, seed, reference):
    from arviz_stats import compare as arviz_compare

    fits = _normal_fits(n_units, shifts, noise=noise, seed=seed)
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = bayesij.compare(fits, reference=reference)
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = arviz_compare(
            {name: r.to_arviz() for name, r in fits.items()},
            reference=reference,
            round_to="none",
        )
    assert list(theirs.index) == list(ours.index)
    probability = "p_worse" if reference is None else "p_better"
    np.testing.assert_allclose(theirs["elpd_diff"].astype(float), ours["elpd_diff"], atol=1e-9)
    np.testing.assert_allclose(theirs["dse"].astype(float), ours["se_diff"], rtol=1e-9)
    np.testing.assert_allclose(
        theirs[probability].astype(float), ours[probability], rtol=1e-6, atol=1e-12
    )
    assert theirs["rank"].tolist() == ours["rank"].tolist()
    assert theirs["diag_diff"].fillna("").tolist() == ours["diag_diff"].tolist()
    assert theirs["diag_elpd"].fillna("").tolist() == ours["diag_elpd"].tolist()

    def chance(record):
        return any("chance" in str(w.message) for w in record)

    assert chance(theirs_warned) == chance(ours_warned)


@pytest.mark.skipif(not ARVIZ_1, reason="arviz-stats' compare (Python >= 3.12)")
def test_a_peer_s_convention_reproduces_its_whole_table():
    # arviz-stats: each model's se with ddof 1 (as its loo), the difference's with ddof 0.
    from arviz_stats import compare as arviz_compare

    fits = _normal_fits(80, [0.0, 0.2, 0.5], noise=0.2, seed=3, convention="arviz-stats")
    theirs = arviz_compare({name: r.to_arviz() for name, r in fits.items()}, round_to="none")
    ours = bayesij.compare(fits, convention="arviz-stats")
    np.testing.assert_allclose(theirs["se"].astype(float), ours["se"], rtol=1e-10)
    np.testing.assert_allclose(theirs["dse"].astype(float), ours["se_diff"], rtol=1e-10)
    assert not np.allclose(bayesij.compare(fits)["se_diff"].iloc[1:], ours["se_diff"].iloc[1:])


def test_the_difference_s_se_follows_the_chosen_peer():
    fits = _normal_fits(50, [0.0, 0.3], noise=0.3, seed=1)
    difference = fits["m1"].pointwise_elpd.to_numpy() - fits["m0"].pointwise_elpd.to_numpy()
    n = difference.size
    r = bayesij.compare(fits, convention="R loo").loc["m1", "se_diff"]
    assert r == pytest.approx(np.sqrt(n) * np.std(difference, ddof=1), rel=1e-12)
    for peer in ("arviz-stats", "ArviZ 0.23"):
        se = bayesij.compare(fits, convention=peer).loc["m1", "se_diff"]
        assert se == pytest.approx(np.sqrt(n * np.var(difference)), rel=1e-12)
    with pytest.raises(ValueError, match=r"convention: found 'loo'; expected None or one of"):
        bayesij.compare(fits, convention="loo")


def test_flags_at_their_boundaries():
    from bayesij.stats.compare_diagnostics import difference_flag, khat_flag

    assert difference_flag(-10.0, 100) == "" and difference_flag(-10.0, 99) == "N < 100"
    assert difference_flag(-4.0, 300) == "" and difference_flag(-3.99, 300) == "|elpd_diff| < 4"
    assert difference_flag(0.0, 10) == ""  # the reference itself
    assert khat_flag(np.array([0.7, 0.69]), 0.7) == "" and khat_flag(None, 0.7) == ""
    assert khat_flag(np.array([0.71, 0.7]), 0.7) == "1 k̂ > 0.70"


def test_selection_check_of_models_that_all_predict_alike_is_none():
    frame = pd.DataFrame(np.zeros((30, 13)), columns=[f"m{j}" for j in range(13)])
    assert selection_check(frame, list(frame.columns)) is None
    near = frame + np.linspace(0, 1e-3, 13)  # leads small but not zero: a check, sd > 0
    check = selection_check(near, list(near.columns[::-1]))
    assert check is not None and check.expected_by_chance > 0
