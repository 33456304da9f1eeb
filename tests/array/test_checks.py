"""The one error template and the shared validators: every refusal names the argument, what
was found and what was expected; bounds are exact (open or closed as documented); nothing is
cast (True is not 1, '1' is not 1). The table of bad values fed to every public function is
tests/test_bad_input_table.py."""

import numpy as np
import pytest

from bayesij.array import checks


def test_the_template():
    error = checks.fail("alpha", "-1", "a number > 0", "Pass a positive number.")
    assert str(error) == "alpha: found -1; expected a number > 0. Pass a positive number."
    assert isinstance(error, ValueError)


def test_real_numbers_and_their_bounds():
    assert checks.check_real(0.5, "z", 0.0, 1.0) == 0.5
    assert checks.check_real(0.0, "z", 0.0, 1.0) == 0.0  # closed
    with pytest.raises(ValueError, match=r"^z: found 0.0; expected a number in \(0, 1\]"):
        checks.check_real(0.0, "z", 0.0, 1.0, low_open=True)
    with pytest.raises(ValueError, match=r"^z: found 1.0; expected a number in \[0, 1\)"):
        checks.check_real(1.0, "z", 0.0, 1.0, high_open=True)
    with pytest.raises(ValueError, match=r"^z: found True; expected a finite number"):
        checks.check_real(True, "z")
    with pytest.raises(ValueError, match=r"^z: found nan"):
        checks.check_real(float("nan"), "z")
    with pytest.raises(ValueError, match=r"^z: found '1'"):
        checks.check_real("1", "z")


def test_integers_flags_seeds_and_ddof():
    assert checks.check_positive_int(np.int64(3), "n") == 3
    for bad in (0, True, 2.0, "2"):
        with pytest.raises(ValueError, match=r"^n: found .*; expected an integer >= 1"):
            checks.check_positive_int(bad, "n")
    assert checks.check_seed(0) == 0
    assert checks.check_flag(np.bool_(True), "save_psis") is True
    with pytest.raises(ValueError, match=r"^save_psis: found 1; expected True or False"):
        checks.check_flag(1, "save_psis")
    assert checks.check_ddof(1) == 1
    with pytest.raises(ValueError, match=r"^ddof: found True"):
        checks.check_ddof(True)


def test_log_likelihood_values():
    values = np.zeros((5, 3))
    checks.check_log_lik_values(values)
    values[1, 2] = -np.inf  # legal: impossible at that draw
    checks.check_log_lik_values(values)
    np.testing.assert_array_equal(checks.impossible_columns(values), [False, False, True])
    for bad, found in ((np.nan, "1 NaN value"), (np.inf, r"1 \+inf value"), (2e30, "1 value")):
        broken = np.zeros((5, 3))
        broken[3, 1] = bad
        with pytest.raises(ValueError, match=rf"^log_lik: found {found}"):
            checks.check_log_lik_values(broken)


def test_r_eff_and_constant_columns():
    np.testing.assert_array_equal(checks.checked_r_eff(0.5, 3), [0.5, 0.5, 0.5])
    for bad in (0.0, -1.0, [1.0, 2.0], "1", True):
        with pytest.raises(ValueError, match=r"^r_eff: "):
            checks.checked_r_eff(bad, 3)
    draws = np.column_stack([np.ones(10), np.arange(10.0), np.full(10, 1e9) + 1e-4])
    np.testing.assert_array_equal(checks.constant_columns(draws), [True, False, True])


def test_draw_matrices_and_chains():
    matrix, chains = checks.as_draws_matrix(np.zeros((2, 3, 4)), "log_lik")
    assert matrix.shape == (6, 4)
    np.testing.assert_array_equal(chains, [0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match=r"^log_lik: found complex values"):
        checks.as_float_array(np.zeros(3, dtype=complex), "log_lik")
    float32 = np.zeros(3, dtype=np.float32)
    assert checks.as_float_array(float32, "x", keep_float32=True).dtype == np.float32
    assert checks.as_float_array(float32, "x").dtype == np.float64


def test_r_eff_that_is_not_numbers_is_named():
    expected = r"expected a finite positive number, or one per unit \(shape \(3,\)\)"
    with pytest.raises(ValueError, match=rf"^r_eff: found values of type <U1; {expected}"):
        checks.checked_r_eff(np.array(["a", "b", "c"]), 3)
    with pytest.raises(ValueError, match=rf"^r_eff: found a list; {expected}"):
        checks.checked_r_eff([[1.0, 2.0], [3.0]], 3)  # ragged: not an array


def test_column_names_one_per_column_each_once():
    assert checks.checked_names(None, 2, ["f[1]", "f[2]"], "quantity_names") == ["f[1]", "f[2]"]
    assert checks.checked_names(("a", "b"), 2, [], "quantity_names") == ["a", "b"]
    assert checks.checked_names("a", 1, [], "obs_names") == ["a"]  # one name, not its letters
    with pytest.raises(ValueError, match=r"^obs_names: found 3 names; expected one name per c"):
        checks.checked_names(["a", "b", "c"], 2, [], "obs_names")
    with pytest.raises(ValueError, match=r"^obs_names: found 1 repeated label\(s\): 'a'"):
        checks.checked_names(["a", "a"], 2, [], "obs_names")
    with pytest.raises(ValueError, match=r"^obs_names: found 3; expected a name or a list"):
        checks.checked_names(3, 1, [], "obs_names")
