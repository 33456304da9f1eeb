"""PSIS-LOO with frequency and survey weights (stan-dev/loo#168): frequency weights equal
the disaggregated data exactly; both kinds equal exact weighted refits of a conjugate normal
regression (the refit backends' weight semantics: the weight multiplies the log-likelihood)
within their Monte Carlo error; compare pairs weighted results."""

import warnings

import numpy as np
import pytest

import bayesij
from bayesij.refit.conjugate import ConjugateNormal
from bayesij.stats.weighted_loo import weighted_standard_error


def _weighted_fit(kind: str, seed: int = 0, n_obs: int = 60):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n_obs), rng.normal(size=n_obs)])
    y = X @ [0.5, 1.0] + rng.standard_t(5, size=n_obs)
    if kind == "frequency":
        weights = rng.integers(1, 6, size=n_obs).astype(float)
    else:
        weights = rng.uniform(0.3, 3.0, size=n_obs)
    model = ConjugateNormal(X, y, sigma=1.2)
    beta = model.draws(4000, rng, weights).reshape(4, 1000, 2)
    log_lik = model.log_lik(beta.reshape(-1, 2)).reshape(4, 1000, n_obs)
    return model, weights, log_lik


def _exact_elpd(model, weights, kind: str) -> np.ndarray:
    """Each row's exact LOO density: the fit without one copy (frequency) or without the
    unit (survey), in closed form."""
    out = np.empty(weights.size)
    for n in range(weights.size):
        left = weights.copy()
        left[n] = left[n] - 1 if kind == "frequency" else 0.0
        out[n] = model.log_predictive(left, [n])[0]
    return out


def test_frequency_weights_equal_the_disaggregated_data():
    _, weights, log_lik = _weighted_fit("frequency")
    counts = weights.astype(int)
    compressed = bayesij.loo_weighted(log_lik, weights, convention=bayesij.PsisOptions(ddof=1))
    full = bayesij.loo(np.repeat(log_lik, counts, axis=2), convention=bayesij.PsisOptions(ddof=1))
    assert compressed.elpd == pytest.approx(full.elpd, rel=1e-12)
    assert compressed.se == pytest.approx(full.se, rel=1e-12)
    assert compressed.p_loo == pytest.approx(full.p_loo, rel=1e-12)
    # A row's copies share their draws, so their Monte Carlo errors add, not in quadrature:
    # sqrt(sum (w mcse)^2), larger than R loo's sqrt(sum mcse^2) over the copies.
    mcse = compressed.pointwise["mcse_elpd_loo"].to_numpy()
    assert compressed.mcse == pytest.approx(np.sqrt(np.sum((weights * mcse) ** 2)))
    assert full.mcse == pytest.approx(np.sqrt(np.sum(weights * mcse**2)), rel=1e-12)
    # A second model: the comparison of compressed rows is that of the full data.
    other = log_lik - 0.05 * np.arange(log_lik.shape[2]) / log_lik.shape[2]
    pair = bayesij.compare(
        {
            "a": compressed,
            "b": bayesij.loo_weighted(other, weights, convention=bayesij.PsisOptions(ddof=1)),
        }
    )
    full_pair = bayesij.compare(
        {
            "a": full,
            "b": bayesij.loo(
                np.repeat(other, counts, axis=2), convention=bayesij.PsisOptions(ddof=1)
            ),
        }
    )
    for column in ("elpd_diff", "se_diff", "p_worse", "elpd", "se"):
        np.testing.assert_allclose(pair[column], full_pair[column], rtol=1e-10, atol=1e-12)
    assert pair["diag_diff"].tolist() == full_pair["diag_diff"].tolist()


