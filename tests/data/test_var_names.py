"""select_var_names reads var_names and filter_vars as the installed ArviZ does."""

import numpy as np
import pytest
import xarray as xr

from bayesij.data.var_names import select_var_names

try:  # ArviZ 1.x
    from arviz_base.utils import _var_names
except ImportError:  # ArviZ 0.23
    from arviz.utils import _var_names

VARIABLES = ["mu", "tau", "theta", "theta_t", "z_a", "a"]
DATASET = xr.Dataset({v: ("draw", np.zeros(3)) for v in VARIABLES})


@pytest.mark.parametrize(
    ("var_names", "filter_vars"),
    [
        ("mu", None),
        (["theta", "mu"], None),
        (["~theta"], None),
        (["~theta", "~mu"], None),
        ("theta", "like"),
        (["~theta"], "like"),
        ("^t", "regex"),
        (["~_"], "like"),
        (["~^z"], "regex"),
    ],
)
def test_as_arviz_reads_them(var_names, filter_vars):
    expected = _var_names(var_names, DATASET, filter_vars)
    assert select_var_names(VARIABLES, var_names, filter_vars) == [
        v for v in VARIABLES if v in expected
    ]


def test_bad_names_are_refused_with_the_variables():
    with pytest.raises(
        ValueError,
        match=r"var_names: found 'sigma', which matches no variable; "
        r"expected names among mu, tau",
    ):
        select_var_names(VARIABLES, ["sigma"])
    with pytest.raises(ValueError, match=r"filter_vars: found 'glob'"):
        select_var_names(VARIABLES, ["mu"], "glob")
    with pytest.raises(ValueError, match=r"invalid regular expression '\('"):
        select_var_names(VARIABLES, ["("], "regex")
    with pytest.raises(ValueError, match=r"which leaves no variable"):
        select_var_names(VARIABLES, ["~"], "like")
