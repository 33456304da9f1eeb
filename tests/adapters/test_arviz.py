"""LOO and WAIC results convert to the installed ArviZ's ELPDData, and its compare takes
them (arviz-stats 1.x on Python >= 3.12, ArviZ 0.23 on 3.11)."""

import warnings

import numpy as np
import pytest

import bayesij
from peers import ARVIZ_1, load_example


@pytest.fixture(scope="module")
def results():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = {name: load_example(name) for name in ("centered_eight", "non_centered_eight")}
        return {name: bayesij.loo(fit) for name, fit in fits.items()}, {
            name: bayesij.waic(fit) for name, fit in fits.items()
        }


def test_loo_result_is_an_elpd_data_of_the_installed_arviz(results):
    loo, _ = results
    ours = loo["centered_eight"]
    converted = ours.to_arviz()
    if ARVIZ_1:
        from arviz_stats.utils import ELPDDataLOO

        assert isinstance(converted, ELPDDataLOO)
        assert converted.elpd == ours.elpd and converted.p == ours.p_loo
        pointwise, k = converted.elpd_i, converted.pareto_k
    else:
        import arviz as az

        assert isinstance(converted, az.ELPDData)
        assert converted.elpd_loo == ours.elpd and converted.p_loo == ours.p_loo
        pointwise, k = converted.loo_i, converted.pareto_k
    np.testing.assert_array_equal(pointwise.values, ours.pointwise["elpd_loo"])
    np.testing.assert_array_equal(k.values, ours.pointwise["pareto_k"])
    assert list(pointwise[ours.pointwise.index.name].values) == list(ours.pointwise.index)


def test_arviz_compare_takes_bayesij_results(results):
    loo, waic = results
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if ARVIZ_1:
            from arviz_stats import compare

            table = compare({name: r.to_arviz() for name, r in loo.items()}, round_to="none")
        else:
            import arviz as az

            table = az.compare({name: r.to_arviz() for name, r in loo.items()}, ic="loo")
            waic_table = az.compare({n: r.to_arviz() for n, r in waic.items()}, ic="waic")
            assert set(waic_table.index) == set(waic)
    ours = bayesij.compare(loo)
    assert list(table.index) == list(ours.index)  # the same order, best first
    column = "elpd" if ARVIZ_1 else "elpd_loo"
    np.testing.assert_allclose(table[column].astype(float), ours["elpd"], rtol=1e-12)


def test_arviz_plots_draw_bayesij_results(results, monkeypatch):
    azp = pytest.importorskip("arviz_plots", reason="ArviZ 1.x's plots (Python >= 3.12)")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from arviz_stats import compare

    loo, _ = results
    converted = {name: r.to_arviz() for name, r in loo.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert azp.plot_khat(converted["centered_eight"]) is not None
        assert azp.plot_compare(compare(converted)) is not None
