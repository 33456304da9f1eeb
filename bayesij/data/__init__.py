"""The data layer: the :class:`Posterior` container and :func:`as_posterior`, the one door
through which every public estimator takes its input."""
