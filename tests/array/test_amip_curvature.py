"""The second-order prediction of a set's change against exact mathematics: a normal linear
model (the quadratic model is exact there) and exact MLE refits of a logistic regression
(tests/helpers/logistic_amip.py)."""

import numpy as np
import pytest

from bayesij.array.amip_curvature import (
    BREAKDOWN,
    MAX_COLUMNS,
    MAX_MODEL_PARAMETERS,
    MAX_PARAMETERS,
    CentredColumns,
    SetCurvature,
    curvature_of,
    curvatures_of,
)
from bayesij.array.amip_noise import nonlinear_band


def _normal_data(n=60, seed=0):
    """The design and response of :func:`_normal_model`, and the generator that then
    draws its posterior."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    X[:5, 1] = [3.0, 3.2, 2.8, 3.1, 2.9]  # high leverage: dropping them curves the mean
    y = X @ [0.5, 0.3] + rng.normal(size=n)
    y[:5] += 2.0
    return X, y, rng


def _normal_model(n=60, draws=20_000, seed=0):
    """Exact posterior draws of a normal regression with known sd 1 and a flat prior, the
    pointwise log-likelihood, and the exact posterior mean under observation weights."""
    X, y, rng = _normal_data(n, seed)

    def exact(weights):
        gram = (X.T * weights) @ X
        return np.linalg.solve(gram, (X.T * weights) @ y), np.linalg.inv(gram)

    mean, cov = exact(np.ones(n))
    beta = rng.multivariate_normal(mean, cov, size=draws)
    log_lik = -0.5 * (y - beta @ X.T) ** 2
    return beta, log_lik, exact


def test_a_quadratic_log_likelihood_is_predicted_exactly_to_second_order():
    beta, log_lik, exact = _normal_model()
    curvature = curvature_of(beta[None], 1)
    order = np.arange(5)  # the leveraged points
    for sign in (0, -1):  # the mean, and the lower end of mean +- 1.96 sd
        changes = curvature.changes(log_lik[:, order], sign, 1.96)
        full_mean, full_cov = exact(np.ones(60))
        for k in range(1, 6):
            weights = np.ones(60)
            weights[order[:k]] = 0
            mean, cov = exact(weights)
            truth = (mean[1] - full_mean[1]) + sign * 1.96 * (
                np.sqrt(cov[1, 1]) - np.sqrt(full_cov[1, 1])
            )
            assert changes.second[k - 1] == pytest.approx(truth, rel=0.03, abs=2e-3)
            assert changes.cubic[k - 1] < 1e-6 and changes.weight[k - 1] < 1e-4
        # the first order misses by far more than the second does
        assert abs(changes.first[-1] - truth) > 5 * abs(changes.second[-1] - truth)


def test_exact_logistic_refits_lie_in_the_second_order_band():
    # Units ranked by their exact (MLE) first-order effect, so that the draws' first-order
    # change along the ranking carries its Monte Carlo error without selection's optimism;
    # the band (from the first-order change to beyond the second-order one), widened by
    # three of its Monte Carlo SEs, holds the exact change.
    from logistic_amip import NAMES, linear_effects, log_lik, metric, sample, wells_like

    X, y = wells_like(3020, seed=0)
    for seed in (1, 2):
        beta, _ = sample(X, y, seed=seed)
        flat = log_lik(X, y, beta).reshape(-1, y.size)
        for k, sign in ((1, 0), (2, -1), (3, 0)):
            start = metric(X, y, None, k, sign)
            effects = -np.sign(start) * linear_effects(X, y, None, k, sign)
            order = np.argsort(-effects)[:302]
            changes = curvature_of(beta, k).changes(flat[:, order], sign, 1.96)
            f = beta[..., k].reshape(-1)
            for size in (50, 150, 302):
                weights = np.ones(y.size)
                weights[order[:size]] = 0
                truth = metric(X, y, weights, k, sign) - start
                summed = flat[:, order[:size]].sum(axis=1)
                terms = (f - f.mean()) * (summed - summed.mean())
                mcse = terms.std() / np.sqrt(f.size)  # independent-ish draws (IMH)
                second = changes.second[size - 1]
                low, high = (end[size - 1] for end in changes.band())
                slack = 3 * mcse * abs(second / changes.first[size - 1])
                assert low - slack <= truth <= high + slack, (NAMES[k], size)
                assert changes.weight[size - 1] > 0  # not quadratic: the band is widened
                first_error = abs(changes.first[size - 1] - truth)
                if size >= 150:  # where the nonlinearity outgrows the Monte Carlo error
                    assert abs(second - truth) < first_error  # better than first order
            assert abs(changes.first[-1] - truth) > 0.2 * abs(truth)  # clearly nonlinear


def test_a_set_holding_the_precision_breaks_the_model_down():
    beta, log_lik, _ = _normal_model(n=8, draws=4000)
    curvature = curvature_of(beta[None], 1)
    changes = curvature.changes(log_lik, 0, 1.96)
    # Dropping all 8 observations leaves an improper flat-prior posterior: past the
    # breakdown the change is unbounded (+-inf) in the first order's direction; the band
    # keeps its first-order end and is open on the runaway's side.
    assert np.isinf(changes.second[-1])
    ratios = curvature.ratios(log_lik, 0, 1.96)
    assert np.isinf(ratios[:2, -1]).all() and np.isfinite(ratios[:, 0]).all()
    assert np.all(ratios[2] == 0.5)  # known sd: a quadratic log-likelihood, banded closely
    low, high = nonlinear_band(np.array([0.3]), ratios[:, -1:])
    assert low[0] == 0.3 and high[0] == np.inf
    low, high = nonlinear_band(np.array([-0.3]), ratios[:, -1:])
    assert low[0] == -np.inf and high[0] == -0.3
    # A finite second order with an infinite widening (the quadratic explains too little),
    # or a breakdown it does not explain (NaN): no side is known.
    first = np.array([0.3, 0.3, -0.3])
    factors = np.array([[1.5, np.inf, np.inf], [np.inf, np.nan, np.nan]])
    low, high = nonlinear_band(first, factors)
    assert np.isneginf(low).all() and np.isposinf(high).all()
    assert 0 < BREAKDOWN < 1


def test_nonlinear_band_spans_both_orders_and_widens_beyond_the_second():
    first = np.array([[1.0, -2.0, 0.0, 1.0]])
    factors = np.array([[1.5, 2.0, 3.0, 0.5], [0.25, 0.25, 0.1, 0.0]])
    low, high = nonlinear_band(first, factors)
    # 1 -> 1.5, widened by a quarter of |1|: up to 1.75; -2 -> -4, widened by a quarter of
    # |-2|: down to -4.5; a zero change stays 0; 1 -> 0.5, not widened: between them.
    np.testing.assert_allclose(low, [[1.0, -4.5, 0.0, 0.5]])
    np.testing.assert_allclose(high, [[1.75, -2.0, 0.0, 1.0]])


def test_set_curvature_reads_a_matrix_or_the_columns_it_was_given():
    beta, log_lik, _ = _normal_model(draws=4000)
    curvature = curvature_of(beta[None], 1)
    from_matrix = SetCurvature(curvature, 0, 1.96, matrix=log_lik)
    columns = {u: log_lik[:, u] for u in range(10)}
    from_columns = SetCurvature(curvature, 0, 1.96, columns=columns)
    units = np.array([0, 3, 1, 7, 2])
    np.testing.assert_allclose(from_columns(units), from_matrix(units), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        from_matrix(units), curvature.ratios(log_lik[:, units], 0, 1.96), atol=1e-12
    )
    # a unit whose column was not read ends the model's reach: the band opens from there
    partial = from_columns(np.array([0, 1, 20, 2]))
    assert np.isfinite(partial[:, :2]).all() and np.isinf(partial[1, 2:]).all()
    assert MAX_COLUMNS >= 1000


def test_the_model_is_fitted_in_the_most_correlated_quantities():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(4000, 1))
    noise = rng.normal(size=(4000, MAX_MODEL_PARAMETERS + 4))
    quantities = np.concatenate([base, noise], axis=1)
    quantities[:, 3] += 5 * base[:, 0]  # strongly correlated with quantity 0
    quantities[:, 5] = 1.0  # constant: left out
    curvature = curvature_of(quantities[None], 0)
    assert curvature.n_parameters == MAX_MODEL_PARAMETERS
    chosen = curvature.design[:, : curvature.n_parameters]
    np.testing.assert_allclose(chosen[:, curvature.column], base[:, 0] - base.mean())
    correlation = np.corrcoef(chosen.T)[curvature.column]
    assert np.sort(np.abs(correlation))[-2] > 0.9  # with its partner
    assert curvature_of(quantities[None, :20], 0) is None  # too few draws for the design
    assert curvature_of(quantities[None], 5) is None  # a constant quantity


def test_a_model_takes_every_quantity_the_draws_hold():
    # Past MAX_PARAMETERS a model (of a mean or of an interval end) is fitted in all the
    # quantities up to MAX_MODEL_PARAMETERS, where the draws hold four per column of its
    # quadratic and cubic designs (454 columns for 12), and in as many as they hold
    # otherwise: the searched one, the scales (a mean's model) and the most correlated
    # others; never fewer than MAX_PARAMETERS.
    rng = np.random.default_rng(4)
    quantities = rng.normal(size=(1, 4000, 12))
    scales = np.zeros(12, dtype=bool)
    mean, end = curvatures_of(quantities, [3, 3], scales, with_scales=[True, False])
    assert mean.n_parameters == end.n_parameters == 12
    assert mean.design.shape[1] == 12 + 12 * 13 // 2
    few = quantities[:, : 4 * 454 - 1]  # one draw short of twelve's designs: eleven's
    (held, end) = curvatures_of(few, [3, 3], scales, with_scales=[True, False])
    assert held.n_parameters == end.n_parameters == 11
    (floor,) = curvatures_of(quantities[:, :500], [3], scales)  # holds fewer than eight
    assert floor.n_parameters == MAX_PARAMETERS
    many = rng.normal(size=(1, 4000, MAX_MODEL_PARAMETERS + 5))
    many[..., 7] += 3 * many[..., 0]  # strongly correlated with quantity 0
    many[..., -1] = np.exp(many[..., -1] / 10)  # a scale, correlated with nothing
    is_scale = np.zeros(many.shape[-1], dtype=bool)
    is_scale[-1] = True
    (past,) = curvatures_of(many, [0], is_scale, with_scales=[True])
    assert past.n_parameters == MAX_MODEL_PARAMETERS
    chosen = past.design[:, : past.n_parameters]
    on_scale = np.log(many[0, :, -1])
    assert any(np.allclose(c, on_scale - on_scale.mean()) for c in chosen.T)  # the scale
    assert any(np.allclose(c, many[0, :, 7] - many[0, :, 7].mean()) for c in chosen.T)


def test_quantities_modelled_in_the_same_parameters_share_one_design():
    # Where the draws hold the designs every model is fitted in all the quantities (up to
    # MAX_MODEL_PARAMETERS): one design, the searched quantity's column each; beyond, each
    # quantity's own. Either way the same arrays as the model built for that quantity
    # alone (to rounding), and a store computes the shared design's terms of a unit once
    # for all its quantities.
    rng = np.random.default_rng(3)
    few = rng.normal(size=(1, 4000, 4)) * [1.0, 2.0, 0.5, 3.0]
    many = rng.normal(size=(1, 4000, MAX_MODEL_PARAMETERS + 2))
    for quantities, indices in ((few, [2, 0, 3, 2]), (many, [0, 4, MAX_MODEL_PARAMETERS + 1])):
        models = curvatures_of(quantities, indices)
        for model, index in zip(models, indices, strict=True):
            alone = curvature_of(quantities, index)
            assert model.column == alone.column
            for field, a, b in zip(model._fields, model, alone, strict=True):
                if field == "gaussian_basis":  # an SVD's basis: the same span, to rounding
                    np.testing.assert_allclose(np.abs(a.T @ b), np.eye(a.shape[1]), atol=1e-8)
                elif isinstance(a, np.ndarray):  # BLAS on threads or not: to rounding
                    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-15)
        shared = {id(model.fit) for model in models}
        assert len(shared) == (1 if quantities is few else len(set(indices)))
    models = curvatures_of(few, [0, 1])
    log_lik = rng.normal(size=(4000, 6))
    store = CentredColumns(4000, matrix=log_lik, units=np.arange(6))
    for model in models:
        store.terms(model, np.arange(6))
    assert len(store._terms) == 1
    assert curvatures_of(few[:, :20], [0, 1]) == [None, None]  # too few draws


def test_a_hierarchy_s_groups_are_beyond_a_model_in_its_global_quantities():
    # A group's log-likelihood moves with its own effect, not with mu: the quadratic in mu
    # explains almost none of it, so the model is not used (the band is unbounded: the
    # conditional first order may err either way).
    from normal_hierarchy import simulate

    hierarchy = simulate(30, 5, seed=1)
    theta = hierarchy.draws(None, 4, 1000, seed=2)
    log_lik = hierarchy.log_lik(theta)
    groups = np.stack(
        [log_lik[..., hierarchy.codes == g].sum(-1) for g in range(30)], axis=-1
    ).reshape(4000, -1)
    changes = curvature_of(theta[..., :1], 0).changes(groups[:, :8], 0, 1.96)
    assert np.isinf(changes.weight).all()
    low, high = changes.band()
    assert np.isneginf(low).all() and np.isposinf(high).all()
    # the observations of a regression, in its coefficients: explained, the model is used
    beta, observations, _ = _normal_model(draws=4000)
    assert np.isfinite(
        curvature_of(beta[None], 1).changes(observations[:, :5], 0, 1.96).weight
    ).all()


def test_set_curvature_answers_the_same_units_once():
    # The ranking is asked for by the answer and by the curve: computed once, and a caller
    # that changes what it got back does not change what the next one gets.
    beta, log_lik, _ = _normal_model(draws=4000)
    ratios = SetCurvature(curvature_of(beta[None], 1), 0, 1.96, matrix=log_lik)
    units = np.array([0, 3, 1])
    first = ratios(units)
    first[:] = 0.0
    np.testing.assert_allclose(ratios(units), ratios._ratios(units))
    assert ratios(np.array([0, 3]))[0, 0] == pytest.approx(ratios(units)[0, 0])


def _standard_normal_draws(size=40_000):
    """Quantiles of N(0, 1) standardised to mean 0 and variance 1 (divisor S): draws without
    Monte Carlo error for the moments the quadratic model reads."""
    from scipy.stats import norm

    theta = norm.ppf((np.arange(size) + 0.5) / size)
    return (theta - theta.mean()) / theta.std()


def _tilted_mean(log_lik):
    """The mean of N(0, 1) tilted by ``exp(-log_lik)`` (dropping the units), by quadrature."""
    grid = np.linspace(-12, 12, 200_001)
    log_density = -(grid**2) / 2 - log_lik(grid)
    weights = np.exp(log_density - log_density.max())
    return float(weights @ grid / weights.sum())


def test_the_model_breaks_down_when_a_set_holds_three_quarters_of_the_precision():
    # Exactly quadratic units l_u = -a theta^2 / 2 + b theta under a N(0, 1) posterior:
    # dropping k of them leaves precision 1 - k a and mean -k b / (1 - k a). With a = 0.1 the
    # second-order prediction is exact up to 7 units (precision 0.3) and unbounded from 8
    # (precision 0.2, below 1 - BREAKDOWN = 0.25 of what it was).
    theta = _standard_normal_draws()
    a, b = 0.1, 0.05
    columns = np.repeat((-a * theta**2 / 2 + b * theta)[:, None], 9, axis=1)
    changes = curvature_of(theta[None, :, None], 0).changes(columns, 0, 1.96)
    for k in range(1, 8):
        assert changes.second[k - 1] == pytest.approx(-k * b / (1 - k * a), rel=1e-6)
        assert changes.first[k - 1] == pytest.approx(-k * b, rel=1e-6)
    assert np.isinf(changes.second[7:]).all() and np.isinf(changes.beyond[7:]).all()
    low, high = changes.band()
    # past the breakdown: open on the runaway's side (the change is negative), closed at
    # the first order
    assert np.isfinite(low[:7]).all() and (low[7:] == -np.inf).all()
    np.testing.assert_array_equal(high[7:], changes.first[7:])
    assert 1 - BREAKDOWN == pytest.approx(0.25)


@pytest.mark.parametrize("a, b, g", [(0.05, 0.1, 0.01), (0.05, 0.2, 0.02), (0.08, 0.15, 0.015)])
def test_a_cubic_log_likelihood_widens_the_band_to_the_exact_change(a, b, g):
    # A unit l = -a theta^2 / 2 + b theta + g theta^3 under N(0, 1): the quadratic fit gives
    # the Newton step, which the cubic term carries further (the tilted density is skewed).
    # The exact mean after dropping it (quadrature) lies beyond the second-order
    # prediction, by 35-85 % of the gap between the orders, and inside the band.
    theta = _standard_normal_draws()
    unit = -a * theta**2 / 2 + b * theta + g * theta**3
    changes = curvature_of(theta[None, :, None], 0).changes(unit[:, None], 0, 1.96)
    exact = _tilted_mean(lambda t: -a * t**2 / 2 + b * t + g * t**3)
    first, second = changes.first[0], changes.second[0]
    assert first == pytest.approx(-(b + 3 * g), rel=1e-3)  # Cov(theta, theta^3) = 3
    assert second == pytest.approx(first / (1 - a), rel=1e-3)  # the quadratic part
    # the departure: half the cubic term's change of the Hessian, 6 g, over the shift
    assert changes.cubic[0] == pytest.approx(3 * abs(g * second) / (1 - a), rel=1e-2)
    assert abs(exact) > abs(second) > abs(first)  # beyond both orders
    low, high = changes.band()
    assert low[0] <= exact <= high[0] and high[0] == first
    assert exact - low[0] < abs(exact - first)  # and not wide open


def test_a_larger_cubic_departure_can_take_the_change_just_beyond_the_band():
    # The limit of the widening, stated: three such units (departure 0.05) move the mean
    # 110 % of the gap between the orders beyond the second-order prediction; the band
    # (one gap) falls short by 1.3 % of the change.
    theta = _standard_normal_draws()
    a, b, g = 0.05, 0.1, 0.01
    unit = -a * theta**2 / 2 + b * theta + g * theta**3
    changes = curvature_of(theta[None, :, None], 0).changes(np.repeat(unit[:, None], 3, 1), 0, 1.96)
    exact = _tilted_mean(lambda t: 3 * (-a * t**2 / 2 + b * t + g * t**3))
    low, _ = changes.band()
    assert changes.cubic[-1] == pytest.approx(0.05, abs=0.005)
    assert 0 < low[-1] - exact < 0.02 * abs(exact)


def test_centred_columns_are_read_once_and_answer_as_the_matrix_does():
    # The shared store: rows of the units read up front, others read when asked for, each
    # unit's terms computed once per model; every answer as from the columns themselves.
    from bayesij.array.amip_curvature import CentredColumns

    beta, log_lik, _ = _normal_model(draws=4000)
    log_lik = log_lik.copy()
    log_lik[7, 4] = -np.inf  # a non-finite value counts as 0, as the first order counts it
    curvature = curvature_of(beta[None], 1)
    store = CentredColumns(4000, matrix=log_lik, units=np.array([9, 3, 4, 0, 3]))
    np.testing.assert_array_equal(store.held, [0, 3, 4, 9])
    units = np.array([4, 3, 12, 9, 0, 30])  # 12 and 30 are not held: read when asked
    np.testing.assert_array_equal(store.slots(units), [2, 1, -1, 3, 0, -1])
    expected = np.where(np.isfinite(log_lik[:, units]), log_lik[:, units], 0.0)
    expected -= expected.mean(axis=0)
    np.testing.assert_allclose(store.rows_of(units), expected.T, atol=1e-12)
    np.testing.assert_allclose(
        store.prefix_sums(units, np.array([1, 4, 6])), np.cumsum(expected.T, 0)[[0, 3, 5]]
    )
    for _ in range(2):  # the second time from the kept terms
        first, hessians = store.terms(curvature, units)
        want_first, want_hessians = curvature.unit_terms(log_lik[:, units])
        np.testing.assert_allclose(first, want_first, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(hessians, want_hessians, rtol=1e-10, atol=1e-14)
    done = store._kept_terms(curvature)[2]
    np.testing.assert_array_equal(done, [True] * 4)
    shared = SetCurvature(curvature, -1, 1.96, store=store)
    np.testing.assert_allclose(
        shared(units), curvature.ratios(log_lik[:, units], -1, 1.96), rtol=1e-10
    )
    # from columns alone (a lazy log-likelihood): reach ends at the first unit not given
    lazy = CentredColumns(4000, columns={u: log_lik[:, u] for u in (0, 3, 4)})
    assert lazy.reach(np.array([3, 0, 9, 4])) == 2 and lazy.reach(np.array([4, 0])) == 2
    assert CentredColumns(4000).reach(np.array([1])) == 0
    # from rows read by the caller: centred in place, held without a copy
    rows = np.ascontiguousarray(log_lik[:, [0, 3, 4]].T)
    given = CentredColumns(4000, units=np.array([0, 3, 4]), rows=rows)
    assert given.rows is rows
    np.testing.assert_allclose(given.rows_of(np.array([4, 0])), expected.T[[0, 4]], atol=1e-12)
    for units in (np.array([0, 4, 3]), np.array([0, 3])):
        with pytest.raises(ValueError, match="units: expected the sorted, distinct units"):
            CentredColumns(4000, units=units, rows=rows.copy())


def test_rows_centred_in_float64_and_held_in_float32_answer_as_the_matrix_to_its_precision(
    monkeypatch,
):
    # A lazy audit's ranked rows past a budget (stats.amip.SINGLE_PRECISION_BYTES): each
    # centred in float64 (non-finite values as 0, as the store centres them), then rounded;
    # sums, terms and second-order ratios as from the float64 columns to float32's precision.
    from bayesij.array.amip_curvature import CentredColumns, centre_into

    beta, log_lik, _ = _normal_model(draws=4000)
    log_lik = log_lik.copy()
    log_lik[7, 4] = -np.inf
    units = np.array([0, 3, 4, 9])
    double = CentredColumns(4000, matrix=log_lik, units=units)
    single = np.empty((4, 4000), dtype=np.float32)
    finite = np.zeros(4, dtype=bool)
    finite[[2, 0]] = centre_into(single, np.array([2, 0]), log_lik[:, [4, 0]])
    finite[[1, 3]] = centre_into(single, np.array([1, 3]), log_lik[:, [3, 9]])
    np.testing.assert_array_equal(finite, double.finite)
    np.testing.assert_array_equal(finite, [True, True, False, True])
    np.testing.assert_array_equal(single, double.rows.astype(np.float32))
    # a lazy block's units gathered from the block itself (chains, draws, units), in tiles
    monkeypatch.setattr("bayesij.array.amip_curvature.UNIT_TILE", 3)
    gathered = np.empty((4, 4000))
    block = log_lik.reshape(4, 1000, -1)
    with_which = centre_into(gathered, np.array([2, 0, 1, 3]), block, np.array([4, 0, 3, 9]))
    np.testing.assert_array_equal(with_which[[1, 2, 0, 3]], double.finite)
    np.testing.assert_array_equal(gathered, double.rows)
    store = CentredColumns(4000, units=units, rows=single, finite=finite)
    assert store.rows is single
    order = np.array([4, 3, 9, 0])
    grid = np.array([1, 3, 4])
    np.testing.assert_allclose(
        store.prefix_sums(order, grid), double.prefix_sums(order, grid), rtol=1e-6, atol=1e-6
    )
    assert store.prefix_sums(order, grid).dtype == np.float64
    assert store.rows_of(order).dtype == np.float64
    curvature = curvature_of(beta[None], 1)
    terms = store.terms(curvature, order), double.terms(curvature, order)
    for got, want in zip(*terms, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(
        SetCurvature(curvature, -1, 1.96, store=store)(order),
        SetCurvature(curvature, -1, 1.96, store=double)(order),
        rtol=1e-5,
    )


def test_held_float32_rows_give_their_terms_a_tile_at_a_time(monkeypatch):
    # The terms of many held float32 rows (a lazy audit's ranked rows) are read as float64
    # a tile of units at a time: the same terms as from every row at once, and no float64
    # copy of them all (at N = 4 10^5, 188 MiB beside 180 MiB of rows).
    import tracemalloc

    from bayesij.array.amip_curvature import CentredColumns, centre_into

    monkeypatch.setattr("bayesij.array.amip_curvature.UNIT_TILE", 64)
    beta, log_lik, _ = _normal_model(n=600, draws=4000)
    units = np.arange(600)
    rows = np.empty((600, 4000), dtype=np.float32)
    finite = centre_into(rows, units, log_lik)
    store = CentredColumns(4000, units=units, rows=rows, finite=finite)
    curvature = curvature_of(beta[None], 1)
    order = np.random.default_rng(1).permutation(600)
    tracemalloc.start()
    try:
        first, hessians = store.terms(curvature, order)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < rows.nbytes  # a float64 copy of every row: twice this bound
    want_first, want_hessians = curvature.unit_terms(rows[order].T.astype(float))
    np.testing.assert_allclose(first, want_first, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(hessians, want_hessians, rtol=1e-12, atol=1e-15)


def test_set_curvature_keeps_its_latest_answers():
    from bayesij.array.amip_curvature import RECENT

    beta, log_lik, _ = _normal_model(draws=4000)
    ratios = SetCurvature(curvature_of(beta[None], 1), 0, 1.96, matrix=log_lik)
    calls = []
    compute = ratios._ratios
    ratios._ratios = lambda units: calls.append(units.size) or compute(units)
    sets = [np.arange(k, k + 3) for k in range(RECENT + 1)]
    for units in sets[:RECENT] + sets[:RECENT]:  # asked again: kept
        ratios(units)
    assert calls == [3] * RECENT
    ratios(sets[RECENT])  # one more: the oldest is let go, the others kept
    ratios(sets[0])
    ratios(sets[RECENT - 1])
    assert len(calls) == RECENT + 2


def test_a_set_holding_one_direction_s_precision_breaks_the_model_down():
    # Five points far out in x hold most of the slope's precision and little of the
    # intercept's: dropping them leaves I + Sigma A with one small eigenvalue and one near 1;
    # the smallest decides (past the breakdown the change is unbounded).
    rng = np.random.default_rng(2)
    n = 60
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    X[:5, 1] = 30.0
    y = X @ [0.5, 0.3] + rng.normal(size=n)
    cov = np.linalg.inv(X.T @ X)
    beta = rng.multivariate_normal(np.linalg.solve(X.T @ X, X.T @ y), cov, size=20_000)
    log_lik = -0.5 * (y - beta @ X.T) ** 2
    step = np.eye(2) - cov @ (X[:5].T @ X[:5])  # I + Sigma A of the five, exactly
    assert np.linalg.eigvalsh(step)[0] < 1 - BREAKDOWN < np.linalg.eigvalsh(step)[-1]
    changes = curvature_of(beta[None], 1).changes(log_lik[:, :5], 0, 1.96)
    assert np.isfinite(changes.second[0]) and np.isinf(changes.second[4])


@pytest.mark.parametrize("p", [1, 2, 4])
def test_the_cubic_term_s_hessian_is_the_polynomial_s(p):
    # Reference: central second differences of sum_t gamma_t d_i d_j d_k itself (exact for
    # a cubic up to rounding), the monomials in the order of the model's cubic rows.
    from bayesij.array.amip_curvature import _cubic_hessian, _triples

    rng = np.random.default_rng(p)
    triples = _triples(p)
    gamma = rng.normal(size=(3, len(triples)))
    point = rng.normal(size=(3, p))

    def cubic(g, x):
        return sum(c * x[i] * x[j] * x[k] for c, (i, j, k) in zip(g, triples, strict=True))

    step, eye = 0.5, np.eye(p)
    for row in range(3):
        g, x = gamma[row], point[row]
        expected = np.array(
            [
                [
                    (
                        cubic(g, x + step * (eye[a] + eye[b]))
                        - cubic(g, x + step * (eye[a] - eye[b]))
                        - cubic(g, x - step * (eye[a] - eye[b]))
                        + cubic(g, x - step * (eye[a] + eye[b]))
                    )
                    / (4 * step**2)
                    for b in range(p)
                ]
                for a in range(p)
            ]
        )
        np.testing.assert_allclose(_cubic_hessian(gamma, point, p)[row], expected, atol=1e-10)


def test_the_cubic_fit_recovers_a_cubic_polynomial_s_coefficients():
    # A unit whose log-likelihood is a cubic polynomial in three parameters: what is left
    # after the quadratic fit, solved against the model's cubic design, gives back the
    # polynomial's coefficients, in the order of its triples (each monomial built from
    # its own three factors).
    from bayesij.array.amip_curvature import _triples

    rng = np.random.default_rng(8)
    theta = rng.normal(size=(40_000, 3))
    triples = _triples(3)
    gamma = rng.normal(size=len(triples))
    monomials = [theta[:, i] * theta[:, j] * theta[:, k] for i, j, k in triples]
    unit = np.stack(monomials, axis=1) @ gamma
    curvature = curvature_of(theta[None], 0)
    centred = unit - unit.mean()
    left = centred - curvature.design @ (curvature.fit @ centred)
    np.testing.assert_allclose(curvature.cubic @ left, gamma, atol=1e-3)  # 1.4e-5 here


def test_the_breakdown_test_is_the_smallest_eigenvalue_s():
    # One batched Cholesky factorisation stands for the eigenvalues where every matrix is
    # above the breakdown; with one below, the eigenvalues decide.
    from bayesij.array.amip_curvature import BREAKDOWN, _above_breakdown

    rng = np.random.default_rng(2)
    root = rng.normal(size=(40, 5, 5)) * 0.2
    tilted = np.eye(5) + root @ root.transpose(0, 2, 1)  # eigenvalues at least 1
    assert _above_breakdown(tilted).all()
    below = tilted.copy()
    vectors = np.linalg.eigh(below[7])[1]
    below[7] -= 0.9 * np.outer(vectors[:, 0], vectors[:, 0]) * np.linalg.eigvalsh(below[7])[0]
    below[9] = np.eye(5) * (1 - BREAKDOWN) * 0.999
    expected = np.linalg.eigvalsh(below)[:, 0] > 1 - BREAKDOWN
    got = _above_breakdown(below)
    np.testing.assert_array_equal(got, expected)
    assert not got[7] and not got[9] and got.sum() == 38


def test_one_product_gives_a_prefix_s_residual_cubic_and_explained_share():
    from bayesij.array.amip_curvature import _triples

    # The cubic share reads a prefix's quadratic and cubic coefficients from one product
    # (the latter then through the cubic pseudo-inverse's small factor):
    # the cubic rows are orthogonal to the design, so the residual after the quadratic
    # (least squares, solved here by NumPy) has the prefix's own cubic coefficients, and the
    # explained share is the projection's squared length over the prefix's.
    rng = np.random.default_rng(4)
    theta = rng.normal(size=(6000, 3)) @ np.array([[1.0, 0.3, 0.0], [0, 1, 0.5], [0, 0, 1]])
    curvature = curvature_of(theta[None], 0)
    d = theta - theta.mean(axis=0)
    sums = np.stack(
        [
            d @ rng.normal(size=3) + 0.3 * (d[:, 0] * d[:, 1]) + s * d[:, 2] ** 3 + noise
            for s, noise in [(0.0, 0.0), (0.2, 0.0), (0.05, rng.normal(size=6000))]
        ]
    )
    sums -= sums.mean(axis=1, keepdims=True)
    coefficients = np.linalg.lstsq(curvature.design, sums.T, rcond=None)[0]
    left = sums - (curvature.design @ coefficients).T
    both = sums @ curvature.share_map
    f = curvature.design.shape[1]
    np.testing.assert_allclose(both[:, :f], coefficients.T, rtol=1e-9, atol=1e-12)
    cubic = both[:, f:] @ curvature.cubic_post
    np.testing.assert_allclose(cubic, left @ curvature.cubic.T, rtol=1e-9, atol=1e-10)
    explained = np.einsum("gi,ij,gj->g", both[:, :f], curvature.gram, both[:, :f])
    expected = 1 - (left**2).sum(axis=1) / (sums**2).sum(axis=1)
    np.testing.assert_allclose(explained / (sums**2).sum(axis=1), expected, rtol=1e-9)
    assert expected[2] < 0.99 < expected[0]  # the noisy prefix is partly unexplained
    # what the cubic share reads: the residual's cubic coefficients by NumPy's pinv, and
    # a prefix constant over the draws fully explained (nothing to explain)
    d3 = curvature.design[:, :3]
    cubes = np.stack([d3[:, i] * d3[:, j] * d3[:, k] for i, j, k in _triples(3)], axis=1)
    rest = cubes - curvature.design @ np.linalg.lstsq(curvature.design, cubes, rcond=None)[0]
    with_constant = np.vstack([sums, np.zeros(6000)])
    fitted_cubic, share = curvature._prefix_fits(with_constant)
    np.testing.assert_allclose(
        fitted_cubic[:3], left @ np.linalg.pinv(rest).T, rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(share, [*expected, 1.0], rtol=1e-9)
    # a unit's terms: minus its covariance with the parameters, its quadratic's coefficients
    first, quad = curvature._coefficients(sums.T)
    np.testing.assert_allclose(first, -(d.T @ sums.T).T / 6000, rtol=1e-12)
    np.testing.assert_allclose(quad, coefficients[3:].T, rtol=1e-9, atol=1e-12)


def test_the_pseudo_inverses_are_numpy_s():
    # The design's pseudo-inverse and the cubic monomials' (less their quadratic part,
    # kept as factors) are NumPy's for designs of full rank.
    from bayesij.array.amip_curvature import _pseudo_inverse, _triples

    rng = np.random.default_rng(6)
    theta = rng.normal(size=(5000, 3)) @ np.array([[1, 0.4, 0], [0, 1, -0.3], [0, 0, 2.0]])
    curvature = curvature_of(theta[None], 1)
    np.testing.assert_allclose(
        _pseudo_inverse(curvature.design), np.linalg.pinv(curvature.design), atol=1e-12
    )
    np.testing.assert_allclose(curvature.fit, np.linalg.pinv(curvature.design), atol=1e-12)
    d = curvature.design[:, :3]
    cubes = np.stack([d[:, i] * d[:, j] * d[:, k] for i, j, k in _triples(3)], axis=1)
    rest = cubes - curvature.design @ np.linalg.lstsq(curvature.design, cubes, rcond=None)[0]
    np.testing.assert_allclose(curvature.cubic, np.linalg.pinv(rest), atol=1e-10)


def _scaled_regression(make):
    """Exact flat-prior posterior draws (beta, sigma) of a normal regression with unknown
    sd, the pointwise log-likelihood, and the exact metric under weights."""
    from bayesij import refit

    X, y = make()
    post = refit.FlatPriorRegressionBackend(X, y, draws=4000, seed=1).fit(np.ones(y.size))
    theta = post.quantities.values  # beta[1..p], sigma
    return X, y, theta, post.log_lik.values.reshape(-1, y.size)


@pytest.mark.parametrize("shape", ["mesquite", "kidiq"])
def test_with_the_residual_sd_held_a_normal_regression_s_change_is_near_exact(shape):
    # The posterior mean of a flat-prior normal regression's coefficients does not depend
    # on its residual sd: the Newton step with the sd held is the exact refit's (up to the
    # draws' Monte Carlo error); the joint step carries the sd's large move (outliers
    # dropped) into the coefficients through the cross terms and overshoots. The metric's
    # sd (significance) follows the sd's predicted change by the elasticity the draws show.
    from ols_amip import kidiq_shaped, linear_effects, mesquite_shaped, metric

    make, size = {"mesquite": (mesquite_shaped, 4), "kidiq": (kidiq_shaped, 43)}[shape]
    X, y, theta, flat = _scaled_regression(make)
    scales = np.array([False] * X.shape[1] + [True])
    worse = 0
    for k in range(1, X.shape[1]):
        held, joint = curvature_of(theta, k, scales), curvature_of(theta, k)
        assert held.elasticity[k, -1] == pytest.approx(2.0, abs=1.0) or shape == "kidiq"
        for sign in (0, -1, 1):
            start = metric(X, y, np.ones(y.size), k, sign, 1.96)
            effects = -np.sign(start) * linear_effects(X, y, k, sign, 1.96)
            order = np.argsort(-effects)[:size]
            weights = np.ones(y.size)
            weights[order] = 0
            truth = metric(X, y, weights, k, sign, 1.96) - start
            second = held.changes(flat[:, order], sign, 1.96).second[-1]
            together = joint.changes(flat[:, order], sign, 1.96).second[-1]
            # within 10 % (the mean), 15 % (an interval end: its sd's change is estimated)
            assert second == pytest.approx(truth, rel=0.10 if sign == 0 else 0.15)
            worse += abs(together - truth) > 2 * abs(second - truth)
    assert worse >= X.shape[1] - 1  # the joint step is the worse one on most questions


def test_the_variance_s_elasticity_in_a_scale_is_measured_only_where_the_draws_tell():
    # Coefficients' variance grows as sigma^2 (elasticity 2 in log sigma); a quantity
    # independent of sigma, 0; a scale whose logarithm barely varies gives no reading. A
    # quantity whose mean moves with the scale is not stepped with it held.
    rng = np.random.default_rng(3)
    log_sigma = rng.normal(0.0, 0.3, size=8000)
    spread = rng.normal(size=(8000, 2)) * np.exp(log_sigma)[:, None]
    theta = np.column_stack([spread[:, 0], rng.normal(size=8000), np.exp(log_sigma)])
    model = curvature_of(theta, 0, np.array([False, False, True]))
    assert model.elasticity[0, 2] == pytest.approx(2.0, abs=0.2)
    assert model.elasticity[1, 2] == pytest.approx(0.0, abs=0.2)
    assert model.mean_free.all()  # the coefficient's spread grows with sigma, not its mean
    moved = theta.copy()
    moved[:, 0] += 0.5 * log_sigma  # a hierarchy's mean, weighted by its groups' sd
    assert not curvature_of(moved, 0, np.array([False, False, True])).mean_free[0]
    narrow = theta.copy()
    narrow[:, 2] = np.exp(0.002 * log_sigma)  # the same draws, sigma almost constant
    assert curvature_of(narrow, 0, np.array([False, False, True])).elasticity[0, 2] == 0.0
    assert curvature_of(theta, 0).scales is None  # no scale named: the joint step


def test_a_searched_scale_is_modelled_on_its_own_scale():
    # sigma's own questions (halve it) are asked of sigma, not of its logarithm: its model
    # is the joint one in the draws as they are, whatever the others' models take; of a
    # set that is not normal observations of sd sigma (a logistic likelihood of the same
    # coefficients), the joint model's changes.
    from ols_amip import mesquite_shaped

    X, y, theta, flat = _scaled_regression(mesquite_shaped)
    scales = np.array([False] * X.shape[1] + [True])
    sigma = X.shape[1]
    searched, plain = curvature_of(theta, sigma, scales), curvature_of(theta, sigma)
    assert searched.scales is None and plain.normal_scale is None
    np.testing.assert_array_equal(searched.cov, plain.cov)
    draws = theta.reshape(-1, theta.shape[-1])
    logistic = -np.logaddexp(0.0, -(draws[:, :-1] @ X[:4].T))  # (S, 4)
    ours = searched.changes(logistic, 0, 1.96).second
    np.testing.assert_allclose(ours, plain.changes(logistic, 0, 1.96).second)
    beta = curvatures_of(theta, [1, sigma], scales)
    assert beta[0].scales is not None and beta[1].scales is None


@pytest.mark.parametrize("shape", ["mesquite", "kidiq"])
def test_a_normal_regression_s_residual_sd_after_a_drop_is_the_exact_refit_s(shape):
    # The residual sd's posterior mean after dropping the largest residuals of a flat
    # prior normal regression (mesquite: t(4) noise, the sd moves by half): the
    # inverse gamma of sigma^2 reweighted by the set's likelihood with the coefficients
    # integrated out, against the closed form sqrt(RSS' / 2) Gamma((nu' - 1) / 2) /
    # Gamma(nu' / 2); the joint quadratic's Newton step breaks down or misses by more.
    from ols_amip import kidiq_shaped, mean_sd, mesquite_shaped

    make = {"mesquite": mesquite_shaped, "kidiq": kidiq_shaped}[shape]
    X, y, theta, flat = _scaled_regression(make)
    sigma = X.shape[1]
    model = curvature_of(theta, sigma, np.array([False] * X.shape[1] + [True]))
    assert model.normal_scale is not None

    order = np.argsort(-np.abs(y - X @ np.linalg.lstsq(X, y, rcond=None)[0]))
    size = {"mesquite": 6, "kidiq": 60}[shape]
    ours = model.changes(flat[:, order[:size]], 0, 1.96)
    plain = curvature_of(theta, sigma).changes(flat[:, order[:size]], 0, 1.96)
    truths = []
    for k in range(1, size + 1):
        weights = np.ones(y.size)
        weights[order[:k]] = 0
        truths.append(mean_sd(X, y, weights) - mean_sd(X, y, np.ones(y.size)))
    truths = np.array(truths)
    # within 6 % (mesquite's 39 residual degrees of freedom: the inverse gamma's shape is
    # fitted to 4000 draws' moments), 1 % at kidiq's 430; inside the band either way
    rtol = {"mesquite": 0.06, "kidiq": 0.01}[shape]
    np.testing.assert_allclose(ours.second, truths, rtol=rtol, atol=0.01 * abs(truths[0]))
    assert ours.weight.max() <= 0.5 and np.isfinite(ours.factors()).all()
    assert np.all(np.abs(truths - ours.second) <= ours.weight * np.abs(ours.second - ours.first))
    worst = np.abs(np.where(np.isfinite(plain.second), plain.second, np.inf) - truths).max()
    assert worst > 3 * np.abs(ours.second - truths).max()
    assert truths[-1] < -0.1 * theta[..., sigma].mean()  # a move the test can see


@pytest.mark.parametrize("shape", ["mesquite", "kidiq"])
def test_a_normal_regression_s_sets_are_conditionally_normal_and_their_band_hugs_the_second(
    shape,
):
    # The log-likelihood of normal observations with the residual sd held is quadratic in
    # the coefficients times 1 / sigma^2: the normal family's design spans it to round-off,
    # so a coefficient's mean is banded around its second-order change (GAUSSIAN_SHARE of
    # the gap either side), and an interval end around its change with the coefficients
    # integrated out given sigma and sigma^2's inverse gamma reweighted (exact for this
    # flat prior); both hold the exact refit's. That needs the draws to show the
    # coefficients' variance growing as sigma^2 (mesquite, N = 46); where sigma is known
    # to a few percent (kidiq, N = 434) they cannot: an interval end's sd is then worked
    # out with the regression's growth (2) and its band widened by the sd had the
    # variance not grown; with control variates (influences that are not the draws'
    # covariances) the band reaches back to the first order. The joint step keeps the
    # band from the first order.
    from ols_amip import kidiq_shaped, linear_effects, mesquite_shaped, metric

    from bayesij.array.amip_curvature import GAUSSIAN_SHARE

    make, size = {"mesquite": (mesquite_shaped, 4), "kidiq": (kidiq_shaped, 43)}[shape]
    X, y, theta, flat = _scaled_regression(make)
    scales = np.array([False] * X.shape[1] + [True])
    for k in range(1, X.shape[1]):
        held = curvature_of(theta, k, scales)
        for sign in (0, -1, 1):
            start = metric(X, y, np.ones(y.size), k, sign, 1.96)
            order = np.argsort(np.sign(start) * linear_effects(X, y, k, sign, 1.96))[:size]
            changes = held.changes(flat[:, order], sign, 1.96)
            weights = np.ones(y.size)
            weights[order] = 0
            truth = metric(X, y, weights, k, sign, 1.96) - start
            low, high = (end[-1] for end in changes.band())
            gap = abs(changes.second[-1] - changes.first[-1])
            # an interval end's band is held to the sd's Monte Carlo error (up to 1.6 % of
            # the change here; the answers' replicates carry it)
            slack = 0.0 if sign == 0 else 0.05 * abs(truth)
            assert low - slack <= truth <= high + slack, (k, sign, low, truth, high)
            assert np.all(changes.near == GAUSSIAN_SHARE)
            if sign == 0 or shape == "mesquite":
                assert high - low == pytest.approx(2 * GAUSSIAN_SHARE * gap, rel=1e-9)
            else:  # the growth unmeasured: widened by the sd had the variance not grown
                assert high - low > 2 * GAUSSIAN_SHARE * gap
                # with control variates the influences are not the draws' covariances:
                # the held step, its band reaching back to the first order
                cv = held._replace(plain_influences=False).changes(flat[:, order], sign, 1.96)
                assert np.all(cv.near == 0)
                low, high = (end[-1] for end in cv.band())
                assert low - slack <= truth <= high + slack, (k, sign, low, truth, high)
        assert np.all(curvature_of(theta, k).changes(flat[:, order], 0, 1.96).near == 0)


def test_a_coefficient_s_sd_after_a_normal_set_is_dropped_is_the_exact_refit_s():
    # The sd of each coefficient after dropping the ranked sets of a mesquite-shaped flat
    # prior regression (t(4) noise: the residual sd moves far), from 40,000 exact draws:
    # coefficients integrated out given sigma, sigma^2's inverse gamma reweighted; the exact
    # refit's is sqrt(rss' / (nu' - 2) (X'WX)^-1_kk). Some drop moves the sd by more than
    # 10 %, so the check can see a wrong update.
    from ols_amip import linear_effects, mesquite_shaped, metric

    from bayesij import refit
    from bayesij.array.amip_curvature import _normal_drop, _normal_form

    X, y = mesquite_shaped()
    post = refit.FlatPriorRegressionBackend(X, y, draws=40_000, seed=3).fit(np.ones(y.size))
    theta = post.quantities.values.reshape(-1, X.shape[1] + 1)
    flat = post.log_lik.values.reshape(-1, y.size)
    u = theta[:, :-1] - theta[:, :-1].mean(axis=0)
    t = np.log(theta[:, -1]) - np.log(theta[:, -1]).mean()
    moves = []
    for k in range(1, X.shape[1]):
        start = metric(X, y, np.ones(y.size), k, -1, 1.96)
        order = np.argsort(np.sign(start) * linear_effects(X, y, k, -1, 1.96))
        sets = [order[:size] for size in (1, 2, 4)]
        sums = np.stack([flat[:, s].sum(axis=1) - flat[:, s].sum(axis=1).mean() for s in sets])
        scaled, ok, unmoved = _normal_drop(_normal_form(u, t), sums, k)
        assert ok.all()
        # had the variance not grown with sigma^2: sigma^2 held at its mean, the unscaled
        # covariance (X'WX)^-1 the drop's
        gram_inv = np.linalg.inv(X.T @ X)[k, k]
        for dropped, got in zip(sets, unmoved / scaled[0], strict=True):
            kept = np.delete(X, dropped, axis=0)
            exact = np.sqrt(np.linalg.inv(kept.T @ kept)[k, k] / gram_inv)
            assert got == pytest.approx(exact, abs=0.004), (k, dropped.size)
        sd = lambda w, k=k: metric(X, y, w, k, 1, 1.0) - metric(X, y, w, k, 0, 1.0)  # noqa: E731
        assert scaled[0] == pytest.approx(sd(np.ones(y.size)), rel=0.01)
        for dropped, got in zip(sets, scaled[1:] / scaled[0], strict=True):
            weights = np.ones(y.size)
            weights[dropped] = 0
            exact = sd(weights) / sd(np.ones(y.size))
            assert got == pytest.approx(exact, abs=0.004), (k, dropped.size)
            moves.append(abs(exact - 1))
    assert max(moves) > 0.1  # a change the test can see


def test_an_inverse_gamma_reweighted_by_a_normal_set_s_likelihood_stays_one():
    # sigma^2 ~ InvGamma(alpha, beta) reweighted by sigma^-a exp(c / (2 sigma^2)) is
    # InvGamma(alpha + a / 2, beta - c / 2): its mean against self-normalised importance
    # sampling of a million exact draws; draws that are not an inverse gamma's (a
    # log-normal of another skewness) are not taken for one.
    from scipy.stats import invgamma

    from bayesij.array.amip_curvature import _inverse_gamma_after

    alpha, beta = 40.0, 50.0
    squares = invgamma(alpha, scale=beta).rvs(size=1_000_000, random_state=0)
    a, c = np.array([-6.0, -2.0]), np.array([10.0, 3.0])
    mean, fits = _inverse_gamma_after(squares, a, c)
    assert fits.all()
    for m, a_i, c_i in zip(mean, a, c, strict=True):
        log_w = -a_i / 2 * np.log(squares) + c_i / (2 * squares)
        w = np.exp(log_w - log_w.max())
        assert m == pytest.approx(w @ squares / w.sum(), rel=2e-3)
        assert m == pytest.approx((beta - c_i / 2) / (alpha + a_i / 2 - 1), rel=2e-3)
    skewed = np.exp(np.random.default_rng(1).normal(0.2, 0.4, 4000))
    assert not _inverse_gamma_after(skewed, a, c)[1].any()


def test_a_logistic_regression_s_sets_are_not_conditionally_normal():
    from logistic_amip import log_lik, sample, wells_like

    X, y = wells_like(400, seed=3)
    beta, _ = sample(X, y, seed=1)
    flat = log_lik(X, y, beta).reshape(-1, y.size)
    sigma = np.exp(np.random.default_rng(0).normal(0, 0.1, beta.shape[:-1]))[..., None]
    theta = np.concatenate([beta, sigma], axis=-1)  # a scale beside, for the design
    model = curvature_of(theta, 1, np.array([False] * beta.shape[-1] + [True]))
    assert model.gaussian_basis is not None
    assert np.all(model.changes(flat[:, :30], 0, 1.96).near == 0)
    assert np.all(model.changes(flat[:, :30], -1, 1.96).near == 0)
    # nor the form whose coefficients integrate out in closed form given the scale (a
    # scale whose square is drawn from an inverse gamma: only the form refuses them)
    from scipy.stats import invgamma

    from bayesij.array.amip_curvature import _normal_drop, _normal_form

    u = beta.reshape(-1, beta.shape[-1]) - beta.reshape(-1, beta.shape[-1]).mean(axis=0)
    t = 0.5 * np.log(invgamma(50.0, scale=50.0).rvs(size=u.shape[0], random_state=0))
    t -= t.mean()
    sums = np.cumsum(flat[:, :30] - flat[:, :30].mean(axis=0), axis=1).T[[0, 9, 29]]
    assert not _normal_drop(_normal_form(u, t), sums, 1)[1].any()
    plain = curvature_of(beta, 1)  # no scale: whether the log-likelihood is quadratic
    assert plain.gaussian_basis is not None
    assert np.all(plain.changes(flat[:, :30], 0, 1.96).near == 0)


def test_a_known_sd_normal_model_s_sets_are_banded_around_the_second_order():
    # Without a scale the normal log-likelihood is quadratic in the coefficients: the set's
    # band is the second-order prediction give or take half the gap, and holds the exact
    # (closed-form) change of the mean within three Monte Carlo SEs (the band is the
    # linearisation's; the answers add the Monte Carlo error by their replicates).
    from bayesij.array.amip_curvature import GAUSSIAN_SHARE

    beta, log_lik, exact = _normal_model()
    curvature = curvature_of(beta[None], 1)
    units = np.arange(5)  # the high-leverage points
    changes = curvature.changes(log_lik[:, units], 0, 1.96)
    assert np.all(changes.near == GAUSSIAN_SHARE)
    low, high = (end[-1] for end in changes.band())
    weights = np.ones(log_lik.shape[1])
    weights[units] = 0
    truth = exact(weights)[0][1] - exact(np.ones(log_lik.shape[1]))[0][1]
    f, summed = beta[:, 1], log_lik[:, units].sum(axis=1)
    mcse = ((f - f.mean()) * (summed - summed.mean())).std() / np.sqrt(f.size)
    slack = 3 * mcse * abs(changes.second[-1] / changes.first[-1])
    assert low - slack <= truth <= high + slack
    assert high - low < abs(changes.second[-1] - changes.first[-1]) + 1e-12  # not to first


def test_the_models_take_a_positive_scale_by_its_logarithm_beside_other_parameters():
    from bayesij.array.amip_curvature import on_model_scale

    theta = np.array([[0.5, 2.0, -1.0], [-0.2, 3.0, 4.0]])
    scales = np.array([False, True, True])  # the last one is not positive: kept as it is
    np.testing.assert_array_equal(
        on_model_scale(theta, scales),
        np.column_stack([theta[:, 0], np.log(theta[:, 1]), theta[:, 2]]),
    )
    alone = theta[:, 1:2]  # a scale alone is modelled as it is
    assert on_model_scale(alone, np.array([True])) is alone


def test_the_variance_s_first_order_is_its_derivative_in_the_weights():
    # A normal mean of known sd under a flat prior, exact draws: the posterior variance
    # with weight w on a set of j observations is sigma^2 / (n - j + j w), its derivative
    # at w = 1 is -j sigma^2 / n^2 whatever the observations; dropping the set moves the
    # variance by j sigma^2 / n^2 to first order (exactly sigma^2 j / (n (n - j))).
    # -Cov((mu - mean)^2, l_S) over the draws, at the grid's sizes and interpolated between.
    from bayesij.array.amip_curvature import _variance_influence

    rng = np.random.default_rng(5)
    n, sigma = 50, 2.0
    y = rng.normal(1.0, sigma, size=n)
    mu = rng.normal(y.mean(), sigma / np.sqrt(n), size=400_000)
    log_lik = -0.5 * ((y[None, :6] - mu[:, None]) / sigma) ** 2  # (S, 6)
    grid = np.array([2, 6])
    sums = np.stack([log_lik[:, :size].sum(axis=1) for size in grid])
    sums -= sums.mean(axis=1, keepdims=True)
    got = _variance_influence(mu - mu.mean(), grid, sums, 6)
    first = np.arange(1, 7) * sigma**2 / n**2
    np.testing.assert_allclose(got, first, rtol=0.03)
    exact = sigma**2 * 6 / (n * (n - 6))
    assert got[-1] == pytest.approx(exact, rel=0.15)  # first order: 12 % short at 6 of 50


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_are_read_in_tiles_of_draws_and_units_as_the_columns_are(monkeypatch, dtype):
    """The store's rows are the matrix's columns, as float64, whatever tiles of draws and
    of units they are read in (tiles that end inside the draws and the units: 3 units
    and 256 draws a tile here), on one thread or several."""
    from bayesij.array import amip_curvature

    rng = np.random.default_rng(4)
    matrix = rng.normal(size=(700, 40)).astype(dtype)
    units = np.array([1, 2, 5, 11, 12, 13, 30, 39])
    monkeypatch.setattr(amip_curvature, "UNIT_TILE", 3)
    for threaded in (False, True):
        rows = amip_curvature._read_rows(matrix, units, threaded=threaded)
        assert rows.dtype == np.float64
        np.testing.assert_array_equal(rows, matrix[:, units].T.astype(np.float64))


def test_a_worked_out_removal_holds_between_grid_sizes_only_where_both_ends_hold():
    # Along a set's prefixes, a size between two grid sizes is exact only where both are;
    # for units dropped each alone every size is a unit of its own.
    from bayesij.array.amip_curvature import _exact_at

    ok, at = np.array([True, False, True, True]), np.arange(4)
    np.testing.assert_array_equal(_exact_at(ok, at, alone=False), [True, False, False, True])
    np.testing.assert_array_equal(_exact_at(ok, at, alone=True), ok)


def test_a_set_whose_first_unit_was_not_read_has_the_first_order_and_an_open_band():
    # Past the store's reach no second order is known: ratio 1 (the first order), the band
    # unbounded beyond it, no near end; from the first unit on when it is not held.
    beta, log_lik, _ = _normal_model(draws=4000)
    columns = {u: log_lik[:, u] for u in range(10)}
    ratios = SetCurvature(curvature_of(beta[None], 1), 0, 1.96, columns=columns)(
        np.array([20, 0, 1])
    )
    np.testing.assert_array_equal(ratios, [[1.0] * 3, [np.inf] * 3, [0.0] * 3])


def test_a_set_s_summed_rows_need_every_unit_read_or_a_matrix_to_read_it_from():
    # With columns alone a unit not held leaves the sum unknown (None); with the matrix it
    # is read from there: the centred rows' sum either way where every unit is known.
    rng = np.random.default_rng(4)
    matrix = rng.normal(size=(500, 8))
    matrix[7, 5] = -np.inf  # unit 5 impossible at one draw: 0 in a sum, None if finite
    centred = np.where(np.isfinite(matrix), matrix, 0.0)
    centred = centred - centred.mean(axis=0)
    columns = CentredColumns(500, columns={u: matrix[:, u] for u in (0, 2, 3)})
    np.testing.assert_allclose(columns.set_sum(np.array([3, 0])), centred[:, [3, 0]].sum(axis=1))
    assert columns.set_sum(np.array([0, 4])) is None
    read = CentredColumns(500, matrix=matrix, units=[0, 2, 3])
    total = read.set_sum(np.array([0, 4, 5]))
    # the held row as held, units 4 and 5 read: the set's sum up to one constant
    offset = total - centred[:, [0, 4, 5]].sum(axis=1)
    assert np.ptp(offset) < 1e-12
    assert read.set_sum(np.array([0, 5]), finite=True) is None
    assert read.set_sum(np.array([0, 4]), finite=True) is not None


def test_held_units_influence_errors_are_refused_for_weights_that_are_not_finite():
    # The errors from rows read in place need finite weights (an impossible draw's weight
    # is not): None, and the caller computes them from the columns.
    rng = np.random.default_rng(5)
    matrix = rng.normal(size=(400, 6))
    store = CentredColumns(400, matrix=matrix, units=[1, 2])
    weights = np.full(400, 1 / 400)
    weighted = rng.normal(size=400)
    errors, held = store.influence_mcse(np.array([1, 4, 2]), weights, weighted)
    assert held.tolist() == [True, False, True] and np.isnan(errors[1])
    # sqrt(sum_s w_s^2 (a_s c_su - phi_u)^2): c the column less its weighted mean,
    # a = weighted / w, phi_u = sum_s weighted_s c_su
    centred = matrix[:, [1, 2]] - weights @ matrix[:, [1, 2]]
    phi = weighted @ centred
    a = weighted / weights
    expected = np.sqrt((weights[:, None] ** 2 * (a[:, None] * centred - phi) ** 2).sum(axis=0))
    np.testing.assert_allclose(errors[[0, 2]], expected, rtol=1e-10)
    weights[3] = np.inf
    assert store.influence_mcse(np.array([1, 2]), weights, weighted) is None
    assert store.influence_mcse(np.array([1, 2]), np.full(400, 1 / 400), weighted * np.nan) is None


def test_an_interval_end_s_first_order_moves_the_sd_by_the_dropped_precision():
    # A normal likelihood of known sd 1 (flat prior): dropping the set D takes X_D'X_D from
    # the posterior precision, so to first order the mean moves by -Sigma X_D' r_D (r_D the
    # residuals at the posterior mean) and the variance grows by (Sigma X_D'X_D Sigma)_ee:
    # the first order of mean +- z sd adds +-z (sqrt(Sigma_ee + that) - sqrt(Sigma_ee)).
    beta, log_lik, exact = _normal_model()
    X, y, _ = _normal_data()
    mean, cov = exact(np.ones(60))
    curvature = curvature_of(beta[None], 1)
    order = np.arange(5)
    sd = np.sqrt(cov[1, 1])
    for sign in (-1, 1):
        changes = curvature.changes(log_lik[:, order], sign, 1.96)
        for k in (1, 3, 5):
            dropped = X[order[:k]]
            d_mean = -(cov @ dropped.T @ (y[order[:k]] - dropped @ mean))[1]
            d_var = (cov @ dropped.T @ dropped @ cov)[1, 1]
            truth = d_mean + sign * 1.96 * (np.sqrt(sd**2 + d_var) - sd)
            assert changes.first[k - 1] == pytest.approx(truth, rel=0.03), (sign, k)


def test_a_variance_s_elasticity_is_its_least_squares_slope_where_measured_well_enough():
    # A parameter e = +-exp(kappa l / 2) with l the log-scale: its square grows as exp(kappa
    # l), elasticity kappa = 2. The least-squares slope of e^2 on l over the mean of e^2 is
    # used where its standard error (residual variance over sum l^2, the same divisor)
    # is at most ELASTICITY_ERROR: with 40 draws of a sign times the scale's power it is
    # small; with a normal multiplier (e^2 = z^2 exp(kappa l)) the same draws leave it
    # open (0).
    from bayesij.array.amip_curvature import ELASTICITY_ERROR, _elasticity

    rng = np.random.default_rng(0)
    log_scale = rng.normal(0, 0.1, 40)
    for multiplier, kept in ((rng.choice([-1.0, 1.0], 40), True), (rng.normal(size=40), False)):
        d = np.column_stack([multiplier * np.exp(log_scale), log_scale])
        d = d - d.mean(axis=0)
        squares, logs = d[:, 0] ** 2, d[:, 1]
        slope = logs @ (squares - squares.mean()) / (logs @ logs)
        residual = squares - squares.mean() - slope * logs
        error = np.sqrt(residual.var() / (logs @ logs)) / squares.mean()
        assert (error <= ELASTICITY_ERROR) == kept
        expected = slope / squares.mean() if kept else 0.0
        assert not kept or expected == pytest.approx(2.0, abs=0.15)
        got = _elasticity(d, np.array([False, True]))
        assert got[0, 1] == pytest.approx(expected, rel=1e-10)
        assert got[0, 0] == 0.0 and got[1, 0] == 0.0  # a non-scale's column: none


def test_a_normal_set_holding_most_of_a_coefficient_s_precision_is_not_worked_out():
    # An indicator set on 6 of 60 observations: its coefficient's precision (given sigma)
    # is those 6 observations'. Dropping 3 of them leaves half (worked out: the sd's ratio
    # is the exact refit's, sqrt((X'X)^-1 after over before), sigma^2 held, to 3 %); 5 leave a
    # sixth, past BREAKDOWN, and all 6 leave none (the refit has no finite sd): neither is
    # worked out. A set of other observations is.
    from bayesij import refit
    from bayesij.array.amip_curvature import _normal_drop, _normal_form

    rng = np.random.default_rng(2)
    X = np.column_stack([np.ones(60), np.zeros(60), rng.normal(size=60)])
    X[:6, 1] = 1.0
    y = X @ [1.0, 0.5, 0.3] + rng.normal(size=60)
    post = refit.FlatPriorRegressionBackend(X, y, draws=4000, seed=3).fit(np.ones(60))
    theta = post.quantities.values.reshape(-1, 4)
    flat = post.log_lik.values.reshape(-1, 60)
    u = theta[:, :-1] - theta[:, :-1].mean(axis=0)
    t = np.log(theta[:, -1]) - np.log(theta[:, -1]).mean()
    sets = [np.arange(3), np.arange(5), np.arange(6), np.arange(6, 12)]
    sums = np.stack([flat[:, s].sum(axis=1) - flat[:, s].sum(axis=1).mean() for s in sets])
    assert 1 / 6 < 1 - BREAKDOWN < 1 / 2
    scaled, ok, unmoved = _normal_drop(_normal_form(u, t), sums, 1)
    np.testing.assert_array_equal(ok, [True, False, False, True])
    before = np.linalg.inv(X.T @ X)[1, 1]
    for at, dropped in ((0, sets[0]), (3, sets[3])):
        after = np.linalg.inv(np.delete(X, dropped, axis=0).T @ np.delete(X, dropped, axis=0))
        exact = np.sqrt(after[1, 1] / before)
        assert unmoved[at] / scaled[0] == pytest.approx(exact, rel=0.03)  # 4000 draws


def test_a_quantity_marked_as_a_scale_but_not_positive_is_modelled_as_any_other():
    # A scale is modelled by its logarithm and held in the others' Newton step; a quantity
    # marked as one that is not positive at every draw (here at one draw of 4000: below
    # 0, or 0) has no logarithm: its model is that of an unmarked quantity, where a
    # positive one's is not.
    rng = np.random.default_rng(0)
    mean, scale = rng.normal(1, 0.1, 4000), np.exp(rng.normal(0, 0.1, 4000))
    y = rng.normal(size=30)
    log_lik = -0.5 * ((y - mean[:, None]) / scale[:, None]) ** 2 - np.log(scale)[:, None]
    negative, zero = scale.copy(), scale.copy()
    negative[7], zero[11] = -0.01, 0.0
    for sd, alike in ((negative, True), (zero, True), (scale, False)):
        draws = np.column_stack([mean, sd])[None]
        marked = curvatures_of(draws, [0], np.array([False, True]))[0]
        plain = curvatures_of(draws, [0], np.array([False, False]))[0]
        same = np.allclose(
            marked.ratios(log_lik[:, :5], 0, 1.96), plain.ratios(log_lik[:, :5], 0, 1.96)
        )
        assert same == alike


def test_only_a_scale_positive_at_every_draw_is_taken_by_its_logarithm():
    # on_model_scale logs a marked scale beside other parameters where every draw is above
    # 0; one draw at 0 (or below) leaves it as it is, and so does a scale alone.
    from bayesij.array.amip_curvature import on_model_scale

    theta = np.column_stack([np.linspace(-1, 1, 50), np.linspace(0.5, 2, 50)])
    scales = np.array([False, True])
    np.testing.assert_array_equal(on_model_scale(theta, scales)[:, 1], np.log(theta[:, 1]))
    np.testing.assert_array_equal(on_model_scale(theta, scales)[:, 0], theta[:, 0])
    for bad in (0.0, -0.1):
        held = theta.copy()
        held[3, 1] = bad
        np.testing.assert_array_equal(on_model_scale(held, scales), held)
    np.testing.assert_array_equal(on_model_scale(theta[:, 1:], scales[1:]), theta[:, 1:])


def test_the_pseudo_inverse_of_columns_of_very_different_scales_is_numpy_s():
    # Columns scaled to unit length before the Gram matrix is inverted: a design whose
    # columns differ by 10^10 in size keeps every column (unscaled, the smallest falls
    # below the cut-off and its row of the pseudo-inverse is lost), each row NumPy's to
    # 1e-10 of its largest entry.
    from bayesij.array.amip_curvature import _pseudo_inverse

    design = np.random.default_rng(6).normal(size=(4000, 3)) * [1e-5, 1.0, 1e5]
    got, expected = _pseudo_inverse(design), np.linalg.pinv(design)
    largest = np.abs(expected).max(axis=1, keepdims=True)
    assert (np.abs(got - expected) / largest).max() < 1e-10