@pytest.mark.parametrize("kind", ["frequency", "survey"])
def test_weighted_loo_equals_exact_weighted_refits(kind):
    model, weights, log_lik = _weighted_fit(kind, seed=1)
    result = bayesij.loo_weighted(
        log_lik, weights, kind=kind, convention=bayesij.PsisOptions(ddof=1)
    )
    exact = _exact_elpd(model, weights, kind)
    pointwise = result.pointwise
    assert (pointwise["pareto_k"] < 0.7).all()
    error = np.abs(pointwise["elpd_loo"].to_numpy() - exact)
    assert (error < 4 * pointwise["mcse_elpd_loo"].to_numpy() + 1e-4).all()
    assert abs(result.elpd - weights @ exact) < 4 * result.mcse + 1e-4
    # Leaving the wrong thing out misses by more than that (the kinds differ).
    wrong = _exact_elpd(model, weights, "survey" if kind == "frequency" else "frequency")
    assert abs(weights @ wrong - weights @ exact) > 10 * result.mcse


def test_survey_se_is_the_with_replacement_se_of_the_weighted_terms():
    _, weights, log_lik = _weighted_fit("survey", seed=2)
    result = bayesij.loo_weighted(
        log_lik, weights, kind="survey", convention=bayesij.PsisOptions(ddof=1)
    )
    terms = weights * result.pointwise["elpd_loo"].to_numpy()
    assert result.elpd == pytest.approx(terms.sum())
    assert result.se == pytest.approx(np.sqrt(terms.size) * terms.std(ddof=1))
    estimates = result.estimates()
    assert estimates.loc["elpd_loo", "Estimate"] == pytest.approx(result.elpd)
    assert estimates.loc["looic", "SE"] == pytest.approx(2 * result.se)
    assert "survey weights" in str(result)


def test_unit_weights_give_plain_loo_for_both_kinds():
    _, _, log_lik = _weighted_fit("survey", seed=3)
    plain = bayesij.loo(log_lik, convention=bayesij.PsisOptions(ddof=1))
    for kind in ("frequency", "survey"):
        result = bayesij.loo_weighted(
            log_lik, np.ones(log_lik.shape[2]), kind=kind, convention=bayesij.PsisOptions(ddof=1)
        )
        np.testing.assert_allclose(
            result.pointwise["elpd_loo"], plain.pointwise["elpd_loo"], rtol=1e-9
        )
        np.testing.assert_allclose(
            result.pointwise["pareto_k"], plain.pointwise["pareto_k"], rtol=1e-10
        )
        assert result.se == pytest.approx(plain.se, rel=1e-9)
        for column in ("lppd", "p_loo"):
            np.testing.assert_allclose(
                result.pointwise[column], plain.pointwise[column], rtol=1e-9, atol=1e-12
            )
        np.testing.assert_allclose(
            result.pointwise["mcse_elpd_loo"], plain.pointwise["mcse_elpd_loo"], rtol=0.05
        )
        given = bayesij.loo_weighted(
            log_lik, np.ones(log_lik.shape[2]), kind=kind, convention=bayesij.PsisOptions(r_eff=1.0)
        )
        np.testing.assert_allclose(
            given.pointwise["pareto_k"],
            bayesij.loo(log_lik, convention=bayesij.PsisOptions(r_eff=1.0)).pointwise["pareto_k"],
        )


def test_rows_keep_their_labels_and_the_estimates_are_weighted():
    _, weights, log_lik = _weighted_fit("survey", seed=4)
    labels = [f"unit{i}" for i in range(log_lik.shape[2])]
    post = bayesij.from_arrays(np.zeros((*log_lik.shape[:2], 1)), log_lik, obs_names=labels)
    for kind in ("frequency", "survey"):
        w = np.ceil(weights) if kind == "frequency" else weights
        result = bayesij.loo_weighted(post, w, kind=kind, convention=bayesij.PsisOptions(ddof=1))
        assert list(result.pointwise.index) == labels
        assert list(result.pointwise.columns[:2]) == ["weight", "elpd_loo"]
        assert result.method == "psis" and result.tail_rule == "ceil"
        table = result.estimates()
        assert table.loc["looic", "Estimate"] == pytest.approx(-2 * result.elpd)
        p_terms = result.pointwise["p_loo"].to_numpy()
        expected = weighted_standard_error(p_terms, w, kind, 1)
        assert table.loc["p_loo", "SE"] == pytest.approx(expected)
        assert table.loc["p_loo", "Estimate"] == pytest.approx(np.sum(w * p_terms))


