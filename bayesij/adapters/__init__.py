"""Adapters: build a :class:`~bayesij.posterior.Posterior` from the objects users already have.

Adapters only move data; they compute no statistics. They are the only modules that import
ArviZ, CmdStanPy or PyStan, and they do so when called, not when imported.
"""
