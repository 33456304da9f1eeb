"""A :class:`~bayesij.data.posterior.Posterior`'s draws saved as a user saves them: a
DataTree or ArviZ 0.23's InferenceData, the log-likelihood in memory or opened lazily."""

import pytest


def saved_fit(post, container: str, chunks: dict | None):
    """``post``'s draws as a user saves them (a DataTree, or ArviZ 0.23's InferenceData),
    the log-likelihood in memory or opened lazily (dask chunks over the observations)."""
    import xarray as xr

    quantities = post.quantities
    posterior = xr.Dataset(
        {
            str(name).replace("[", "").replace("]", ""): (
                ("chain", "draw"),
                quantities.sel(quantity=name).values,
            )
            for name in quantities.quantity.values
        }
    )
    log_lik = xr.Dataset({"y": (("chain", "draw", "obs"), post.log_lik.values)})
    if chunks:
        pytest.importorskip("dask")
        log_lik = log_lik.chunk(chunks)
    if container == "DataTree":
        return xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": log_lik})
    arviz = pytest.importorskip("arviz")
    if int(arviz.__version__.split(".")[0]) >= 1:
        pytest.skip("ArviZ 1.x has no InferenceData (DataTree is tested)")
    return arviz.InferenceData(posterior=posterior, log_likelihood=log_lik)
