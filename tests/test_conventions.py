"""The conventions of ``bayesij/__init__.py`` (``COMMON_KEYWORDS``, ``POSITIONAL``) hold for
every public estimator: ``data`` first, its own inputs positional in the documented order,
everything else keyword-only with the common selectors first; the log-likelihood variable
is selected by ``var_name`` everywhere (as ArviZ). A new public function that breaks them
fails here."""

import importlib
import inspect
import pkgutil

import pytest

import bayesij

ESTIMATORS = sorted(
    name
    for name in bayesij.__all__
    if inspect.isfunction(getattr(bayesij, name))
    and next(iter(inspect.signature(getattr(bayesij, name)).parameters)) == "data"
)


def test_the_estimators_are_found():
    assert {"loo", "waic", "amip", "influence", "audit", "loo_pit"} <= set(ESTIMATORS)
    assert set(bayesij.POSITIONAL) <= set(ESTIMATORS)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_data_first_then_positional_inputs_then_keywords(name):
    parameters = list(inspect.signature(getattr(bayesij, name)).parameters.values())
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == ["data", *bayesij.POSITIONAL.get(name, ())]
    assert all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_common_selectors_come_first_in_order(name):
    parameters = inspect.signature(getattr(bayesij, name)).parameters.values()
    keywords = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
    common = [k for k in keywords if k in bayesij.COMMON_KEYWORDS]
    assert keywords[: len(common)] == common
    assert common == [k for k in bayesij.COMMON_KEYWORDS if k in common]


@pytest.mark.parametrize("name", [*ESTIMATORS, "as_posterior", "from_inference_data"])
def test_the_log_likelihood_variable_is_var_name(name):
    parameters = inspect.signature(getattr(bayesij, name)).parameters
    assert "log_lik" not in parameters
    no_log_lik = ("loo_moment_match", "pareto_khat", "pareto_smooth", "bayesian_r2", "convergence")
    if name not in no_log_lik:
        assert "var_name" in parameters


def test_siblings_share_an_order():
    orders = {bayesij.POSITIONAL[name] for name in ("loo_pit", "loo_score", "loo_metrics")}
    assert orders == {("y", "y_pred")}


def test_no_public_function_takes_more_than_twelve_parameters():
    # options that travel together are one settings object (PsisOptions, AuditSettings)
    modules = [
        importlib.import_module(m.name) for m in pkgutil.walk_packages(bayesij.__path__, "bayesij.")
    ]
    public = {
        f"{module.__name__}.{name}": function
        for module in modules
        for name, function in vars(module).items()
        if inspect.isfunction(function)
        and function.__module__ == module.__name__
        and not name.startswith("_")
    }
    assert len(modules) > 100 and "bayesij.refit.lfo.lfo" in public
    crowded = {
        name: len(inspect.signature(function).parameters)
        for name, function in public.items()
        if len(inspect.signature(function).parameters) > 12
    }
    assert crowded == {}
