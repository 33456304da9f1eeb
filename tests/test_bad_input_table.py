"""The bad-input meta-test: a table of bad values for every argument of every public
function, the refit layer, the backends and the CLI.

Each case must end in a clear error: a ``ValueError``, ``TypeError`` or ``OSError`` whose
message names the argument (``"<argument>: found ...; expected ..."``). A call that
returns (a silent answer) or raises anything else (a raw traceback) fails the test.
:func:`test_every_public_function_is_in_the_table` keeps the table complete.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayesij
from bayesij import refit
from bayesij.cli import main as cli_main

RNG = np.random.default_rng(5)
C, D, N = 4, 25, 6
THETA = RNG.normal(size=(C, D, 2))
Y = RNG.normal(size=N)
LOG_LIK = -0.5 * (Y - THETA[..., :1]) ** 2
POST = bayesij.from_arrays(THETA, LOG_LIK)
BACKEND = refit.ConjugateNormalBackend(np.ones((N, 1)), Y, draws=100)


class _Density:
    """A ModelDensity whose log-likelihood disagrees with the draws (never reached when an
    argument is refused first)."""

    def unconstrain(self, post):
        return post.quantities.values.reshape(post.n_draws, -1)

    def log_prob(self, upars):
        return np.zeros(len(upars))

    def log_lik_i(self, upars, i):
        return np.zeros(len(upars))


BAD_DENSITY = _Density()
TWO_LOOS = {
    "a": bayesij.waic(np.zeros((C * D, N)) - 1.0),
    "b": bayesij.waic(np.zeros((C * D, N)) - 1.5),
}


def _matrix(value=None, shape=(C * D, N)):
    matrix = RNG.normal(size=shape)
    if value is not None:
        matrix = matrix.astype(type(value)) if isinstance(value, complex) else matrix
        matrix[3, 1] = value
    return matrix


def _with_nan(values):
    values = values.copy()
    values.flat[3] = np.nan
    return values


def _csv_files():
    """Draws and log-likelihood of POST as R would export them (in the test's folder)."""
    import pandas as pd

    pd.DataFrame(THETA.reshape(-1, 2), columns=["a", "b"]).to_csv("draws.csv", index=False)
    pd.DataFrame(LOG_LIK.reshape(-1, N)).to_csv("log_lik.csv", index=False)
    return "draws.csv", "log_lik.csv"


#: Bad values by kind of argument. Each is wrong whatever the rest of the call.
DRAWS = {
    "a path": "fit.nc",
    "a number": 3,
    "None": None,
    "NaN": _matrix(np.nan),
    "+inf": _matrix(np.inf),
    "1e300": _matrix(1e300),
    "complex": _matrix(1j),
    "text": np.array([["a"] * N] * (C * D)),
    "booleans": np.ones((C * D, N), dtype=bool),
    "nullable with pd.NA": pd.DataFrame(_matrix())
    .astype("Float64")
    .mask(pd.DataFrame(np.eye(C * D, N, dtype=bool))),
    "no observations": np.zeros((C * D, 0)),
    "1-D": np.zeros(C * D),
}
#: Draws of quantities for the Pareto diagnostics (constant draws are valid: k-hat NaN).
PARETO_DRAWS = {
    "a path": "fit.nc",
    "a number": 3,
    "None": None,
    "NaN": np.full((C, D, 2), np.nan),
    "+inf": np.full((C, D, 2), np.inf),
    "complex": np.full((C, D, 2), 1j),
    "text": np.full((C, D), "a"),
    "no quantities": np.zeros((C, D, 0)),
    "4-D": np.zeros((C, D, 2, 2)),
    "3 draws": np.zeros(3),
}
POSITIVE_INT = {"0": 0, "-1": -1, "2.5": 2.5, "'3'": "3", "True": True, "NaN": np.nan}
#: A number of replicates (bootstrap draws, simulations, refits): a mistyped size is named
#: before it is allocated (10**12 replicates were hundreds of TiB).
REPLICATES = {**POSITIVE_INT, "10**12": 10**12}
#: A random seed.
SEED = {"-1": -1, "2.5": 2.5, "'1'": "1", "True": True}
NON_NEGATIVE_INT = {"-1": -1, "2.5": 2.5, "'3'": "3", "True": True, "None": None}
POSITIVE_REAL = {"0": 0.0, "-1": -1.0, "NaN": np.nan, "inf": np.inf, "'1'": "1", "None": None}
TREE = xr.DataTree.from_dict(
    {
        "posterior": xr.Dataset({"mu": (("chain", "draw"), THETA[..., 0])}),
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), LOG_LIK)}),
        "posterior_predictive": xr.Dataset({"y": (("chain", "draw", "obs"), LOG_LIK)}),
    }
)
PROBABILITY = {"0": 0.0, "1.5": 1.5, "NaN": np.nan, "'0.1'": "0.1", "None": None}
OPTION = {"'nope'": "nope", "3": 3, "None": None}
#: An option whose None means "the convention's" (bayesij.stats.peers).
CONVENTION_OPTION = {"'nope'": "nope", "3": 3}
#: An option whose None picks a default from the input (the audit's AMIP method).
DEFAULTED_OPTION = {"'nope'": "nope", "3": 3}
FLAG = {"'yes'": "yes", "2": 2, "None": None}
NAMES = {"'nope'": "nope", "['f[1]', 'nope']": ["f[1]", "nope"], "3": 3}
GROUPS = {
    "too short": [0, 1],
    "NaN labels": [0, 1, np.nan, 1, 0, 1],
    "pd.NA labels": [0, 1, pd.NA, 1, 0, 1],
    "NaT labels": ["a", "b", pd.NaT, "a", "b", "a"],
    "3": 3,
}
OBS_VECTOR = {"too short": np.zeros(2), "NaN": np.r_[np.nan, np.zeros(N - 1)], "'y'": "y"}


def _cluster_model(rows, groups):
    """A model factory for the cluster bootstrap: the posterior of POST's rows."""
    return bayesij.from_arrays(THETA, LOG_LIK[..., rows])


