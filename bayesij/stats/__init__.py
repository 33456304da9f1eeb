"""The labelled estimators: take a :class:`~bayesij.data.posterior.Posterior` (or anything
:func:`~bayesij.data.convert.as_posterior` accepts), call the array layer and return result
objects that hold what they report."""
