"""The integrated group terms' plumbing: which unit effect a density integrates, refusals
naming ``density``, and the terms paired with the units by label (the quadrature itself is
tested against SciPy and closed forms in tests/refit/test_pymc_groups.py)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayesij
from bayesij.stats.integrated import group_terms, integrated_terms, marginal_columns

TERMS = xr.DataArray(
    np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4),
    dims=("chain", "draw", "school"),
    coords={"school": ["a", "b", "c", "d"]},
)


class _Density:
    """Integrates only ``z``: ``ValueError`` for any other variable, as PyMCDensity
    refuses a variable it cannot integrate."""

    def group_log_lik(self, data, variable):
        if variable != "z":
            raise ValueError(f"variable: found {variable!r}")
        return TERMS


def test_the_first_unit_effect_the_density_integrates_is_taken():
    fit = SimpleNamespace(data=None, structure=SimpleNamespace(unit_effects=("u", "z")))
    terms, variable = integrated_terms(fit, _Density())
    assert variable == "z" and terms is TERMS
    assert integrated_terms(fit, object()) == (None, None)
    none = SimpleNamespace(data=None, structure=SimpleNamespace(unit_effects=("u",)))
    assert integrated_terms(none, _Density()) == (None, None)


def test_terms_are_paired_with_the_units_by_label():
    shuffled = marginal_columns(TERMS, ["c", "a", "d", "b"])
    np.testing.assert_array_equal(shuffled, TERMS.values[..., [2, 0, 3, 1]])
    # An array is laid out by the grouping's levels when it has one column per level.
    by_level = marginal_columns(TERMS.values, ["d", "a"], levels=["a", "b", "c", "d"])
    np.testing.assert_array_equal(by_level, TERMS.values[..., [3, 0]])
    with pytest.raises(ValueError, match=r"marginal_log_lik: found no term for the units \['e'\]"):
        marginal_columns(TERMS, ["a", "e"])


def test_a_fit_whose_units_are_observations_is_refused_by_name():
    log_lik = np.random.default_rng(0).normal(-1.0, 0.1, size=(2, 50, 4))
    post = bayesij.from_arrays(np.zeros((2, 50, 1)), log_lik)
    with pytest.raises(ValueError, match="density: found a fit whose units are its observ"):
        group_terms(post, _Density(), pd.RangeIndex(4))