def _catalogue():
    """(function name, argument, call taking the bad value, bad values)."""
    kw = lambda fn, name, **base: lambda v: fn(**{**base, name: v})  # noqa: E731
    pos = lambda fn, *args: lambda v: fn(v, *args)  # noqa: E731
    table = [
        ("loo", "data", pos(bayesij.loo), DRAWS),
        ("loo", "method", kw(bayesij.loo, "method", data=POST), OPTION),
        ("loo", "convention", kw(bayesij.loo, "convention", data=POST), CONVENTION_OPTION),
        ("PsisOptions", "convention", kw(bayesij.PsisOptions, "convention"), CONVENTION_OPTION),
        ("PsisOptions", "tail_rule", kw(bayesij.PsisOptions, "tail_rule"), CONVENTION_OPTION),
        ("PsisOptions", "ties", kw(bayesij.PsisOptions, "ties"), CONVENTION_OPTION),
        (
            "PsisOptions",
            "ddof",
            kw(bayesij.PsisOptions, "ddof"),
            {k: v for k, v in NON_NEGATIVE_INT.items() if v is not None},  # None: convention's
        ),
        ("loo", "save_psis", kw(bayesij.loo, "save_psis", data=POST), FLAG),
        ("loo", "groups", kw(bayesij.loo, "groups", data=POST), GROUPS),
        (
            "loo",
            "r_eff",
            lambda v: bayesij.loo(POST, convention=bayesij.PsisOptions(r_eff=v)),
            {k: v for k, v in POSITIVE_REAL.items() if v is not None},
        ),
        ("waic", "data", pos(bayesij.waic), DRAWS),
        ("waic", "beta", kw(bayesij.waic, "beta", data=POST), POSITIVE_REAL),
        ("waic", "ddof", kw(bayesij.waic, "ddof", data=POST), NON_NEGATIVE_INT),
        ("waic", "groups", kw(bayesij.waic, "groups", data=POST), GROUPS),
        ("dic", "data", pos(bayesij.dic), DRAWS),
        ("dic", "point", kw(bayesij.dic, "point", data=POST), OPTION),
        ("dic", "log_lik_at_point", kw(bayesij.dic, "log_lik_at_point", data=POST), OBS_VECTOR),
        ("influence", "data", pos(bayesij.influence), DRAWS),
        ("influence", "quantities", kw(bayesij.influence, "quantities", data=POST), NAMES),
        ("influence", "groups", kw(bayesij.influence, "groups", data=POST), GROUPS),
        ("influence", "n_blocks", kw(bayesij.influence, "n_blocks", data=POST), POSITIVE_INT),
        ("ij_covariance", "data", pos(bayesij.ij_covariance), DRAWS),
        (
            "ij_covariance",
            "n_blocks",
            kw(bayesij.ij_covariance, "n_blocks", data=POST),
            POSITIVE_INT,
        ),
        ("ij_covariance", "n_boot", kw(bayesij.ij_covariance, "n_boot", data=POST), REPLICATES),
        ("ij_covariance", "seed", kw(bayesij.ij_covariance, "seed", data=POST), NON_NEGATIVE_INT),
        (
            "ij_covariance",
            "check_linearity",
            kw(bayesij.ij_covariance, "check_linearity", data=POST),
            FLAG,
        ),
        ("ij_covariance", "quantities", kw(bayesij.ij_covariance, "quantities", data=POST), NAMES),
        ("linearity", "data", pos(bayesij.linearity), DRAWS),
        (
            "linearity",
            "convention",
            kw(bayesij.linearity, "convention", data=POST),
            {**CONVENTION_OPTION, "dict": {"tail_rule": "floor"}},
        ),
        (
            "linearity",
            "tail_rule",
            lambda v: bayesij.linearity(POST, convention=bayesij.PsisOptions(tail_rule=v)),
            CONVENTION_OPTION,
        ),
        ("linearity", "psis", kw(bayesij.linearity, "psis", data=POST), {"3": 3, "'x'": "x"}),
        ("linearity", "scores", kw(bayesij.linearity, "scores", data=POST), {"3": 3, "'x'": "x"}),
        ("linearity", "groups", kw(bayesij.linearity, "groups", data=POST), GROUPS),
        ("convergence", "data", bayesij.convergence, DRAWS),
        ("convergence", "quantities", kw(bayesij.convergence, "quantities", data=POST), NAMES),
        ("amip", "data", lambda v: bayesij.amip(v, "f[1]"), DRAWS),
        ("amip", "quantity", lambda v: bayesij.amip(POST, v), NAMES),
        (
            "amip",
            "target",
            lambda v: bayesij.amip(POST, "f[1]", v),
            {
                "'nope'": "nope",
                "None": None,
                "NaN": np.nan,
                "0": 0,
                "True": True,
                "('sign', 2.5)": ("sign", 2.5),
                "('significance',)": ("significance",),
                "('significance', 2.5, 1)": ("significance", 2.5, 1),
                **{f"('significance', {k})": ("significance", v) for k, v in POSITIVE_REAL.items()},
            },
        ),
        (
            "amip",
            "alpha_max",
            kw(bayesij.amip, "alpha_max", data=POST, quantity="f[1]"),
            PROBABILITY,
        ),
        ("amip", "method", kw(bayesij.amip, "method", data=POST, quantity="f[1]"), OPTION),
        (
            "amip",
            "max_refits",
            kw(bayesij.amip, "max_refits", data=POST, quantity="f[1]", backend=BACKEND),
            POSITIVE_INT,
        ),
        (
            "amip",
            "backend",
            kw(bayesij.amip, "backend", data=POST, quantity="f[1]"),
            {"3": 3, "'x'": "x"},
        ),
        ("audit", "data", pos(bayesij.audit), DRAWS),
        (
            "audit",
            "settings",
            kw(bayesij.audit, "settings", data=POST),
            {"3": 3, "{'nope': 1}": {"nope": 1}, "['targets']": ["targets"]},
        ),
        (
            "AuditSettings",
            "targets",
            kw(bayesij.AuditSettings, "targets"),
            {"('nope',)": ("nope",), "3": 3},
        ),
        ("AuditSettings", "alpha_max", kw(bayesij.AuditSettings, "alpha_max"), PROBABILITY),
        ("AuditSettings", "method", kw(bayesij.AuditSettings, "method"), DEFAULTED_OPTION),
        ("AuditSettings", "loo", kw(bayesij.AuditSettings, "loo"), FLAG),
        ("AuditSettings", "waic", kw(bayesij.AuditSettings, "waic"), FLAG),
        ("AuditSettings", "amip", kw(bayesij.AuditSettings, "amip"), FLAG),
        ("AuditSettings", "max_refits", kw(bayesij.AuditSettings, "max_refits"), POSITIVE_INT),
        (
            "AuditSettings",
            "progress",
            kw(bayesij.AuditSettings, "progress"),
            {"'yes'": "yes", "2": 2},
        ),
        ("audit", "quantities", kw(bayesij.audit, "quantities", data=POST), NAMES),
        (
            "audit",
            "marginal_log_lik",
            kw(bayesij.audit, "marginal_log_lik", data=POST, groups=[0, 0, 1, 1, 2, 2]),
            {
                "shape (4, 25, 2)": np.zeros((C, D, 2)),
                "NaN": np.full((C, D, 3), np.nan),
                "'x'": "x",
            },
        ),
        (
            "AuditSettings",
            "client",
            kw(bayesij.AuditSettings, "client"),
            {"3": 3, "'tcp://host:8786'": "tcp://host:8786"},
        ),
        (
            "compare",
            "results",
            bayesij.compare,
            {"3": 3, "{'a': 3}": {"a": 3}, "{}": {}, "list": [1, 2]},
        ),
        (
            "compare",
            "weights",
            lambda v: bayesij.compare(TWO_LOOS, weights=v),
            {"'bma'": "bma", "3": 3},
        ),
        (
            "model_weights",
            "results",
            bayesij.model_weights,
            {
                "3": 3,
                "one model": pd.DataFrame({"a": [-1.0, -2.0]}),
                "NaN": pd.DataFrame({"a": [-1.0, np.nan], "b": [-1.0, -2.0]}),
                "text": pd.DataFrame({"a": ["x", "y"], "b": [-1.0, -2.0]}),
            },
        ),
        ("model_weights", "method", lambda v: bayesij.model_weights(TWO_LOOS, v), OPTION),
        (
            "model_weights",
            "n_bootstrap",
            lambda v: bayesij.model_weights(TWO_LOOS, "pseudobma+", n_bootstrap=v),
            REPLICATES,
        ),
        (
            "model_weights",
            "seed",
            lambda v: bayesij.model_weights(TWO_LOOS, "pseudobma+", seed=v),
            {"-1": -1, "2.5": 2.5, "'1'": "1"},
        ),
        ("generating_function", "data", lambda v: bayesij.generating_function(v, 0.5), DRAWS),
        (
            "generating_function",
            "alpha",
            lambda v: bayesij.generating_function(POST, v),
            {"NaN": np.nan, "'x'": "x", "None": None},
        ),
        (
            "psense",
            "log_prior",
            lambda v: bayesij.psense(POST, log_prior=v),
            {
                "None": None,
                "too short": np.zeros(3),
                "NaN": np.full((C, D), np.nan),
                "'nope'": "nope",
                "text": np.full((C, D), "x"),
            },
        ),
        (
            "psense",
            "alphas",
            lambda v: bayesij.psense(POST, log_prior=np.zeros((C, D)), alphas=v),
            {"(1.01, 0.99)": (1.01, 0.99), "3": 3, "(0, 1.01)": (0.0, 1.01)},
        ),
        (
            "psense",
            "threshold",
            lambda v: bayesij.psense(POST, log_prior=np.zeros((C, D)), threshold=v),
            POSITIVE_REAL,
        ),
        ("psense", "data", lambda v: bayesij.psense(v, log_prior=np.zeros((C, D))), DRAWS),
        (
            "psense",
            "div_measure",
            lambda v: bayesij.psense(POST, log_prior=np.zeros((C, D)), div_measure=v),
            OPTION,
        ),
        (
            "psense_sequence",
            "auto_alpha_range",
            lambda v: bayesij.psense_sequence(POST, log_prior=THETA[..., 0], auto_alpha_range=v),
            FLAG,
        ),
        (
            "bayesian_r2",
            "pred_mean",
            lambda v: bayesij.bayesian_r2(None, v, np.ones(C * D)),
            {
                "NaN": np.full((C * D, 5), np.nan),
                "text": np.full((C * D, 5), "a"),
                "1 observation": np.zeros((C * D, 1)),
                "'mu' without data": "mu",
            },
        ),
        (
            "bayesian_r2",
            "scale",
            lambda v: bayesij.bayesian_r2(None, np.zeros((C * D, 5)), v),
            {"negative": -np.ones(C * D), "too few": np.ones(3), "NaN": np.full(C * D, np.nan)},
        ),
        (
            "bayesian_r2",
            "scale_kind",
            lambda v: bayesij.bayesian_r2(None, np.zeros((C * D, 5)), np.ones(C * D), scale_kind=v),
            OPTION,
        ),
        (
            "residual_r2",
            "pred_mean",
            lambda v: bayesij.residual_r2(None, v, np.zeros(5)),
            {
                "NaN": np.full((C * D, 5), np.nan),
                "1 observation": np.zeros((C * D, 1)),
                "'mu' without data": "mu",
            },
        ),
        (
            "residual_r2",
            "y",
            lambda v: bayesij.residual_r2(None, np.zeros((C * D, 5)), v),
            {"too short": np.zeros(3), "NaN": np.full(5, np.nan), "None without a fit": None},
        ),
        ("pareto_khat", "data", bayesij.pareto_khat, PARETO_DRAWS),
        ("pareto_smooth", "data", bayesij.pareto_smooth, PARETO_DRAWS),
        ("pareto_khat", "tail", lambda v: bayesij.pareto_khat(POST, tail=v), OPTION),
        (
            "pareto_khat",
            "r_eff",
            lambda v: bayesij.pareto_khat(POST, r_eff=v),
            {"0": 0.0, "-1": -1.0, "NaN": np.nan, "inf": np.inf, "'1'": "1", "3 values": [1, 1, 1]},
        ),
        (
            "pareto_khat",
            "quantities",
            lambda v: bayesij.pareto_khat(POST, quantities=v),
            {"'nope'": "nope", "3": 3},
        ),
        (
            "loo_moment_match",
            "model",
            lambda v: bayesij.loo_moment_match(POST, v, k_threshold=-1.0),
            {"3": 3, "None": None, "'stan'": "stan"},
        ),
        (
            "loo_moment_match",
            "max_iters",
            lambda v: bayesij.loo_moment_match(POST, BAD_DENSITY, max_iters=v),
            POSITIVE_INT,
        ),
        (
            "loo_moment_match",
            "loo",
            lambda v: bayesij.loo_moment_match(POST, BAD_DENSITY, loo=v),
            {"3": 3, "a waic result": bayesij.waic(LOG_LIK)},
        ),
        ("loglik_function", "fn", lambda v: bayesij.loglik_function(v, Y), {"3": 3, "None": None}),
        (
            "loglik_function",
            "data",
            lambda v: bayesij.loglik_function(len, v),
            {"3": 3, "'y'": "y", "empty": np.zeros(0), "ragged dict": {"a": [1], "b": [1, 2]}},
        ),
        (
            "loglik_function",
            "n_chains",
            lambda v: bayesij.loglik_function(len, Y, n_chains=v),
            POSITIVE_INT,
        ),
        (
            "loglik_function",
            "block_size",
            lambda v: bayesij.loglik_function(len, Y, block_size=v),
            {"0": 0, "2.5": 2.5, "'9'": "9"},
        ),
        (
            "loglik_function",
            "fn",
            lambda v: bayesij.loo(bayesij.loglik_function(v, Y)),
            {
                "text values": lambda d: np.full((C * D, len(d)), "x"),
                "too few columns": lambda d: np.zeros((C * D, 1))[:, : len(d) - 1],
            },
        ),
        ("loo_subsample", "data", lambda v: bayesij.loo_subsample(v, 3), DRAWS),
        (
            "loo_subsample",
            "observations",
            lambda v: bayesij.loo_subsample(LOG_LIK, v),
            {**POSITIVE_INT, "1": 1, "99": 99},
        ),
        (
            "loo_subsample",
            "approximation",
            lambda v: bayesij.loo_subsample(LOG_LIK, 3, approximation=v),
            {**OPTION, "'plpd' for a matrix": "plpd"},
        ),
        ("loo_subsample", "seed", lambda v: bayesij.loo_subsample(LOG_LIK, 3, seed=v), {"-1": -1}),
        (
            "loo_subsample",
            "observations",
            lambda v: bayesij.loo_subsample(LOG_LIK, v),
            {
                "floats": np.array([0.0, 1.0]),
                "out of range": np.array([0, 10]),
                "repeated": np.array([1, 1]),
                "one": np.array([2]),
                "2-D": np.array([[0, 1]]),
                "empty": np.array([], dtype=int),
            },
        ),
        (
            "update_subsample",
            "result",
            lambda v: bayesij.update_subsample(v, LOG_LIK, 1),
            {"a LooResult": bayesij.loo(LOG_LIK), "None": None, "3": 3},
        ),
        (
            "update_subsample",
            "observations",
            lambda v: bayesij.update_subsample(bayesij.loo_subsample(LOG_LIK, 2), LOG_LIK, v),
            {"0": 0, "-1": -1, "all": LOG_LIK.shape[-1], "taken": np.arange(LOG_LIK.shape[-1])},
        ),
        (
            "update_subsample",
            "data",
            lambda v: bayesij.update_subsample(bayesij.loo_subsample(LOG_LIK, 2), v, 1),
            {"other observations": LOG_LIK[..., :2], **DRAWS},
        ),
        ("loo_score", "data", lambda v: bayesij.loo_score(v, Y, LOG_LIK), DRAWS),
        (
            "loo_score",
            "y_pred",
            lambda v: bayesij.loo_score(POST, Y, v),
            {k: DRAWS[k] for k in ("a path", "NaN", "complex", "1-D", "None")},
        ),
        ("loo_score", "y", lambda v: bayesij.loo_score(POST, v, LOG_LIK), OBS_VECTOR),
        ("loo_score", "groups", lambda v: bayesij.loo_score(POST, Y, LOG_LIK, groups=v), GROUPS),
        (
            "score_weights",
            "groups",
            lambda v: bayesij.score_weights(
                {"a": POST, "b": POST}, y=Y, y_pred={"a": LOG_LIK, "b": LOG_LIK}, groups=v
            ),
            GROUPS,
        ),
        ("loo_score", "kind", lambda v: bayesij.loo_score(POST, Y, LOG_LIK, kind=v), OPTION),
        (
            "loo_score",
            "censored",
            lambda v: bayesij.loo_score(POST, Y, LOG_LIK, censored=v),
            {"2s": np.full(N, 2), "too short": [0, 1], "NaN": np.full(N, np.nan), "'a'": ["a"] * N},
        ),
        (
            "loo_score",
            "ddof",
            lambda v: bayesij.loo_score(POST, Y, LOG_LIK, convention=bayesij.PsisOptions(ddof=v)),
            {"2": 2},
        ),
        ("loo_metrics", "data", lambda v: bayesij.loo_metrics(v, Y, LOG_LIK), DRAWS),
        ("loo_metrics", "y", lambda v: bayesij.loo_metrics(POST, v, LOG_LIK), OBS_VECTOR),
        ("loo_metrics", "kind", lambda v: bayesij.loo_metrics(POST, Y, LOG_LIK, kind=v), OPTION),
        (
            "loo_metrics",
            "n_bootstrap",
            lambda v: bayesij.loo_metrics(POST, Y, LOG_LIK, kind="r2", n_bootstrap=v),
            REPLICATES,
        ),
        (
            "loo_metrics",
            "seed",
            lambda v: bayesij.loo_metrics(POST, Y, LOG_LIK, kind="r2", seed=v),
            {"-1": -1, "'1'": "1"},
        ),
        (
            "pit_ecdf",
            "pit",
            bayesij.pit_ecdf,
            {"one": [0.5], "outside": [0.2, 1.5], "NaN": [np.nan, 0.5], "'p'": "p", "None": None},
        ),
        ("pit_ecdf", "prob", lambda v: bayesij.pit_ecdf([0.1, 0.7], prob=v), PROBABILITY),
        (
            "uniformity_test",
            "pit",
            bayesij.uniformity_test,
            {"NaN": [0.1, np.nan], "1.5": [0.2, 1.5], "empty": [], "'a'": ["a"]},
        ),
        ("uniformity_test", "method", lambda v: bayesij.uniformity_test([0.1], method=v), OPTION),
        (
            "mchain_uniformity_test",
            "ranks",
            bayesij.mchain_uniformity_test,
            {"1-D": [0.1, 0.5], "one chain": [[0.1, 0.5]], "2": [[2.0, 0.1], [0.3, 0.4]]},
        ),
        (
            "loo_calibration",
            "y",
            lambda v: bayesij.loo_calibration(POST, v, np.zeros((C, D, N))),
            {"2s": np.full(N, 2.0), "too short": [0, 1], "None": None},
        ),
        (
            "loo_calibration",
            "from_log_lik",
            lambda v: bayesij.loo_calibration(POST, np.zeros(N), from_log_lik=v),
            {"'yes'": "yes", "2": 2, "None": None},
        ),
        (
            "hierarchical_stacking",
            "prior_scale",
            lambda v: bayesij.hierarchical_stacking(
                TWO_LOOS, groups=np.arange(N) % 2, prior_scale=v
            ),
            POSITIVE_REAL,
        ),
        (
            "hierarchical_stacking",
            "kind",
            lambda v: bayesij.hierarchical_stacking(TWO_LOOS, groups=np.arange(N) % 2, kind=v),
            OPTION,
        ),
        (
            "hierarchical_stacking",
            "covariates",
            lambda v: bayesij.hierarchical_stacking(TWO_LOOS, v),
            {"too short": [1.0, 2.0], "constant": np.ones(N), "NaN": np.full(N, np.nan)},
        ),
        (
            "pit_ecdf",
            "n_simulations",
            lambda v: bayesij.pit_ecdf([0.1, 0.7], n_simulations=v),
            REPLICATES,
        ),
        (
            "pit_ecdf",
            "seed",
            lambda v: bayesij.pit_ecdf([0.1, 0.7], seed=v),
            {"-1": -1, "'1'": "1"},
        ),
        (
            "pit_density",
            "pit",
            bayesij.pit_density,
            {"one": [0.5], "outside": [0.2, 1.5], "NaN": [np.nan, 0.5], "'p'": "p", "None": None},
        ),
        (
            "pit_density",
            "n_uniform",
            lambda v: bayesij.pit_density([0.1, 0.7], n_uniform=v),
            REPLICATES,
        ),
        (
            "pit_density",
            "points",
            lambda v: bayesij.pit_density([0.1, 0.7], points=v),
            REPLICATES,
        ),
        (
            "pit_density",
            "seed",
            lambda v: bayesij.pit_density([0.1, 0.7], seed=v),
            {"-1": -1, "'1'": "1"},
        ),
        (
            "calibration",
            "y",
            lambda v: bayesij.calibration(v, [0.2, 0.8]),
            {"2": [0, 2], "one": [1], "NaN": [np.nan, 1.0], "'y'": "y", "None": None},
        ),
        (
            "calibration",
            "prob",
            lambda v: bayesij.calibration([0, 1], v),
            {"short": [0.5], "1.5": [0.2, 1.5], "NaN": [np.nan, 0.5], "'p'": "p", "None": None},
        ),
        (
            "calibration",
            "band_prob",
            lambda v: bayesij.calibration([0, 1], [0.2, 0.8], band_prob=v),
            PROBABILITY,
        ),
        (
            "calibration",
            "n_bootstrap",
            lambda v: bayesij.calibration([0, 1], [0.2, 0.8], n_bootstrap=v),
            REPLICATES,
        ),
        (
            "power_scaled_draws",
            "data",
            lambda v: bayesij.power_scaled_draws(v, log_prior=np.zeros((C, D))),
            DRAWS,
        ),
        (
            "power_scaled_draws",
            "component",
            lambda v: bayesij.power_scaled_draws(POST, log_prior=np.zeros((C, D)), component=v),
            OPTION,
        ),
        (
            "psense",
            "moment_match",
            lambda v: bayesij.psense(
                POST,
                log_prior=np.cumsum(RNG.normal(size=(C, D)), axis=1) * 50,
                moment_match=v,
                alphas=(0.25, 4.0),
            ),
            {"a dict": {}, "no log_prior": type("D", (), {"log_prob": lambda self, t: t[:, 0]})()},
        ),
        ("loo_r2", "data", lambda v: bayesij.loo_r2(v, Y, LOG_LIK), DRAWS),
        ("loo_r2", "y", lambda v: bayesij.loo_r2(POST, v, LOG_LIK), OBS_VECTOR),
        (
            "loo_r2",
            "y_pred",
            lambda v: bayesij.loo_r2(POST, Y, v),
            {k: DRAWS[k] for k in ("a path", "NaN", "complex", "1-D", "None")},
        ),
        (
            "loo_r2",
            "n_simulations",
            lambda v: bayesij.loo_r2(POST, Y, LOG_LIK, n_simulations=v),
            REPLICATES,
        ),
        (
            "loo_r2",
            "seed",
            lambda v: bayesij.loo_r2(POST, Y, LOG_LIK, seed=v),
            {"-1": -1, "'1'": "1"},
        ),
        (
            "loo_nonfactorized",
            "y",
            lambda v: bayesij.loo_nonfactorized(v, np.zeros((C, D, N)), np.eye(N)),
            # (a y shorter than the mean is reported under "mean": which one is wrong is unknown)
            {
                k: v
                for k, v in {**OBS_VECTOR, "2-D": np.zeros((N, N)), "None": None}.items()
                if k != "too short"
            },
        ),
        (
            "loo_nonfactorized",
            "mean",
            lambda v: bayesij.loo_nonfactorized(Y, v, np.eye(N)),
            {
                "NaN": np.full((C, D, N), np.nan),
                "short": np.zeros((C, D, 2)),
                "text": "m",
                "one": np.zeros(N),
            },
        ),
        (
            "loo_nonfactorized",
            "covariance",
            lambda v: bayesij.loo_nonfactorized(Y, np.zeros((C, D, N)), v),
            {
                "None": None,
                "not PD": -np.eye(N),
                "NaN": np.full((N, N), np.nan),
                "asymmetric": np.triu(np.ones((N, N))),
            },
        ),
        (
            "loo_nonfactorized",
            "precision",
            lambda v: bayesij.loo_nonfactorized(Y, np.zeros((C, D, N)), precision=v),
            {"not PD": np.zeros((N, N)), "wrong shape": np.eye(3), "complex": np.eye(N) * 1j},
        ),
        (
            "loo_nonfactorized",
            "df",
            lambda v: bayesij.loo_nonfactorized(Y, np.zeros((C, D, N)), np.eye(N), df=v),
            {"0": 0.0, "-1": -1.0, "NaN": np.nan, "'3'": "3", "wrong shape": np.ones(3)},
        ),
        ("loo_weighted", "data", lambda v: bayesij.loo_weighted(v, np.ones(N)), DRAWS),
        (
            "loo_weighted",
            "weights",
            lambda v: bayesij.loo_weighted(POST, v),
            {
                "too short": np.ones(2),
                "0.5": np.full(N, 0.5),
                "NaN": np.full(N, np.nan),
                "'w'": "w",
                "None": None,
            },
        ),
        ("loo_weighted", "kind", lambda v: bayesij.loo_weighted(POST, np.ones(N), kind=v), OPTION),
        (
            "loo_approximate_posterior",
            "data",
            lambda v: bayesij.loo_approximate_posterior(v, np.zeros(C * D), np.zeros(C * D)),
            DRAWS,
        ),
        (
            "loo_approximate_posterior",
            "log_p",
            lambda v: bayesij.loo_approximate_posterior(POST, v, np.zeros(C * D)),
            {"too short": np.zeros(3), "NaN": np.full(C * D, np.nan), "'p'": "p", "None": None},
        ),
        (
            "loo_approximate_posterior",
            "log_g",
            lambda v: bayesij.loo_approximate_posterior(POST, np.zeros(C * D), v),
            {"too short": np.zeros(3), "inf": np.full(C * D, np.inf), "None": None},
        ),
        (
            "loo_approximate_posterior",
            "tail_rule",
            lambda v: bayesij.loo_approximate_posterior(
                POST, np.zeros(C * D), np.zeros(C * D), convention=bayesij.PsisOptions(tail_rule=v)
            ),
            CONVENTION_OPTION,
        ),
        (
            "loo_approximate_posterior",
            "ties",
            lambda v: bayesij.loo_approximate_posterior(
                POST, np.zeros(C * D), np.zeros(C * D), convention=bayesij.PsisOptions(ties=v)
            ),
            CONVENTION_OPTION,
        ),
        (
            "loo_approximate_posterior",
            "convention",
            lambda v: bayesij.loo_approximate_posterior(
                POST, np.zeros(C * D), np.zeros(C * D), convention=v
            ),
            {**CONVENTION_OPTION, "r_eff given": bayesij.PsisOptions(r_eff=0.5)},
        ),
        (
            "loo_approximate_posterior",
            "ddof",
            lambda v: bayesij.loo_approximate_posterior(
                POST, np.zeros(C * D), np.zeros(C * D), convention=bayesij.PsisOptions(ddof=v)
            ),
            {"2": 2, "'1'": "1"},
        ),
        ("loo_mixture", "data", bayesij.loo_mixture, DRAWS),
        (
            "loo_mixture",
            "log_jacobian",
            lambda v: bayesij.loo_mixture(POST, log_jacobian=v),
            {"too short": np.zeros(2), "NaN": np.full(N, np.nan), "'j'": "j"},
        ),
        (
            "loo",
            "log_jacobian",
            lambda v: bayesij.loo(POST, log_jacobian=v),
            {"too short": np.zeros(2), "NaN": np.full(N, np.nan), "complex": np.full(N, 1j)},
        ),
        (
            "compare",
            "reference",
            lambda v: bayesij.compare(TWO_LOOS, reference=v),
            {"'c'": "c", "3": 3},
        ),
        (
            "weight_predictions",
            "predictions",
            bayesij.weight_predictions,
            {
                "one model": {"a": np.zeros((C, D, N))},
                "a list": [np.zeros((C, D, N))] * 2,
                "None": None,
            },
        ),
        (
            "weight_predictions",
            "weights",
            lambda v: bayesij.weight_predictions({"a": THETA, "b": THETA}, v),
            {
                "negative": [-1.0, 2.0],
                "zeros": [0.0, 0.0],
                "three": [1.0, 1.0, 1.0],
                "missing": {"a": 1.0},
            },
        ),
        (
            "weight_predictions",
            "seed",
            lambda v: bayesij.weight_predictions({"a": THETA, "b": THETA}, seed=v),
            {"-1": -1, "'1'": "1"},
        ),
        (
            "psense",
            "prior_selection",
            lambda v: bayesij.psense(POST, log_prior=np.zeros((C, D)), prior_selection=v),
            {"'mu'": "mu", "[3]": [3], "[]": []},
        ),
        (
            "psense_sequence",
            "data",
            lambda v: bayesij.psense_sequence(v, log_prior=np.zeros((C, D))),
            DRAWS,
        ),
        (
            "psense_sequence",
            "component",
            lambda v: bayesij.psense_sequence(POST, log_prior=np.zeros((C, D)), component=v),
            OPTION,
        ),
        (
            "psense_sequence",
            "alphas",
            lambda v: bayesij.psense_sequence(POST, log_prior=np.zeros((C, D)), alphas=v),
            {"negative": [-1.0], "NaN": [np.nan], "empty": [], "'a'": "a"},
        ),
        ("loo_expectation", "data", lambda v: bayesij.loo_expectation(v, LOG_LIK), DRAWS),
        (
            "loo_expectation",
            "values",
            lambda v: bayesij.loo_expectation(POST, v),
            {k: DRAWS[k] for k in ("a path", "NaN", "complex", "1-D", "None")},
        ),
        (
            "loo_expectation",
            "kind",
            kw(bayesij.loo_expectation, "kind", data=POST, values=LOG_LIK),
            OPTION,
        ),
        (
            "loo_expectation",
            "prob",
            kw(bayesij.loo_expectation, "prob", data=POST, values=LOG_LIK, kind="quantile"),
            PROBABILITY,
        ),
        (
            "loo_influence",
            "kind",
            kw(bayesij.loo_influence, "kind", data=TREE, group="posterior"),
            OPTION,
        ),
        (
            "loo_influence",
            "group",
            kw(bayesij.loo_influence, "group", data=TREE),
            {"'prior'": "prior", "None": None, "1": 1},
        ),
        (
            "loo_influence",
            "prob",
            kw(bayesij.loo_influence, "prob", data=TREE, group="posterior", kind="quantile"),
            PROBABILITY,
        ),
        (
            "loo_influence",
            "standardize",
            kw(bayesij.loo_influence, "standardize", data=TREE, group="posterior"),
            {"'yes'": "yes", "1": 1},
        ),
        (
            "loo_influence",
            "quantities",
            kw(bayesij.loo_influence, "quantities", data=TREE, group="posterior"),
            {"'nope'": "nope"},
        ),
        ("loo_i", "data", lambda v: bayesij.loo_i(v, 0), DRAWS),
        ("loo_integrated", "data", lambda v: bayesij.loo_integrated(v, BAD_DENSITY), DRAWS),
        (
            "loo_integrated",
            "density",
            lambda v: bayesij.loo_integrated(POST, v, groups=np.arange(N) // 2),
            {"3": 3, "None": None, "an object without group_log_lik": object()},
        ),
        (
            "loo_i",
            "unit",
            lambda v: bayesij.loo_i(POST, v),
            {
                "past the end": N,
                "-N - 1": -N - 1,
                "'nope'": "nope",
                "None": None,
                "1.5": 1.5,
                "True": True,
            },
        ),
        (
            "score_weights",
            "fits",
            lambda v: bayesij.score_weights(v, y=Y, y_pred={"a": LOG_LIK}),
            {"one model": {"a": LOG_LIK}, "a list": [LOG_LIK, LOG_LIK], "None": None},
        ),
        (
            "score_weights",
            "kind",
            lambda v: bayesij.score_weights(
                {"a": LOG_LIK, "b": LOG_LIK}, v, y=Y, y_pred={"a": LOG_LIK, "b": LOG_LIK}
            ),
            OPTION,
        ),
        (
            "score_weights",
            "y",
            lambda v: bayesij.score_weights(
                {"a": LOG_LIK, "b": LOG_LIK}, y=v, y_pred={"a": LOG_LIK, "b": LOG_LIK}
            ),
            {**OBS_VECTOR, "None": None},
        ),
        (
            "score_weights",
            "y_pred",
            lambda v: bayesij.score_weights({"a": LOG_LIK, "b": LOG_LIK}, y=Y, y_pred=v),
            {"other models": {"c": LOG_LIK}, "a list": [LOG_LIK]},
        ),
        (
            "score_weights",
            "y_pred['a']",  # the model's draws named
            lambda v: bayesij.score_weights({"a": LOG_LIK, "b": LOG_LIK}, y=Y, y_pred=v),
            {"NaN": {"a": _matrix(np.nan)}, "1-D": {"a": np.zeros(C * D)}},
        ),
        ("loo_pit", "data", lambda v: bayesij.loo_pit(v, Y, LOG_LIK), DRAWS),
        ("loo_pit", "y", lambda v: bayesij.loo_pit(POST, v, LOG_LIK), OBS_VECTOR),
        (
            "loo_pit",
            "censored",
            lambda v: bayesij.loo_pit(POST, Y, LOG_LIK, censored=v),
            {"2s": np.full(N, 2), "too short": [0, 1], "NaN": np.full(N, np.nan), "'a'": ["a"] * N},
        ),
        (
            "loo_pit",
            "y_pred",
            lambda v: bayesij.loo_pit(POST, Y, v),
            {k: DRAWS[k] for k in ("a path", "NaN", "complex", "1-D", "None")},
        ),
        (
            "loo_pit",
            "seed",
            kw(bayesij.loo_pit, "seed", data=POST, y=Y, y_pred=LOG_LIK),
            NON_NEGATIVE_INT,
        ),
        (
            "loo_pit",
            "pareto_pit",
            kw(bayesij.loo_pit, "pareto_pit", data=POST, y=Y, y_pred=LOG_LIK),
            FLAG,
        ),
        (
            "from_arrays",
            "log_lik",
            lambda v: bayesij.from_arrays(THETA, v),
            {k: DRAWS[k] for k in DRAWS if k != "1-D"},
        ),
        (
            "from_arrays",
            "quantities",
            lambda v: bayesij.from_arrays(v, LOG_LIK),
            {"a path": "fit.nc", "None": None, "NaN": _with_nan(THETA), "complex": THETA + 1j},
        ),
        (
            "from_arrays",
            "chain_ids",
            lambda v: bayesij.from_arrays(
                THETA.reshape(-1, 2), LOG_LIK.reshape(-1, N), chain_ids=v
            ),
            {"too short": [0, 1], "3": 3},
        ),
        (
            "from_arrays",
            "quantity_names",
            kw(bayesij.from_arrays, "quantity_names", quantities=THETA, log_lik=LOG_LIK),
            {"too short": ["a"], "repeated": ["a", "a"], "3": 3},
        ),
        (
            "from_arrays",
            "obs_names",
            kw(bayesij.from_arrays, "obs_names", quantities=THETA, log_lik=LOG_LIK),
            {"too short": ["a"], "repeated": ["a"] * N, "3": 3},
        ),
        (
            "from_arrays",
            "groups",
            kw(bayesij.from_arrays, "groups", quantities=THETA, log_lik=LOG_LIK),
            GROUPS,
        ),
        (
            "from_csv",
            "draws",
            lambda v: bayesij.from_csv(v, "missing.csv"),
            {"missing": "missing.csv", "3": 3},
        ),
        (
            "from_csv",
            "chains",
            lambda v: bayesij.from_csv(*_csv_files(), chains=v),
            {**POSITIVE_INT, "7": 7},
        ),
        (
            "from_inference_data",
            "idata",
            bayesij.from_inference_data,
            {"a path": "fit.nc", "3": 3, "None": None},
        ),
        (
            "from_cmdstanpy",
            "fit_or_csv_files",
            bayesij.from_cmdstanpy,
            {"missing": ["missing.csv"], "3": 3, "None": None},
        ),
        ("from_pystan", "fit", bayesij.from_pystan, {"3": 3, "'x'": "x", "None": None}),
        (
            "as_posterior",
            "data",
            bayesij.as_posterior,
            {k: DRAWS[k] for k in ("a path", "None", "NaN", "complex", "no observations")},
        ),
        (
            "read",
            "data",
            bayesij.read,
            {k: DRAWS[k] for k in ("a path", "None", "NaN", "complex", "no observations")},
        ),
        (
            "refit.bootstrap",
            "B",
            lambda v: refit.bootstrap(POST, BACKEND, v, executor="sequential", progress=False),
            REPLICATES,
        ),
        (
            "refit.bootstrap",
            "seed",
            lambda v: refit.bootstrap(POST, BACKEND, 2, v, executor="sequential", progress=False),
            SEED,
        ),
        (
            "refit.kfold",
            "seed",
            lambda v: refit.kfold(POST, BACKEND, 2, seed=v, executor="sequential", progress=False),
            SEED,
        ),
        ("refit.stan_inits", "post", refit.stan_inits, DRAWS),
        ("refit.stan_inits", "n_chains", lambda v: refit.stan_inits(POST, v), POSITIVE_INT),
        ("refit.kfold_split_random", "seed", lambda v: refit.kfold_split_random(N, 2, v), SEED),
        (
            "refit.kfold_split_grouped",
            "seed",
            lambda v: refit.kfold_split_grouped([0, 0, 1, 1, 2, 2], 2, v),
            SEED,
        ),
        (
            "refit.kfold_split_stratified",
            "seed",
            lambda v: refit.kfold_split_stratified([0, 1, 0, 1, 0, 1], 2, v),
            SEED,
        ),
        (
            "refit.cluster_bootstrap",
            "B",
            lambda v: refit.cluster_bootstrap(
                POST, _cluster_model, v, groups=[0, 0, 1, 1, 2, 2], progress=False
            ),
            REPLICATES,
        ),
        (
            "refit.cluster_bootstrap",
            "model",
            lambda v: refit.cluster_bootstrap(POST, v, 2, groups=[0, 0, 1, 1, 2, 2]),
            {"3": 3, "None": None},
        ),
        (
            "refit.cluster_bootstrap",
            "groups",
            lambda v: refit.cluster_bootstrap(POST, _cluster_model, 2, groups=v, progress=False),
            GROUPS,
        ),
        (
            "refit.cluster_bootstrap",
            "marginal_log_lik",
            lambda v: refit.cluster_bootstrap(
                POST,
                _cluster_model,
                2,
                groups=[0, 0, 1, 1, 2, 2],
                marginal_log_lik=v,
                executor="sequential",
                progress=False,
            ),
            {"wrong clusters": np.zeros((C, D, 2)), "'m'": "m"},
        ),
        (
            "refit.bootstrap",
            "backend",
            lambda v: refit.bootstrap(POST, v, 2, progress=False),
            {"3": 3, "'x'": "x", "None": None},
        ),
        (
            "refit.bootstrap",
            "executor",
            lambda v: refit.bootstrap(POST, BACKEND, 2, executor=v, progress=False),
            {"-1": -1, "'sequentia'": "sequentia", "2.5": 2.5, "True": True},
        ),
        (
            "refit.bootstrap",
            "post",
            lambda v: refit.bootstrap(v, BACKEND, 2, progress=False),
            {k: DRAWS[k] for k in ("a path", "None", "NaN")},
        ),
        (
            "refit.bootstrap",
            "store",
            lambda v: refit.bootstrap(
                POST, BACKEND, 2, store=v, executor="sequential", progress=False
            ),
            {"a file": __file__, "3": 3},
        ),
        (
            "refit.loo",
            "points",
            lambda v: refit.loo(POST, BACKEND, v, executor="sequential", progress=False),
            {"repeated": [1, 1], "unknown": [99], "'nope'": "nope"},
        ),
        (
            "refit.loo",
            "budget",
            lambda v: refit.loo(POST, BACKEND, budget=v, executor="sequential", progress=False),
            POSITIVE_INT,
        ),
        (
            "refit.loo",
            "tolerance",
            lambda v: refit.loo(POST, BACKEND, tolerance=v, executor="sequential", progress=False),
            {"-1": -1.0, "NaN": np.nan, "'x'": "x"},
        ),
        (
            "refit.kfold",
            "K",
            lambda v: refit.kfold(POST, BACKEND, v, executor="sequential", progress=False),
            {**POSITIVE_INT, "1": 1, "99": 99},
        ),
        (
            "refit.kfold",
            "folds",
            lambda v: refit.kfold(POST, BACKEND, folds=v, executor="sequential", progress=False),
            {"too short": [0, 1], "one fold": [0] * N, "3": 3},
        ),
        (
            "refit.drop",
            "ids",
            lambda v: refit.drop(POST, BACKEND, v, executor="sequential", progress=False),
            {"unknown": [99], "repeated": [1, 1], "'nope'": "nope"},
        ),
        (
            "refit.verify",
            "result",
            lambda v: refit.verify(v, BACKEND, progress=False),
            {"3": 3, "a loo result": bayesij.loo(POST)},
        ),
        ("holdout", "data", bayesij.holdout, DRAWS),
        ("lfo", "data", lambda v: bayesij.lfo(v, min_train=2), DRAWS),
        ("lfo", "min_train", lambda v: bayesij.lfo(POST, min_train=v), {**POSITIVE_INT, "6": 6}),
        ("lfo", "horizon", lambda v: bayesij.lfo(POST, min_train=2, horizon=v), POSITIVE_INT),
        ("lfo", "method", lambda v: bayesij.lfo(POST, min_train=2, method=v), OPTION),
        (
            "lfo",
            "k_threshold",
            lambda v: bayesij.lfo(POST, min_train=2, k_threshold=v),
            POSITIVE_REAL,
        ),
        (
            "lfo",
            "backend",
            lambda v: bayesij.lfo(POST, v, min_train=2, method="exact"),
            {"None": None, "3": 3, "'x'": "x"},
        ),
        (
            "lfo",
            "weight_derivative",
            lambda v: bayesij.lfo(POST, min_train=2, method="ij", weight_derivative=v),
            {
                "one time point short": _matrix(shape=(C * D, N - 1)),
                "NaN": _matrix(np.nan),
                "3": 3,
                "'nope'": "nope",
            },
        ),
        ("holdout", "ddof", lambda v: bayesij.holdout(LOG_LIK, ddof=v), NON_NEGATIVE_INT),
        (
            "prediction_errors",
            "y_pred",
            lambda v: bayesij.prediction_errors(v, Y),
            {k: DRAWS[k] for k in ("a path", "None", "NaN", "complex", "1-D")},
        ),
        (
            "prediction_errors",
            "y_test",
            lambda v: bayesij.prediction_errors(LOG_LIK, v),
            OBS_VECTOR,
        ),
        (
            "prediction_errors",
            "log_lik",
            lambda v: bayesij.prediction_errors(LOG_LIK, Y, log_lik=v),
            {"too few points": LOG_LIK[..., :2], "a path": "fit.nc"},
        ),
        (
            "refit.lwcv",
            "folds",
            lambda v: refit.lwcv(POST, BACKEND, v, executor="sequential", progress=False),
            {"3": 3, "'x'": "x", "[[99]]": [[99]], "[[]]": [[]], "[[0.5]]": [[0.5]]},
        ),
        ("refit.lwcv_split", "n_times", lambda v: refit.lwcv_split(v, 0.2), POSITIVE_INT),
        ("refit.lwcv_split", "proportion", lambda v: refit.lwcv_split(50, v), PROBABILITY),
        (
            "refit.lwcv_split",
            "n_folds",
            lambda v: refit.lwcv_split(50, 0.2, n_folds=v),
            POSITIVE_INT,
        ),
        ("refit.lwcv_split", "seed", lambda v: refit.lwcv_split(50, 0.2, seed=v), NON_NEGATIVE_INT),
        ("refit.kfold_split_contiguous", "n_obs", refit.kfold_split_contiguous, POSITIVE_INT),
        (
            "refit.kfold_split_contiguous",
            "K",
            lambda v: refit.kfold_split_contiguous(N, v),
            {**POSITIVE_INT, "1": 1, "99": 99},
        ),
        ("refit.kfold_split_random", "n_obs", refit.kfold_split_random, POSITIVE_INT),
        (
            "refit.kfold_split_random",
            "K",
            lambda v: refit.kfold_split_random(N, v),
            {**POSITIVE_INT, "1": 1, "99": 99},
        ),
        (
            "refit.kfold_split_grouped",
            "groups",
            lambda v: refit.kfold_split_grouped(v, 2),
            {"3": 3, "one group": [0] * N},
        ),
        (
            "refit.kfold_split_stratified",
            "strata",
            lambda v: refit.kfold_split_stratified(v, 2),
            {"3": 3, "NaN": [np.nan] * N},
        ),
        (
            "refit.loo_priorities",
            "k_threshold",
            lambda v: refit.loo_priorities(*np.zeros((5, N)), v),
            {"NaN": np.nan, "'x'": "x"},
        ),
        (
            "refit.run_campaign",
            "tasks",
            lambda v: refit.run_campaign(
                v, BACKEND, experiment="x", settings={}, executor="sequential", progress=False
            ),
            {"3": 3, "not tasks": [1, 2]},
        ),
        (
            "ConjugateNormalBackend",
            "y",
            lambda v: refit.ConjugateNormalBackend(np.ones((N, 1)), v),
            OBS_VECTOR,
        ),
        (
            "ConjugateNormalBackend",
            "X",
            lambda v: refit.ConjugateNormalBackend(v, Y),
            {"NaN": np.full((N, 1), np.nan), "'x'": "x"},
        ),
        (
            "ConjugateNormalBackend",
            "sigma",
            lambda v: refit.ConjugateNormalBackend(np.ones((N, 1)), Y, v),
            POSITIVE_REAL,
        ),
        (
            "FlatPriorRegressionBackend",
            "y",
            lambda v: refit.FlatPriorRegressionBackend(np.ones((N, 1)), v),
            OBS_VECTOR,
        ),
        (
            "FlatPriorRegressionBackend",
            "X",
            lambda v: refit.FlatPriorRegressionBackend(v, Y),
            {"NaN": np.full((N, 1), np.nan), "'x'": "x"},
        ),
        (
            "FlatPriorRegressionBackend",
            "draws",
            lambda v: refit.FlatPriorRegressionBackend(np.ones((N, 1)), Y, draws=v),
            {"7 in 4 chains": 7, "4": 4},
        ),
        (
            "influence",
            "grad_log_posterior",
            kw(bayesij.influence, "grad_log_posterior", data=POST),
            {"wrong draws": np.zeros((C, D - 1, 2)), "NaN": np.full((C, D, 2), np.nan)},
        ),
        (
            "amip",
            "grad_log_posterior",
            kw(bayesij.amip, "grad_log_posterior", data=POST, quantity="f[1]", method="linear"),
            {
                "wrong draws": (np.zeros((C, D - 1, 2)), np.zeros((C, D - 1, 2))),
                "NaN": (np.full((C, D, 2), np.nan), np.zeros((C, D, 2))),
                "one array": np.zeros((C, D, 2)),
                "three arrays": (np.zeros((C, D, 2)),) * 3,
            },
        ),
        ("CallableBackend", "fn", refit.CallableBackend, {"3": 3, "None": None}),
        ("PyMCBackend", "model", refit.PyMCBackend, {"3": 3, "'nope'": "nope", "dict": {}}),
        (
            "PyStanBackend",
            "model",
            lambda v: refit.PyStanBackend(v, {}),
            {"'nope'": "nope", "3": 3},
        ),
        (
            "PyStanBackend",
            "data",
            lambda v: refit.PyStanBackend("linear_regression", v),
            {"list": [], "3": 3},
        ),
        (
            "CmdStanPyBackend",
            "model",
            lambda v: refit.CmdStanPyBackend(v, {}),
            {"'nope'": "nope", "3": 3},
        ),
        (
            "CmdStanPyBackend",
            "data",
            lambda v: refit.CmdStanPyBackend("linear_regression", v),
            {"list": [], "3": 3},
        ),
    ]
    return table


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    CATALOGUE = _catalogue()
CASES = [
    pytest.param(call, argument, value, id=f"{name}-{argument}-{label}")
    for name, argument, call, values in CATALOGUE
    for label, value in values.items()
]


@pytest.mark.parametrize(("call", "argument", "value"), CASES)
def test_bad_value_gives_a_clear_error_naming_the_argument(
    call, argument, value, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            call(value)
        except (ValueError, TypeError, OSError) as error:
            message = str(error)
        else:
            pytest.fail(f"a silent answer for {argument}={value!r}")
    assert f"{argument}: found" in message or f"{argument}:" in message.split(";")[0], message


CLI_CASES = {
    "missing file": ["influence", "missing.csv"],
    "not netCDF": ["audit", "fake.nc"],
    "--top 0": ["audit", "fake.csv", "--top", "0"],
    "--top -1": ["audit", "fake.csv", "--top", "-1"],
    "--top x": ["audit", "fake.csv", "--top", "x"],
    "--out in a missing folder": ["audit", "fake.csv", "--out", "missing/report.html"],
    "--out a folder": ["audit", "fake.csv", "--out", "."],
    "--tables a file": ["audit", "fake.csv", "--tables", "fake.nc"],
    "--tables in a missing folder": ["audit", "fake.csv", "--tables", "missing/deeper"],
    "--alpha-max 2": ["audit", "fake.csv", "--alpha-max", "2"],
    "--draws 0": ["audit", "fake.csv", "--draws", "0"],
    "--scheduler with CSV files": ["audit", "fake.csv", "--scheduler", "tcp://127.0.0.1:1"],
    "unknown command": ["frobnicate"],
}


@pytest.mark.parametrize("argv", CLI_CASES.values(), ids=CLI_CASES.keys())
def test_cli_bad_input_is_one_line_and_exit_2(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fake.nc").write_text("not a netCDF file")
    (tmp_path / "fake.csv").write_text("a,b\n1,2\n")
    try:
        code = cli_main(argv)
    except SystemExit as exit:  # argparse's own errors
        code = exit.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)


def test_every_public_function_is_in_the_table():
    covered = {name for name, *_ in CATALOGUE}
    public = (
        {name for name in bayesij.__all__ if inspect.isfunction(getattr(bayesij, name))}
        | {f"refit.{name}" for name in refit.__all__ if inspect.isfunction(getattr(refit, name))}
        | {name for name in refit.__all__ if name.endswith("Backend") and name != "Backend"}
    )
    assert public - covered == set(), "add the new public functions to the table"
