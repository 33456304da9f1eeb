"""The refit scheduler (Shi, Steinhardt & Liang 2015's idea: spend the budget where the
approximation is least trustworthy): it finds the points PSIS gets wrong before uniform
sampling would, and stops when the estimated remaining error is small."""

import numpy as np
import pytest

import bayesij
from bayesij import refit


def _high_leverage(n=60, seed=4):
    """A regression with four outlying points far out in x: PSIS k-hat is high there."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    x[:4] = [6.0, -6.5, 7.0, 6.2]
    y = 1 + 0.5 * x + rng.normal(size=n)
    y[:4] += [-5.0, 5.5, -6.0, 4.5]
    return np.column_stack([np.ones(n), x]), y


def test_scheduler_finds_the_badly_approximated_points_before_uniform_sampling():
    X, y = _high_leverage()
    backend = refit.ConjugateNormalBackend(X, y, sigma=1.0, draws=1000, seed=2)
    post = backend.fit(np.ones(y.size))
    with pytest.warns(UserWarning, match="Pareto k-hat"):
        psis = bayesij.loo(post).pointwise["elpd_loo"].to_numpy()
    truth = []
    for n in range(y.size):
        weights = np.ones(y.size)
        weights[n] = 0
        truth.append(backend.model.log_predictive(weights, [n])[0])
    bad = set(np.flatnonzero(np.abs(psis - truth) > 0.05).tolist())
    assert 1 <= len(bad) <= 4, bad  # a few points where PSIS is off by more than 0.05
    budget = 4
    auto = refit.loo(
        post,
        backend,
        points="auto",
        budget=budget,
        tolerance=0.0,
        executor="sequential",
        progress=False,
    )
    chosen = auto.table("psis")["obs"].tolist()
    assert bad <= set(chosen), (bad, chosen)
    assert chosen[0] == max(bad, key=lambda n: abs(psis[n] - truth[n]))
    # Uniform sampling needs on average (b / (b + 1)) (N + 1) refits to meet all b bad
    # points; the scheduler met them within its budget of 4.
    uniform = len(bad) / (len(bad) + 1) * (y.size + 1)
    assert uniform > 5 * budget


def test_scheduler_stops_early_when_the_remaining_error_is_small(backend, post):
    report = refit.loo(
        post, backend, points="auto", budget=30, executor="sequential", progress=False
    )
    assert report.summary["stopped early"] is True
    assert report.n_refits < 30
    se = bayesij.loo(post).se
    assert report.summary["estimated remaining error"] < 0.1 * se  # the default tolerance


def test_a_group_campaign_s_stop_rule_calibrates_on_the_groups_joint_densities():
    """With joint=True (leave-one-group-out) the stop rule's calibration reads each record's
    joint density of the group, not the density of its first observation."""
    from bayesij.refit.scheduler import LooPriorities, LooStopRule

    error = np.array([0.1, 0.1, 0.1])
    priorities = LooPriorities(order=np.arange(3), error=error)
    psis = np.array([-10.0, -12.0, -11.0])
    keys = ["logo-a", "logo-b", "logo-c"]
    records = {
        key: {"status": "ok", "lpd": [-1.0], "lpd_joint": psis[i] + 0.4}
        for i, key in enumerate(keys)
    }
    joint = LooStopRule(priorities, psis, keys, np.arange(3), 0.0, joint=True)
    pointwise = LooStopRule(priorities, psis, keys, np.arange(3), 0.0)
    assert joint.calibration(records) == pytest.approx(4.0)  # |0.4| / 0.1
    assert pointwise.calibration(records) > 50  # it would read the first point's -1.0
