"""The shipped models' example data: every model's data block, with unit weights sized to
its observations, reproducible by seed, and an unknown name refused."""

import numpy as np
import pytest

from bayesij.stan_models import examples


@pytest.mark.parametrize("name", sorted(examples._MAKERS))
def test_every_model_has_data_with_unit_weights(name):
    data = examples.example_data(name, n=30, seed=4)
    size = data.get("N", data.get("J"))
    assert data["weights"].shape == (size,) and np.all(data["weights"] == 1.0)
    again = examples.example_data(name, n=30, seed=4)
    for key, value in data.items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(again[key]))
    for key, value in data.items():
        if np.ndim(value) >= 1 and key not in ("weights",) and len(value) not in (size,):
            continue  # design matrices, priors: other lengths
        assert np.all(np.isfinite(np.asarray(value, dtype=float))), key


def test_an_unknown_model_is_refused():
    with pytest.raises(ValueError, match=r"^name: found 'nope'; expected one of"):
        examples.example_data("nope")
