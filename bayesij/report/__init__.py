"""Reports built from result objects: the model audit, plots and text tables."""
