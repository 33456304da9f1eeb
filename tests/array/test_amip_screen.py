"""The screened products of a reweighted AMIP step: whatever the screen leaves out could not
have been among the largest gains, so a search makes the choices the full product
``v^T log_lik`` makes (the greedy growth of Broderick, Giordano & Meager 2020, reweighted
as in Nguyen et al. 2024), with and without a good model of the columns."""

import numpy as np
import pytest

from bayesij.array import amip, amip_screen
from bayesij.array.amip_curvature import CentredColumns
from bayesij.array.amip_screen import InfluenceScreen, screen_design


def _regression(n_units=300, seed=5):
    """Exact draws (4 x 500) of a normal regression's two coefficients and sd (flat prior)
    and the pointwise log-likelihood of t(3) data: quadratic in the coefficients, not in
    the sd, heavy in a few units."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n_units), rng.normal(size=n_units)])
    y = X @ [0.1, 0.3] + rng.standard_t(3, size=n_units)
    beta_hat, *_ = np.linalg.lstsq(X, y, rcond=None)
    rss = np.sum((y - X @ beta_hat) ** 2)
    sigma = np.sqrt(rss / rng.chisquare(n_units - 2, size=2000))
    chol = np.linalg.cholesky(np.linalg.inv(X.T @ X))
    beta = beta_hat + sigma[:, None] * (rng.normal(size=(2000, 2)) @ chol.T)
    resid = y - beta @ X.T
    log_lik = -0.5 * (resid / sigma[:, None]) ** 2 - np.log(sigma)[:, None]
    params = np.column_stack([beta, sigma]).reshape(4, 500, 3)
    return params, log_lik.reshape(4, 500, n_units)


def _same_check(one: dict, other: dict) -> None:
    """Two split-draw checks (or answers) alike: their words equal, their numbers to
    1e-10."""
    assert one.keys() == other.keys()
    for key, value in one.items():
        if isinstance(value, str):
            assert value == other[key]
        else:
            assert value == pytest.approx(other[key], rel=1e-10, nan_ok=True), key


def _top_positive(gain, m):
    order = np.argsort(-gain, kind="stable")
    return order[gain[order] > 0][:m]


@pytest.mark.parametrize("full_share", [1.0, 0.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_screened_step_reads_exactly_the_units_that_could_be_among_the_largest(
    dtype, full_share, monkeypatch
):
    """With the candidates' columns read (``FULL_SHARE`` 1: never the full product), and
    with the full product instead (0: at the first request), the same exact values and
    the same largest gains outside the chosen units."""
    monkeypatch.setattr(amip_screen, "FULL_SHARE", full_share)
    params, log_lik = _regression()
    flat = log_lik.reshape(2000, -1).astype(dtype)
    flat[1500, 17] = -np.inf  # impossible at a draw of the second half
    screen = InfluenceScreen(flat, screen_design(params), (2000, 1000))
    np.testing.assert_array_equal(screen.exact_only, [17])
    rng = np.random.default_rng(0)
    full = flat.astype(np.float64)
    for n in (2000, 1000):
        weights = rng.dirichlet(np.full(n, 5.0))
        f = params.reshape(2000, 3)[:n, 2]
        vector = weights * (f - weights @ f)
        with np.errstate(invalid="ignore"):
            exact = vector @ full[:n]
        exact = np.where(np.isfinite(exact), exact, np.nan)
        [influence] = screen.products(n, vector[:, None])
        for direction in (1, -1):
            for m in (1, 5, 40):
                chosen = [int(u) for u in _top_positive(-direction * exact, 3)]
                phi = influence.top(direction, m, chosen)
                known = np.isfinite(phi) | np.isnan(phi)
                np.testing.assert_allclose(phi[known], exact[known], rtol=1e-12, atol=1e-15)
                gain = -direction * exact
                gain[chosen] = -np.inf
                expected = _top_positive(np.nan_to_num(gain, nan=-np.inf), m)
                got = _top_positive(np.nan_to_num(-direction * phi, nan=-np.inf), m)
                np.testing.assert_array_equal(got, expected)
        assert np.isnan(phi[17]) == (n == 2000)  # finite on the first half alone
        if full_share:
            assert influence.known.sum() < 200  # most columns never read
        else:
            assert influence.known.all()  # one product of every column


def test_the_screen_design_is_quadratic_and_refused_when_too_wide():
    params, _ = _regression()
    design = screen_design(params)
    assert design.shape == (2000, 1 + 3 + 6)
    constant = np.concatenate([params, np.ones((4, 500, 1))], axis=-1)
    np.testing.assert_array_equal(screen_design(constant), design)
    many = np.random.default_rng(1).normal(size=(4, 500, 70))
    assert screen_design(many) is None  # 141 columns: more than MAX_BASIS
    assert screen_design(many[..., :13]).shape[1] == 1 + 13 + 13  # squares, no products


@pytest.mark.filterwarnings("ignore:log_lik is -inf")
@pytest.mark.parametrize("good_model", [True, False])
def test_searches_with_the_screen_choose_what_the_full_products_choose(good_model):
    """With the fit's parameters the screen reads few columns; with parameters unrelated
    to the log-likelihood its bounds cover everything and it falls back to full products:
    either way the paths, answers and split-draw checks are those of the full products."""
    params, log_lik = _regression(seed=11)
    log_lik[0, 7, 40] = -np.inf
    if not good_model:
        params = np.random.default_rng(2).normal(size=params.shape)
    mu, sigma = params[..., 1], params[..., 2]
    questions = [(mu, "sign"), (mu, "significance"), (sigma, 0.1), (mu, "sign_and_significance")]
    goals = [amip.goal_for(f, target, 1.96) for f, target in questions]
    fs = [f for f, _ in questions]
    scores = [
        amip.metric_influence(f, log_lik, g, keep_blocks=True)
        for f, g in zip(fs, goals, strict=True)
    ]
    plain = amip.reweighted_searches(fs, log_lik, goals, scores, 30, 0.7)
    screened = amip.reweighted_searches(fs, log_lik, goals, scores, 30, 0.7, parameters=params)
    for one, other in zip(screened, plain, strict=True):
        np.testing.assert_array_equal(one.path.order, other.path.order)
        np.testing.assert_allclose(one.path.change, other.path.change, rtol=1e-10)
        assert one.path.stopped == other.path.stopped
        assert repr(one.answer) == repr(other.answer)  # NaN fields alike
        _same_check(one.monte_carlo, other.monte_carlo)


def test_a_held_row_gives_the_product_of_its_column(monkeypatch):
    monkeypatch.setattr(amip_screen, "FULL_SHARE", 1.0)  # never the full product
    params, log_lik = _regression()
    flat = log_lik.reshape(2000, -1)
    store = CentredColumns(2000, matrix=flat, units=np.arange(0, 300, 3))
    screen = InfluenceScreen(flat, screen_design(params), (2000, 1000), store)
    weights = np.random.default_rng(3).dirichlet(np.ones(1000))
    f = params.reshape(2000, 3)[:1000, 0]
    vector = weights * (f - weights @ f)
    [influence] = screen.products(1000, vector[:, None])
    phi = influence.top(1, 40, [])  # candidates read from the rows, not by a full product
    read = np.flatnonzero(influence.known)
    assert 40 <= read.size < 75 and np.isin(read, store.held).sum() >= 10
    np.testing.assert_allclose(phi[read], (vector @ flat[:1000])[read], rtol=1e-9, atol=1e-14)


def test_only_the_columns_a_store_does_not_hold_count_toward_the_full_product(monkeypatch):
    """Candidates held as rows cost no read of the matrix: with every unit held, even a
    share of 0 leaves the request to the rows (its candidates alone computed); with none
    held, the same request is the full product."""
    monkeypatch.setattr(amip_screen, "FULL_SHARE", 0.0)
    params, log_lik = _regression()
    flat = log_lik.reshape(2000, -1)
    weights = np.random.default_rng(3).dirichlet(np.ones(1000))
    f = params.reshape(2000, 3)[:1000, 0]
    vector = weights * (f - weights @ f)
    exact = vector @ flat[:1000]
    for held, all_read in ((np.arange(300), False), (np.zeros(0, dtype=int), True)):
        store = CentredColumns(2000, matrix=flat, units=held)
        screen = InfluenceScreen(flat, screen_design(params), (2000, 1000), store)
        [influence] = screen.products(1000, vector[:, None])
        phi = influence.top(1, 40, [])
        assert influence.known.all() == all_read
        read = np.flatnonzero(influence.known)
        np.testing.assert_allclose(phi[read], exact[read], rtol=1e-9, atol=1e-14)


def test_candidates_past_two_percent_of_the_units_are_answered_by_the_full_product():
    """The documented rule (gathering 2 % of the columns costs what the whole product
    does): 40 of 300 units, none held, is one full product; 4 of them are gathered."""
    params, log_lik = _regression()
    flat = log_lik.reshape(2000, -1)
    screen = InfluenceScreen(flat, screen_design(params), (2000, 1000))
    weights = np.random.default_rng(3).dirichlet(np.ones(1000))
    f = params.reshape(2000, 3)[:1000, 0]
    vector = weights * (f - weights @ f)
    for m, all_read in ((40, True), (1, False)):
        [influence] = screen.products(1000, vector[:, None])
        influence.top(1, m, [])
        candidates = influence.known.sum()
        assert influence.known.all() == all_read, candidates


@pytest.mark.filterwarnings("ignore:log_lik is -inf")
def test_searches_reading_the_shared_rows_choose_what_the_gathered_columns_choose():
    """The second-order model's shared rows (centred, read once) stand for the columns in
    the screened products and in the continuation's Monte Carlo errors: the searches equal
    those whose model holds no rows (every column gathered), a unit with -inf included."""
    from bayesij.array.amip_curvature import SetCurvature, curvature_of

    params, log_lik = _regression(seed=13)
    log_lik[1, 3, 60] = -np.inf
    flat = log_lik.reshape(2000, -1)
    mu, sigma = params[..., 1], params[..., 2]
    questions = [(mu, "sign", 1), (mu, "significance", 1), (sigma, "significance", 2)]
    goals = [amip.goal_for(f, target, 1.96) for f, target, _ in questions]
    fs = [f for f, _, _ in questions]
    scores = [
        amip.metric_influence(f, log_lik, g, keep_blocks=True)
        for f, g in zip(fs, goals, strict=True)
    ]
    store = CentredColumns(2000, matrix=flat, units=np.arange(0, 300, 2))
    every = CentredColumns(2000, matrix=flat, units=np.arange(300))  # every set's sums too
    stores = {"shared": {"store": store}, "every": {"store": every}, "gathered": {"matrix": flat}}
    results = {}
    for how, source in stores.items():
        nonlinear = [
            SetCurvature(curvature_of(params, index), g.sign, g.z, **source)
            for (_, _, index), g in zip(questions, goals, strict=True)
        ]
        results[how] = amip.reweighted_searches(
            fs, log_lik, goals, scores, 45, 0.7, nonlinear, parameters=params
        )
    weights = np.random.default_rng(4).dirichlet(np.ones(1000))  # the first half's draws
    f_half = mu.reshape(-1)[:1000]
    units = np.array([60, 2, 3, 4, 100, 101])  # held and not, one with -inf
    for sign, kept in [(0, store), (1, store), (1, every)]:  # some held, then all
        np.testing.assert_allclose(
            amip.weighted_influence_mcse(f_half, flat[:1000], weights, sign, 1.96, units, kept),
            amip.weighted_influence_mcse(f_half, flat[:1000], weights, sign, 1.96, units),
            rtol=1e-10,
        )
    continued = 0
    for how in ("shared", "every"):
        for one, other in zip(results[how], results["gathered"], strict=True):
            np.testing.assert_array_equal(one.path.order, other.path.order)
            np.testing.assert_allclose(one.path.change, other.path.change, rtol=1e-10)
            _same_check(one.answer._asdict(), other.answer._asdict())
            _same_check(one.monte_carlo, other.monte_carlo)
            after = (one.mean_after, one.sd_after)
            assert after == pytest.approx((other.mean_after, other.sd_after), rel=1e-10)
            continued += one.path.reliable < one.path.order.size
    assert continued  # a continuation read its Monte Carlo errors from the rows


def test_the_screen_s_basis_is_orthonormal_and_spans_its_design():
    # The screen's bounds assume an orthonormal basis (a coefficient's square is the share
    # of a column it explains); directions the draws barely span may be left out.
    from bayesij.array.amip_screen import _centred_basis

    params, _ = _regression()
    design = screen_design(params)
    nearly = design.copy()
    nearly[:, 2] = design[:, 1] + 1e-9 * design[:, 3]  # all but collinear
    for candidate in (design, nearly):
        basis = _centred_basis(candidate)
        np.testing.assert_allclose(basis.T @ basis, np.eye(basis.shape[1]), atol=1e-13)
        left = candidate - basis @ (basis.T @ candidate)
        assert np.abs(left).max() < 1e-6 * np.abs(candidate).max()
    assert _centred_basis(design).shape[1] == design.shape[1]
    assert _centred_basis(nearly).shape[1] == design.shape[1] - 1


def test_a_unit_s_second_order_terms_from_the_screen_s_coefficients():
    # The quadratic model of the fit's parameters lies in the screen's basis (their
    # quadratic): a unit's terms from its coefficients there equal those from its row; a
    # unit with -inf, a model in a quantity the screen does not span, a screen of another
    # matrix or with a direction left out: from the rows.
    from bayesij.array.amip_curvature import curvature_of

    params, log_lik = _regression(seed=17)
    log_lik[0, 4, 30] = -np.inf
    flat = log_lik.reshape(2000, -1)
    units = np.array([30, 2, 7, 150, 299])
    plain = CentredColumns(2000, matrix=flat, units=np.arange(300))
    screened = CentredColumns(2000, matrix=flat, units=np.arange(300))
    screen = InfluenceScreen(flat, screen_design(params), [2000])
    assert screen.complete and screened.screened_by(screen)
    derived = np.concatenate([params, np.exp(params[..., 1:2])], axis=-1)  # not quadratic
    for model in (curvature_of(params, 1), curvature_of(params, 2), curvature_of(derived, 3)):
        pairs = zip(screened.terms(model, units), plain.terms(model, units), strict=True)
        for ours, theirs in pairs:
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12 * np.abs(theirs).max())
    maps = list(screened._maps.values())
    assert sum(m is not None for m in maps) == 2 and maps[-1] is None  # exp(sd): not spanned
    other = CentredColumns(2000, matrix=flat.copy(), units=np.arange(300))
    assert not other.screened_by(screen)
    nearly = screen_design(params)
    nearly[:, 2] = nearly[:, 1] + 1e-9 * nearly[:, 3]
    incomplete = InfluenceScreen(flat, nearly, [2000])
    assert not incomplete.complete
    assert not CentredColumns(2000, matrix=flat, units=np.arange(300)).screened_by(incomplete)


def test_numpy_s_partition_picks_the_candidates_the_compiled_screen_picks():
    # Where a bound is NaN the candidates come from NumPy's partition of the lower bounds:
    # on bounds that are all numbers it must pick what the compiled kernel picks (every
    # unit outside the excluded whose upper bound reaches the m-th largest lower bound,
    # and 0).
    from bayesij.array.kernels.screen import screened_candidates

    params, log_lik = _regression()
    flat = log_lik.reshape(2000, -1)
    screen = InfluenceScreen(flat, screen_design(params), (2000, 1000))
    rng = np.random.default_rng(4)
    for n in (2000, 1000):
        weights = rng.dirichlet(np.full(n, 5.0))
        f = params.reshape(2000, 3)[:n, 1]
        [influence] = screen.products(n, (weights * (f - weights @ f))[:, None])
        excluded = np.zeros(flat.shape[1], dtype=bool)
        excluded[[3, 50, 120]] = True
        for direction in (1, -1):
            for m in (1, 5, 40, 400):
                kernel = screened_candidates(
                    influence.approximate,
                    screen.slack[n],
                    influence.scale,
                    excluded,
                    direction,
                    m,
                )
                partitioned = influence._partitioned(direction, m, excluded)
                np.testing.assert_array_equal(np.sort(partitioned), np.sort(kernel))
