"""The floors of docs/architecture.md: the layer of each part of the package, lowest first.
A module may import its own layer and any layer below it, never one above."""

LAYERS = {
    "array": 0,
    "data": 1,
    "adapters": 2,
    "stan_models": 2,
    "stats": 3,
    "refit": 4,
    "report": 5,
    "demo": 6,
    "cli": 7,
}


def layer_of(module: str | None) -> int | None:
    """Layer of a ``bayesij.*`` module name; None outside the package and for ``bayesij``
    itself (the public door)."""
    parts = (module or "").split(".")
    if parts[0] != "bayesij" or len(parts) == 1:
        return None
    return LAYERS.get(parts[1])
