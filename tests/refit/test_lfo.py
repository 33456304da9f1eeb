"""Exact leave-future-out by refits (bayesij.lfo is a campaign of refits to the past)
against the closed form of a conjugate AR(2) model; a resumed campaign refits nothing; bad
arguments named."""

import json

import numpy as np
import pytest

import bayesij
from conjugate import ar2_fit, lfo_closed_form

T, MIN_TRAIN = 80, 20


@pytest.fixture(scope="module")
def ar2():
    return ar2_fit(T)


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
    truth = lfo_closed_form(backend, MIN_TRAIN, horizon)
    table = result.pointwise
    assert len(table) == T - horizon - MIN_TRAIN + 1 == result.n_refits
    z = (table["elpd"].to_numpy() - truth) / table["mcse"].to_numpy()
    assert np.all(np.abs(z) < 4.5), np.abs(z).max()
    assert np.all(table["exact_khat"] < 0.7)  # each refit's predictive draws: light tails
    assert result.elpd == pytest.approx(truth.sum(), abs=4 * np.sqrt((table["mcse"] ** 2).sum()))
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(table)
    again = exact_lfo()
    assert again.elpd == result.elpd, "resumed from the store"
    # nothing refitted again: the store holds the same records (a rerun would append)
    assert (tmp_path / "records.jsonl").read_text().splitlines() == lines
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == len(lines)
    assert json.loads(lines[0])["key"] == f"lfo-{MIN_TRAIN}"


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


def test_failed_exact_refits_are_kept_and_run_again_by_a_store_that_retries(ar2, tmp_path):
    backend, post = ar2
    disk = {"full": True}  # a transient failure: the disk fills, then is freed

    def fit(weights):
        if disk["full"]:
            raise OSError("no space left on device")
        return backend.fit(weights)

    flaky = bayesij.refit.CallableBackend(fit, n_obs=T)

    def exact_lfo(store):
        return bayesij.lfo(
            post,
            flaky,
            min_train=T - 3,
            method="exact",
            store=store,
            executor="sequential",
            progress=False,
        )

    with pytest.raises(RuntimeError, match=r"3 of 3 exact refits failed.*retry_failed=True"):
        exact_lfo(tmp_path)
    disk["full"] = False
    with pytest.raises(RuntimeError, match=r"3 of 3 exact refits failed"):  # a failure is kept
        exact_lfo(tmp_path)
    retried = exact_lfo(bayesij.refit.CampaignStore(tmp_path, retry_failed=True))
    assert retried.n_refits == 3
    assert np.isfinite(retried.pointwise["elpd"]).all()