def test_weighted_standard_error_by_its_definition():
    values, w = np.array([1.0, 2.0, 4.0]), np.array([1.0, 2.0, 1.0])
    centre = np.sum(w * values) / 4
    expected = np.sqrt(4 * np.sum(w * (values - centre) ** 2) / 3)
    assert weighted_standard_error(values, w, "frequency", 1) == pytest.approx(expected)
    terms = w * values
    assert weighted_standard_error(values, w, "survey", 1) == pytest.approx(
        np.sqrt(3) * terms.std(ddof=1)
    )
    assert np.isnan(weighted_standard_error(np.ones(1), np.ones(1), "survey", 1))
    assert np.isnan(weighted_standard_error(np.ones(1), np.ones(1), "frequency", 1))
    assert weighted_standard_error(np.ones(1), np.ones(1), "frequency", 0) == 0.0


@pytest.mark.parametrize(
    ("weights", "kind", "message"),
    [
        (np.ones(3), "frequency", r"weights: found shape \(3,\); expected one weight per"),
        (
            np.r_[0.5, np.ones(59)],
            "frequency",
            r"weights: found 1 value\(s\) out of range \(first 0.5 at 0\).*>= 1",
        ),
        (np.r_[np.ones(59), 0.0], "survey", r"weights: found 1 value\(s\) out of range .*> 0"),
        (np.r_[np.nan, np.ones(59)], "survey", r"weights: found 1 value\(s\) out of range"),
        (np.ones(60), "counts", r"kind: found 'counts'; expected one of"),
    ],
)
def test_bad_weights_are_refused_by_name(weights, kind, message):
    _, _, log_lik = _weighted_fit("survey")
    with pytest.raises(ValueError, match=message):
        bayesij.loo_weighted(log_lik, weights, kind=kind)


def test_compare_refuses_models_weighted_differently():
    _, weights, log_lik = _weighted_fit("frequency")
    a = bayesij.loo_weighted(log_lik, weights)
    with pytest.raises(ValueError, match=r"results: found 'b' with other weights than 'a'"):
        bayesij.compare({"a": a, "b": bayesij.loo_weighted(log_lik, weights + 1)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = bayesij.loo(log_lik)
    with pytest.raises(ValueError, match=r"results: found 'b' with other weights than 'a'"):
        bayesij.compare({"a": a, "b": plain})
    with pytest.raises(ValueError, match=r"with other weights"):
        bayesij.compare({"a": a, "b": bayesij.loo_weighted(log_lik, weights, kind="survey")})


def test_convention_and_var_name_reach_the_psis():
    from peers import from_dict

    _, _, log_lik = _weighted_fit("survey", seed=5)
    tree = from_dict(
        posterior={"m": log_lik[..., 0]}, log_likelihood={"y": log_lik, "z": 2 * log_lik}
    )
    ones = np.ones(log_lik.shape[2])
    for kind in ("frequency", "survey"):
        chosen = bayesij.loo_weighted(tree, ones, var_name="z", kind=kind, convention="R loo")
        plain = bayesij.loo(tree, var_name="z", convention="R loo")
        assert chosen.ddof == 1  # R loo's SE convention came through
        np.testing.assert_allclose(
            chosen.pointwise["elpd_loo"], plain.pointwise["elpd_loo"], rtol=1e-9
        )
        arviz = bayesij.loo_weighted(tree, ones, var_name="y", kind=kind, convention="arviz-stats")
        expected = bayesij.loo(tree, var_name="y", convention="arviz-stats")
        np.testing.assert_allclose(arviz.pointwise["r_eff"], expected.pointwise["r_eff"])
