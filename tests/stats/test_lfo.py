"""Leave-future-out against the closed form of a conjugate AR(2) model with known noise."""

import json

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import bayesij
from bayesij.refit import ConjugateNormalBackend

T, MIN_TRAIN = 80, 20


@pytest.fixture(scope="module")
def ar2():
    """An AR(2) series as a conjugate regression on its two lags (rows: y_t | y_t-1, y_t-2),
    so every conditional term and every LFO predictive has a closed form."""
    rng = np.random.default_rng(1)
    y = np.zeros(T + 2)
    for t in range(2, T + 2):
        y[t] = 0.5 * y[t - 1] - 0.3 * y[t - 2] + rng.normal()
    backend = ConjugateNormalBackend(np.column_stack([y[1:-1], y[:-2]]), y[2:], draws=4000)
    return backend, backend.fit(np.ones(T))


def closed_form(backend, horizon):
    """log p(y_i..y_i+M-1 | y_<i) at every origin: N(X_f m_i, I + X_f S_i X_f^T)."""
    model, out = backend.model, []
    for i in range(MIN_TRAIN, T - horizon + 1):
        weights = np.r_[np.ones(i), np.zeros(T - i)]
        mean, cov = model.posterior(weights)
        block = model.X[i : i + horizon]
        predictive = multivariate_normal(block @ mean, np.eye(horizon) + block @ cov @ block.T)
        out.append(predictive.logpdf(model.y[i : i + horizon]))
    return np.array(out)


@pytest.mark.parametrize("horizon", [1, 3])
def test_exact_lfo_equals_the_closed_form_within_monte_carlo_error(ar2, horizon, tmp_path):
    backend, post = ar2

    def exact_lfo():
        return bayesij.lfo(
            post,
            backend,
            min_train=MIN_TRAIN,
            horizon=horizon,
            method="exact",
            store=tmp_path,
            executor="sequential",
            progress=False,
        )

    result = exact_lfo()
    truth = closed_form(backend, horizon)
    table = result.pointwise
    assert len(table) == T - horizon - MIN_TRAIN + 1 == result.n_refits
    z = (table["elpd"].to_numpy() - truth) / table["mcse"].to_numpy()
    assert np.all(np.abs(z) < 4.5), np.abs(z).max()
    assert result.elpd == pytest.approx(truth.sum(), abs=4 * np.sqrt((table["mcse"] ** 2).sum()))
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(table)
    again = exact_lfo()
    assert again.elpd == result.elpd, "resumed from the store"
    # nothing refitted again: the store holds the same records (a rerun would append)
    assert (tmp_path / "records.jsonl").read_text().splitlines() == lines
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == len(lines)
    assert json.loads(lines[0])["key"] == f"lfo-{MIN_TRAIN}"


@pytest.mark.parametrize("horizon", [1, 3])
def test_psis_lfo_is_within_a_few_mcse_with_far_fewer_refits(ar2, horizon):
    backend, post = ar2
    result = bayesij.lfo(post, backend, min_train=MIN_TRAIN, horizon=horizon)
    truth = closed_form(backend, horizon)
    table = result.pointwise
    assert 0 < result.n_refits < len(table) / 5
    assert table["refitted"].sum() == result.n_refits
    assert np.all(table.loc[table["refitted"], "pareto_k"] > 0.7)
    error = np.abs(table["elpd"].to_numpy() - truth)
    assert np.all(error < 4 * table["mcse"].to_numpy() + 0.05), error.max()
    assert abs(result.elpd - truth.sum()) < 0.5
    without = bayesij.lfo(post, min_train=MIN_TRAIN, horizon=horizon)  # no backend: no refit
    assert without.n_refits == 0 and without.pointwise["pareto_k"].max() > 0.7
    assert "k-hat above 0.7" in str(without)


def test_ij_lfo_reports_its_error_and_its_linearity_verdict(ar2):
    backend, post = ar2
    result = bayesij.lfo(post, min_train=MIN_TRAIN, method="ij")
    truth = closed_form(backend, 1)
    error = np.abs(result.pointwise["elpd"].to_numpy() - truth)
    late = result.pointwise["n_past"].to_numpy() >= T - 10  # little future removed
    assert error[late].max() < 0.05
    assert result.verdict in ("doubtful", "unreliable") and result.nonlinearity > 0.1
    assert "Linearity of the first-order approximation" in str(result)


def test_weight_derivatives_equal_to_the_terms_give_the_plain_ij(ar2):
    # A model whose weighted likelihood is sum_t w_t l_t has d log p / d w_t = l_t.
    _, post = ar2
    plain = bayesij.lfo(post, min_train=MIN_TRAIN, horizon=2, method="ij")
    given = bayesij.lfo(
        post, min_train=MIN_TRAIN, horizon=2, method="ij", weight_derivative=post.log_lik.values
    )
    np.testing.assert_allclose(given.pointwise["elpd"], plain.pointwise["elpd"], rtol=0, atol=1e-12)
    doubled = bayesij.lfo(
        post,
        min_train=MIN_TRAIN,
        horizon=2,
        method="ij",
        weight_derivative=2 * post.log_lik.values,
    )
    assert not np.allclose(doubled.pointwise["elpd"], plain.pointwise["elpd"])
    with pytest.raises(ValueError, match=r"weight_derivative: found a value with method='psis'"):
        bayesij.lfo(post, min_train=MIN_TRAIN, weight_derivative=post.log_lik.values)


def test_lfo_arguments_are_checked(ar2):
    backend, post = ar2
    with pytest.raises(ValueError, match=r"min_train: found 79 with horizon 2 for 80 time"):
        bayesij.lfo(post, min_train=79, horizon=2)
    with pytest.raises(ValueError, match=r"method: found 'loo'; expected one of"):
        bayesij.lfo(post, min_train=20, method="loo")
    with pytest.raises(ValueError, match=r"backend: found None; expected a refit backend"):
        bayesij.lfo(post, min_train=20, method="exact")
    with pytest.raises(ValueError, match=r"horizon: found 0; expected an integer >= 1"):
        bayesij.lfo(post, min_train=20, horizon=0)
