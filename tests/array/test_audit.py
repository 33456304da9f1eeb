"""The audit's per-block kernel is the estimators' kernels on one read of the block."""

import numpy as np

from bayesij.array.amip import goal_for, goal_influence
from bayesij.array.audit import audit_parts
from bayesij.array.jackknife import ij_part, ij_setup
from bayesij.array.loo import loo_methods
from bayesij.array.waic import waic_parts


def test_the_parts_of_a_block_are_those_of_each_kernel():
    rng = np.random.default_rng(0)
    f = rng.normal(size=(4, 300, 2))
    log_lik = -0.5 * (rng.standard_t(4, size=25) - f[..., :1]) ** 2
    setup = ij_setup(f.reshape(1200, 2), np.repeat(np.arange(4), 300))
    fs = [f[..., 0], f[..., 1]]
    goals = [goal_for(fs[0], "sign", 1.96), goal_for(fs[1], "significance", 1.96)]
    positions = np.arange(25)
    parts = audit_parts(log_lik, positions, setup=setup, fs=fs, goals=goals, with_half=True)
    np.testing.assert_array_equal(parts.ij.psi, ij_part(log_lik, setup, positions).psi)
    loo = loo_methods(log_lik, ("psis",), expectation_draws=setup.centred_f)["psis"]
    np.testing.assert_array_equal(parts.loo.elpd, loo.elpd)
    np.testing.assert_array_equal(parts.loo.expectations, loo.expectations)
    for name, values in waic_parts(log_lik)._asdict().items():
        np.testing.assert_array_equal(getattr(parts.waic, name), values, err_msg=name)
    influence = goal_influence(log_lik, fs, goals, True)
    np.testing.assert_array_equal(parts.influence["all"].psi, influence["all"].psi)
    np.testing.assert_array_equal(parts.influence["half"].psi, influence["half"].psi)
    assert audit_parts(log_lik, positions, setup=setup).influence is None


def test_waic_from_the_rows_psis_transposes_over_several_chunks():
    """The audit's WAIC terms come from PSIS-LOO's transposed chunks (three of 310 units
    here, on the threads): every unit's terms, the NumPy ones of a range above 700 too,
    are those of the WAIC pass of its own."""
    rng = np.random.default_rng(1)
    f = rng.normal(size=(4, 300, 1))
    log_lik = -0.5 * (rng.normal(size=700) - f) ** 2
    log_lik[..., 650] *= 900  # a range above 700: the NumPy terms
    setup = ij_setup(f.reshape(1200, 1), np.repeat(np.arange(4), 300))
    parts = audit_parts(log_lik, np.arange(700), setup=setup)
    reference = waic_parts(log_lik)
    assert np.ptp(log_lik[..., 650]) > 700
    for name, values in reference._asdict().items():
        np.testing.assert_array_equal(getattr(parts.waic, name), values, err_msg=name)
