"""The posterior container: draws of the quantities of interest and the pointwise log-likelihood."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass

import numpy as np
import pandas as pd
import xarray as xr

from bayesij.array.checks import (
    check_finite,
    check_labels,
    check_log_lik_values,
    check_unique,
    fail,
)
from bayesij.array.numeric import sum_by_group

__all__ = ["Posterior", "select_names", "base_name", "read_only"]

QUANTITY_DIMS = ("chain", "draw", "quantity")
LOG_LIK_DIMS = ("chain", "draw", "obs")


def base_name(name: str) -> str:
    """The variable name of a Stan-style element name: ``'beta[2]' -> 'beta'``."""
    return str(name).split("[", 1)[0]


def element_index(name: str) -> list[str]:
    """The labels between an element name's brackets: ``'Omega[1,2]' -> ['1', '2']``,
    ``'a[US Steel]' -> ['US Steel']``; ``[]`` for a name without them."""
    name = str(name)
    variable = base_name(name)
    if len(name) == len(variable) or not name.endswith("]"):
        return []
    return name[len(variable) + 1 : -1].split(",")


def select_names(available: Iterable[str], requested, argument: str = "quantities") -> list[str]:
    """Resolve requested names against available element names.

    A request is an element name (``'beta[1]'``) or a variable name (``'beta'``), which
    selects all of its elements in their stored order. Unknown names are an error.

    Parameters
    ----------
    available : iterable of str
    requested : str or iterable of str
    argument : str
        Name of the argument, for error messages.

    Returns
    -------
    list of str
        Selected element names, in the order requested, each once.
    """
    available = [str(name) for name in available]
    requested = check_labels(requested, argument)
    selected: list[str] = []
    for request in requested:
        request = str(request)
        matches = [n for n in available if n == request or base_name(n) == request]
        matches = matches or _by_position(available, request)
        if not matches and any(base_name(n) == base_name(request) for n in available):
            elements = [n for n in available if base_name(n) == base_name(request)]
            raise fail(
                argument,
                f"the unknown element {request!r}",
                f"one of {_shown(elements)} (by label), or a 1-based position such as "
                f"'{base_name(request)}[1]'",
            )
        if not matches:
            variables = list(dict.fromkeys(base_name(n) for n in available))
            shown = ", ".join(variables[:20]) + (", ..." if len(variables) > 20 else "")
            element = next((n for n in available if "[" in n), None)
            example = f" or one of their elements such as {element!r}" if element else ""
            raise fail(argument, f"the unknown name {request!r}", f"one of {shown}{example}")
        selected.extend(m for m in matches if m not in selected)
    return selected


def _shown(names: list[str], limit: int = 4) -> str:
    if len(names) <= limit:
        return ", ".join(map(repr, names))
    return ", ".join(map(repr, names[: limit - 1])) + f", ..., {names[-1]!r}"


def _by_position(available: list[str], request: str) -> list[str]:
    """The element at a Stan-style 1-based position (``'a[2]'``, ``'Omega[1,2]'``) of a
    variable whose elements are named by labels (``'a[US Steel]'``); [] if none."""
    variable = base_name(request)
    try:
        position = [int(part) - 1 for part in element_index(request)]
    except ValueError:
        return []
    elements = [n for n in available if base_name(n) == variable and "[" in n]
    parts = [element_index(n) for n in elements]
    if not position:
        return []
    if not elements or any(len(p) != len(position) for p in parts):
        return []
    grids = [list(dict.fromkeys(p[k] for p in parts)) for k in range(len(position))]
    if any(not 0 <= i < len(g) for i, g in zip(position, grids, strict=True)):
        return []
    wanted = [g[i] for i, g in zip(position, grids, strict=True)]
    return [n for n, p in zip(elements, parts, strict=True) if p == wanted]


@dataclass(frozen=True, repr=False)
class Posterior:
    """Posterior draws of quantities and the pointwise log-likelihood over the same draws.

    Build one with an adapter (:func:`bayesij.from_inference_data`,
    :func:`bayesij.from_cmdstanpy`, :func:`bayesij.from_pystan`, :func:`bayesij.from_arrays`)
    rather than directly.

    Parameters
    ----------
    quantities : xarray.DataArray with dims (chain, draw, quantity)
        Draws of any scalar functions of the parameters, with quantity names such as
        ``'beta[1]'`` as the ``quantity`` coordinate.
    log_lik : xarray.DataArray with dims (chain, draw, obs)
        ``log p(x_n | theta_s)`` for each draw and observation; finite or ``-inf``.
    groups : xarray.DataArray with dim (obs,), optional
        The exchangeable unit of each observation (e.g. a school or a subject), used by
        default wherever ``groups`` is accepted.
    argument : str, default "log_lik"
        Name of the log-likelihood argument in error messages (the argument of the public
        function that received it).

    Notes
    -----
    Every value is checked here, once: the log-likelihood is finite or ``-inf``, the
    quantities finite. Estimators trust a container and do not check it again.

    Examples
    --------
    >>> import numpy as np, bayesij
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(size=(4, 100, 1))
    >>> post = bayesij.from_arrays(mu, -0.5 * (1.0 - mu) ** 2 + np.zeros(5), quantity_names=["mu"])
    >>> post
    Posterior: 4 chain(s) x 100 draws, 1 quantities (mu), 5 observations
    """

    quantities: xr.DataArray
    log_lik: xr.DataArray
    groups: xr.DataArray | None = None
    argument: InitVar[str] = "log_lik"

    def __post_init__(self, argument: str):
        _check_dims(self.quantities, QUANTITY_DIMS, "quantities")
        _check_dims(self.log_lik, LOG_LIK_DIMS, argument)
        q_shape, l_shape = self.quantities.shape, self.log_lik.shape
        if q_shape[:2] != l_shape[:2]:
            raise fail(
                argument,
                f"{l_shape[0]} chains x {l_shape[1]} draws while quantities has "
                f"{q_shape[0]} x {q_shape[1]}",
                "the same chains and draws in both",
            )
        if l_shape[2] == 0:
            raise fail(argument, f"no observations (shape {l_shape})", "at least one observation")
        if q_shape[0] * q_shape[1] < 2:
            found = "a single draw" if q_shape[2] else f"{q_shape[0] * q_shape[1]} draw"
            raise fail(
                "quantities" if q_shape[2] else argument, found, "at least 2 posterior draws"
            )
        check_unique(self.quantities["quantity"].values, "quantities (quantity names)")
        check_unique(self.log_lik["obs"].values, f"{argument} (observation ids)")
        check_finite(self.quantities.values, "quantities")
        check_log_lik_values(self.log_lik.values.reshape(-1, l_shape[2]), argument)
        if self.groups is not None:
            object.__setattr__(self, "groups", self._group_labels(self.groups))

    def __setstate__(self, state: dict) -> None:
        """An unpickled or deep-copied container (what Dask, loky and joblib send, and
        ``copy.deepcopy`` makes) holds new arrays: they are made read-only as the checked
        originals were, so that values checked once still cannot change."""
        self.__dict__.update(state)
        for array in (self.quantities, self.log_lik, self.groups):
            if array is not None:
                read_only(array.values)

    # ----------------------------------------------------------------- sizes and names
    @property
    def n_chains(self) -> int:
        """Number of chains."""
        return self.log_lik.sizes["chain"]

    @property
    def n_draws(self) -> int:
        """Total number of draws over all chains."""
        return self.log_lik.sizes["chain"] * self.log_lik.sizes["draw"]

    @property
    def n_obs(self) -> int:
        """Number of observations (columns of the log-likelihood)."""
        return self.log_lik.sizes["obs"]

    @property
    def quantity_names(self) -> list[str]:
        """Names of the quantities, in order."""
        return [str(name) for name in self.quantities["quantity"].values]

    @property
    def obs_names(self) -> list:
        """Observation ids, in order."""
        return self.log_lik["obs"].values.tolist()

    # ----------------------------------------------------------------- derived containers
    def select(self, quantities) -> Posterior:
        """A container with only the named quantities (variable or element names)."""
        names = select_names(self.quantity_names, quantities)
        return self._derived(self.quantities.sel(quantity=names), self.groups)

    def with_groups(self, groups) -> Posterior:
        """A container whose default exchangeable units are ``groups`` (None: the
        observations)."""
        return self._derived(
            self.quantities, None if groups is None else self._group_labels(groups)
        )

    def _derived(self, quantities: xr.DataArray, groups) -> Posterior:
        """A container of values this one has checked (a subset of its quantities, its
        log-likelihood, checked group labels): built without checking them again."""
        derived = object.__new__(Posterior)
        for name, value in (
            ("quantities", quantities),
            ("log_lik", self.log_lik),
            ("groups", groups),
        ):
            object.__setattr__(derived, name, value)
        return derived

    # ----------------------------------------------------------------- units
    def _group_labels(self, groups) -> xr.DataArray:
        """Group labels as a DataArray over obs, checked to cover every observation."""
        obs = self.log_lik["obs"].values
        mapping = _as_mapping(groups)
        if mapping is not None:
            missing = [o for o in obs if o not in mapping]
            if missing:
                raise fail(
                    "groups",
                    f"no group for {len(missing)} of {obs.size} observation(s) "
                    f"(first: {missing[:5]})",
                    "a group label for every observation id",
                )
            labels = np.array([mapping[o] for o in obs], dtype=object)
        else:
            labels = np.asarray(groups, dtype=object)
            if labels.shape != (obs.size,):
                raise fail(
                    "groups",
                    f"shape {labels.shape}",
                    f"one label per observation, shape ({obs.size},), or a mapping "
                    "from observation id to label",
                )
        missing = _missing(labels)
        if missing.any():
            first = obs[np.flatnonzero(missing)[0]]  # a NumPy scalar told as its value
            raise fail(
                "groups",
                f"{int(missing.sum())} missing label(s) (first at observation "
                f"{first.item() if isinstance(first, np.generic) else first!r})",
                "a group label for every observation",
            )
        return xr.DataArray(labels, dims=("obs",), coords={"obs": obs}, name="groups")

    def units(self, groups=None) -> tuple[np.ndarray, xr.DataArray]:
        """The log-likelihood of the exchangeable units and their labels.

        Parameters
        ----------
        groups : array_like, mapping or DataArray, optional
            Group of each observation; defaults to the container's ``groups``. With no
            groups the units are the observations.

        Returns
        -------
        log_lik : ndarray of shape (n_chains, n_draws, n_units)
        labels : DataArray of dim ``obs`` or ``group``
        """
        values, labels, _ = self.unit_log_lik(groups)
        return values, labels

    def unit_log_lik(self, groups=None) -> tuple[np.ndarray, xr.DataArray, np.ndarray]:
        """:meth:`units` and the unit (0-based code) of each observation, the groups
        checked once: ``(log_lik (n_chains, n_draws, n_units), labels, codes (n_obs,))``."""
        values = self.log_lik.values
        codes, coord = self.unit_codes(groups)
        if coord.dims == ("obs",):
            return values, coord, codes
        n_chains, n_draws, n_obs = values.shape
        summed = sum_by_group(values.reshape(-1, n_obs), codes, coord.size)
        return summed.reshape(n_chains, n_draws, coord.size), coord, codes

    def unit_codes(self, groups=None) -> tuple[np.ndarray, xr.DataArray]:
        """The unit (0-based code) of each observation and the unit labels.

        Returns ``(codes, labels)``: codes of shape (n_obs,) and a DataArray of dim ``obs``
        (no groups: every observation its own unit) or ``group`` (labels in order of
        first appearance). ``groups`` defaults to the container's.
        """
        if groups is None:
            groups = self.groups
        if groups is None:
            return np.arange(self.n_obs), self.log_lik["obs"]
        labels = (groups if groups is self.groups else self._group_labels(groups)).values
        unique, codes = _unique_in_order(labels)
        return codes, xr.DataArray(unique, dims=("group",), name="group")

    def __repr__(self) -> str:
        names = self.quantity_names
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        text = (
            f"Posterior: {self.n_chains} chain(s) x {self.log_lik.sizes['draw']} draws, "
            f"{len(names)} quantities ({shown}), {self.n_obs} observations"
        )
        if self.groups is not None:
            text += f" in {label_codes(self.groups.values)[0].size} groups"
        return text


def read_only(values: np.ndarray) -> None:
    """Make checked values read-only, and the arrays they are views of (the caller's own,
    when it was not copied): what the checks passed cannot be changed afterwards, through
    the container or the array it shares (an assignment raises NumPy's read-only error
    instead of reaching the kernels unchecked)."""
    array = values
    while isinstance(array, np.ndarray):
        array.flags.writeable = False
        array = array.base


def _as_mapping(groups) -> dict | None:
    """Observation id -> label for a mapping, a pandas Series or a DataArray with obs coords."""
    if isinstance(groups, xr.DataArray):
        if groups.dims != ("obs",):
            raise fail("groups", f"a DataArray with dims {groups.dims}", "dims ('obs',)")
        if "obs" not in groups.coords:
            return None
        return dict(zip(groups["obs"].values, groups.values, strict=True))
    if isinstance(groups, Mapping) or callable(getattr(groups, "items", None)):
        return dict(groups.items())
    return None


def _check_dims(array, dims: tuple[str, ...], argument: str) -> None:
    if not isinstance(array, xr.DataArray):
        raise fail(argument, f"a {type(array).__name__}", f"an xarray.DataArray with dims {dims}")
    if array.dims != dims:
        raise fail(argument, f"dims {array.dims}", f"dims {dims}")


def _missing(labels: np.ndarray) -> np.ndarray:
    """Which labels are none: None, NaN, ``pd.NA``, ``NaT`` (the text ``"NA"`` is a
    label; a label that is itself a sequence is not missing)."""
    return np.asarray(pd.isna(np.asarray(labels, dtype=object).reshape(-1)), dtype=bool)


def label_codes(labels, *, sort: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The distinct labels and the code of each label, labels grouped by equality as pandas
    groups them: ``1`` and ``1.0`` are one label, ``1`` and ``"1"`` two.

    Parameters
    ----------
    labels : array_like of shape (n,)
        No missing values (checked by the callers, which name their argument).
    sort : bool, default False
        Distinct labels sorted (numbers before text); else in order of first appearance.

    Returns
    -------
    unique : ndarray of shape (n_unique,)
    codes : ndarray of int, shape (n,)
        ``unique[codes]`` equals ``labels``.
    """
    codes, unique = pd.factorize(np.asarray(labels, dtype=object), sort=sort)
    return np.asarray(unique, dtype=object), codes.astype(np.intp)


def _unique_in_order(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique labels in order of first appearance, and the code of each label."""
    return label_codes(labels)
