"""Input checks shared by every layer, with one message template.

Every failure is a ``ValueError`` that names the argument, what was found, what was
expected and, where it helps, how to fix it::

    log_lik: found 3 NaN values (first at draw 12, obs 4); expected finite values or -inf.

This module depends on NumPy only, so the array layer can use it without importing xarray.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bayesij.array.numeric import map_chunks

__all__ = [
    "fail",
    "as_float_array",
    "as_draws_matrix",
    "as_chains",
    "chain_order",
    "chain_grouping",
    "check_same_draws",
    "check_log_lik_values",
    "check_finite",
    "check_chain_ids",
    "check_positive_int",
    "check_flag",
    "constant_columns",
    "check_seed",
    "check_ddof",
    "check_real",
    "check_labels",
    "check_unique",
    "checked_names",
    "column_slices",
    "impossible_columns",
    "log_lik_draws",
    "log_lik_matrix",
    "checked_r_eff",
]


def fail(argument: str, found: str, expected: str, fix: str | None = None) -> ValueError:
    """Build the ``ValueError`` used everywhere: argument, what was found, what was expected."""
    message = f"{argument}: found {found}; expected {expected}."
    if fix:
        message += f" {fix}"
    return ValueError(message)


def as_float_array(values, argument: str, *, keep_float32: bool = False) -> np.ndarray:
    """``values`` as a float64 array (no copy when it already is one); complex, text and
    other non-real values are an error naming ``argument``, never cast silently.

    ``keep_float32=True`` (log-likelihood matrices) keeps float32 input as it is, without
    a float64 copy of the whole array: the kernels read it in column chunks, each converted
    to float64 (:func:`bayesij.array.numeric.read_columns`), and compute in float64.
    """
    array = _plain_array(values, argument)
    if array.dtype.kind not in "iuf":
        found = "complex values" if array.dtype.kind == "c" else f"values of type {array.dtype}"
        raise fail(argument, found, "real numbers")
    if keep_float32 and array.dtype == np.float32:
        return array
    return array.astype(float, copy=False)


def _plain_array(values, argument: str) -> np.ndarray:
    """``values`` as a NumPy array, refusing what ``np.asarray`` would silently lose: a
    masked array's mask, a (chain, draw) MultiIndex's chains (such a DataFrame becomes
    (n_chains, n_draws, n_columns)), rows of different lengths."""
    if isinstance(values, np.ma.MaskedArray):
        masked = int(np.ma.count_masked(values))
        if masked:
            raise fail(
                argument,
                f"a masked array with {masked} masked value(s)",
                "plain values (a mask would be ignored): fill or drop the masked ones "
                "(np.ma.filled, a subset of the observations)",
            )
        return np.asarray(values.data)
    index = getattr(values, "index", None)
    if getattr(index, "nlevels", 1) > 1 and hasattr(values, "to_numpy"):
        return _by_chain_and_draw(values, argument)
    try:
        array = np.asarray(values)
    except ValueError as error:  # NumPy's "inhomogeneous shape"
        raise fail(
            argument,
            f"a sequence that is not a regular array ({str(error).split('.')[0]})",
            "rows (chains, draws) of equal lengths",
        ) from None
    if array.dtype == object and callable(getattr(values, "to_numpy", None)):
        return _nullable_numbers(values, array, argument)
    return array


def _nullable_numbers(values, array: np.ndarray, argument: str) -> np.ndarray:
    """A pandas table or series of nullable numbers (``Float64``, ``Int64``) as the float
    array it holds; its missing values (``pd.NA``) are named, not turned into NaN. A
    column of text stays object and is refused by the caller."""
    missing = np.asarray(values.isna()) if callable(getattr(values, "isna", None)) else None
    if missing is not None and missing.any():
        where = np.argwhere(missing)[0].tolist()
        raise fail(
            argument,
            f"{int(missing.sum())} missing value(s) (pd.NA or None; first at position {where})",
            "a value everywhere (fill or drop the missing ones)",
        )
    try:
        return np.asarray(values.to_numpy(dtype=float))
    except (TypeError, ValueError):
        return array


def _by_chain_and_draw(frame, argument: str) -> np.ndarray:
    """A DataFrame indexed by (chain, draw) as (n_chains, n_draws, n_columns)."""
    names = list(frame.index.names)
    if names[:2] != ["chain", "draw"] or frame.index.nlevels != 2:
        raise fail(
            argument,
            f"a DataFrame with a MultiIndex {names}",
            "one row per draw, with no index or a ('chain', 'draw') MultiIndex",
        )
    ordered = frame.sort_index()
    chains = ordered.index.get_level_values("chain").unique()
    draws = ordered.index.get_level_values("draw").unique()
    if len(ordered) != len(chains) * len(draws) or ordered.index.has_duplicates:
        raise fail(
            argument,
            f"{len(ordered)} rows for {len(chains)} chains x {len(draws)} draws",
            "every (chain, draw) pair once",
        )
    values = ordered.to_numpy()
    return values.reshape(len(chains), len(draws), values.shape[1])


def as_draws_matrix(
    values, argument: str, chain_ids=None, *, keep_float32: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``values`` as a float array of shape (n_draws, n_columns) and its chain ids.

    Parameters
    ----------
    values : array_like of shape (n_draws, n_columns) or (n_chains, n_draws, n_columns)
        Draws stacked over chains, or one row of draws per chain.
    argument : str
        Name of the argument, used in error messages.
    chain_ids : array_like of shape (n_draws,), optional
        Chain of each row of 2-D input. ``None`` means one chain. Not allowed with 3-D input,
        whose first axis already gives the chains.

    Returns
    -------
    matrix : ndarray of shape (n_draws_total, n_columns)
    chain_ids : ndarray of shape (n_draws_total,), integer codes 0..n_chains-1
    """
    array = as_float_array(values, argument, keep_float32=keep_float32)
    if array.ndim in (2, 3) and 0 in array.shape:
        raise fail(
            argument,
            f"an empty array (shape {array.shape})",
            "at least one draw and one column (observation or quantity)",
        )
    if array.ndim == 3:
        if chain_ids is not None:
            raise fail(
                "chain_ids",
                "chain ids together with 3-D input",
                "chain_ids only with 2-D (n_draws, n_columns) input",
                "3-D input already has chains on its first axis.",
            )
        n_chains, n_draws, n_columns = array.shape
        codes = np.repeat(np.arange(n_chains), n_draws)
        return array.reshape(n_chains * n_draws, n_columns), codes
    if array.ndim != 2:
        raise fail(
            argument,
            f"an array with {array.ndim} dimensions, shape {array.shape}",
            "shape (n_draws, n_columns) or (n_chains, n_draws, n_columns)",
        )
    codes = check_chain_ids(chain_ids, array.shape[0])
    return array, codes


def chain_order(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Order of the draws that groups them by chain (keeping their order within a chain), and
    the number of chains. Every chain must hold the same number of draws."""
    counts = np.bincount(codes)
    if np.any(counts != counts[0]):
        raise fail(
            "chain_ids",
            f"chains of unequal lengths {counts.tolist()}",
            "the same number of draws in every chain",
        )
    return np.argsort(codes, kind="stable"), counts.size


def chain_grouping(codes: np.ndarray) -> tuple[np.ndarray | None, int]:
    """:func:`chain_order`, with None for draws already grouped by chain (3-D input,
    stacked chains), which need no reordering copy."""
    order, n_chains = chain_order(codes)
    return (None if np.array_equal(order, np.arange(order.size)) else order), n_chains


def as_chains(matrix: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Draws (n_draws, n_columns) with chain codes as (n_chains, n_draws_per_chain, n_columns)."""
    order, n_chains = chain_order(codes)
    if np.array_equal(order, np.arange(order.size)):  # already grouped: a view, no copy
        return matrix.reshape(n_chains, -1, matrix.shape[1])
    return matrix[order].reshape(n_chains, -1, matrix.shape[1])


def check_chain_ids(chain_ids, n_draws: int) -> np.ndarray:
    """Integer chain codes 0..C-1 for ``n_draws`` rows; ``None`` gives a single chain."""
    if chain_ids is None:
        return np.zeros(n_draws, dtype=np.intp)
    ids = np.asarray(chain_ids)
    if ids.shape != (n_draws,):
        raise fail(
            "chain_ids",
            f"shape {ids.shape}",
            f"one chain id per draw, shape ({n_draws},)",
        )
    _, codes = np.unique(ids, return_inverse=True)
    return codes.astype(np.intp)


def check_same_draws(first: np.ndarray, second: np.ndarray, names: tuple[str, str]) -> None:
    """Both matrices must hold the same number of draws (rows), at least two."""
    if first.shape[0] != second.shape[0]:
        raise fail(
            names[1],
            f"{second.shape[0]} draws while {names[0]} has {first.shape[0]}",
            "the same posterior draws in both, row for row",
            "Take both from the same fit, with the same thinning and warmup removed.",
        )
    if first.shape[0] < 2:
        raise fail(
            names[0],
            f"{first.shape[0]} draw",
            "at least 2 posterior draws",
            "Covariances over the posterior need several draws (hundreds in practice).",
        )


def column_slices(shape: tuple[int, ...], max_items: int = 2**21) -> list[slice]:
    """Slices of the last axis so that each piece holds at most about ``max_items`` values."""
    rows = int(np.prod(shape[:-1])) or 1
    width = max(1, max_items // rows)
    return [slice(start, start + width) for start in range(0, shape[-1], width)]


def _count_where(values: np.ndarray, test) -> tuple[int, str]:
    """How many entries pass ``test``, and where the first one is (in words).

    Works on pieces of columns, so the temporary masks stay small for any matrix.
    """
    total, first = 0, ""
    for piece in column_slices(values.shape):
        mask = test(values[..., piece])
        count = int(mask.sum())
        if count and not first:
            index = np.argwhere(mask)[0]
            index[-1] += piece.start
            first = (
                f"draw {index[0]}, column {index[1]}"
                if mask.ndim == 2
                else f"index {tuple(int(i) for i in index)}"
            )
        total += count
    return total, first


#: Largest magnitude of a finite log-likelihood value and of a quantity's draw. Beyond,
#: the products and fourth moments the estimators form (psi's Monte Carlo error, the IJ
#: variance) overflow float64; no log density of a real model comes near these.
LOG_LIK_LIMIT = 1e30
QUANTITY_LIMIT = 1e40


def _out_of_range(piece: np.ndarray, limit: float) -> np.ndarray:
    """NaN, +inf and finite values beyond ``±limit``; -inf passes (two comparisons)."""
    return ~(piece < limit) | ((piece < -limit) & (piece != -np.inf))


def _all_within(values: np.ndarray, limit: float, minus_inf: bool) -> bool:
    """Whether every value is finite and within ``±limit`` (``-inf`` too when
    ``minus_inf``), by blocks of rows on threads: a compiled count of the values outside
    for contiguous float arrays, else the minimum and maximum (no temporary arrays; a NaN
    fails the test, it propagates through both)."""
    if values.size == 0:
        return True
    if values.ndim > 2 and not values.flags.c_contiguous:  # reshaping would copy
        return all(_all_within(part, limit, minus_inf) for part in values)
    rows = values.reshape(-1, values.shape[-1])
    step = max(1, 2**21 // rows.shape[1])
    failed = []
    compiled = rows.dtype in (np.float64, np.float32) and rows.flags.c_contiguous
    if compiled:
        from bayesij.array.kernels.values import count_outside  # compiled kernels: numba

    def check_block(block: slice) -> None:
        part = rows[block]
        if compiled:  # one pass, no temporary arrays
            if count_outside(part, limit, minus_inf):
                failed.append(block)
            return
        if not part.max() < limit:
            failed.append(block)
            return
        low = part.min()
        if low < -limit and not (minus_inf and not _out_of_range(part, limit).any()):
            failed.append(block)

    map_chunks(check_block, [slice(i, i + step) for i in range(0, rows.shape[0], step)])
    return not failed


def check_log_lik_values(log_lik: np.ndarray, argument: str = "log_lik") -> None:
    """Log-likelihood values must be finite (within ``±LOG_LIK_LIMIT``) or -inf."""
    if _all_within(log_lik, LOG_LIK_LIMIT, minus_inf=True):
        return
    expected = f"finite values within ±{LOG_LIK_LIMIT:.0e}, or -inf"
    count, where = _count_where(log_lik, np.isnan)
    if count:
        raise fail(
            argument,
            f"{count} NaN value(s) (first at {where})",
            expected,
            "A NaN log-likelihood usually means the model's generated quantities failed.",
        )
    count, where = _count_where(log_lik, np.isposinf)
    if count:
        raise fail(
            argument,
            f"{count} +inf value(s) (first at {where})",
            expected,
            "A log density of +inf is a point mass; check the likelihood's scale parameters.",
        )
    count, where = _count_where(log_lik, lambda p: _out_of_range(p, LOG_LIK_LIMIT))
    raise fail(
        argument,
        f"{count} value(s) beyond ±{LOG_LIK_LIMIT:.0e} (first at {where})",
        expected,
        "A log density this large is a unit or scale error; an observation impossible "
        "under a draw has log density -inf.",
    )


def check_finite(values: np.ndarray, argument: str, limit: float = QUANTITY_LIMIT) -> None:
    """All values must be finite and within ``±limit``."""
    if _all_within(values, limit, minus_inf=False):
        return
    count, where = _count_where(values, lambda piece: ~np.isfinite(piece))
    if count:
        raise fail(argument, f"{count} non-finite value(s) (first at {where})", "finite values")
    count, where = _count_where(values, lambda piece: _out_of_range(piece, limit))
    raise fail(
        argument,
        f"{count} value(s) beyond ±{limit:.0e} (first at {where})",
        f"finite values within ±{limit:.0e}",
        "Rescale them (other units): the estimators' products of draws must stay finite "
        "in double precision.",
    )


def check_positive_int(value, argument: str, minimum: int = 1) -> int:
    """An integer of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise fail(argument, repr(value), f"an integer >= {minimum}")
    return int(value)


#: The most replicates (bootstrap draws, simulations, refits) one argument may ask for: a
#: mistyped size (10**12) is named instead of trying to allocate hundreds of TiB.
MAX_REPLICATES = 10**6


def check_replicates(value, argument: str, minimum: int = 1) -> int:
    """A number of replicates: an integer from ``minimum`` to :data:`MAX_REPLICATES`."""
    count = check_positive_int(value, argument, minimum)
    if count > MAX_REPLICATES:
        raise fail(
            argument,
            repr(value),
            f"an integer from {minimum} to {MAX_REPLICATES:,} (each replicate holds a row of "
            "results in memory)",
        )
    return count


def constant_columns(values) -> np.ndarray:
    """Columns of draws (last axis) that do not vary: every draw equal, up to rounding
    (a range of at most 1e-12 of the mean's magnitude). Shape (n_columns,)."""
    matrix = np.asarray(values).reshape(-1, np.shape(values)[-1])
    spread = np.ptp(matrix, axis=0)
    return (spread == 0) | (spread <= 1e-12 * np.abs(matrix.mean(axis=0)))


def check_flag(value, argument: str) -> bool:
    """A boolean (True/False); 'yes', 1, None and the like are refused, not interpreted."""
    if not isinstance(value, (bool, np.bool_)):
        raise fail(argument, repr(value), "True or False")
    return bool(value)


def check_seed(value, argument: str = "seed") -> int:
    """A random seed: an integer >= 0."""
    return check_positive_int(value, argument, minimum=0)


def check_ddof(value) -> int:
    """``ddof`` of a standard error: 0 (ArviZ) or 1 (R loo)."""
    if isinstance(value, (bool, np.bool_)) or value not in (0, 1):
        raise fail("ddof", repr(value), "0 (ArviZ) or 1 (R loo)")
    return int(value)


def check_real(
    value,
    argument: str,
    low: float = -np.inf,
    high: float = np.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A finite real number in ``[low, high]`` (``(`` / ``)`` where open)."""
    if np.isinf(high):
        expected = (
            f"a finite number {'>' if low_open else '>='} {low:g}"
            if np.isfinite(low)
            else "a finite number"
        )
    else:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        expected = f"a number in {interval}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise fail(argument, repr(value), expected)
    number = float(value)
    inside = np.isfinite(number) and (number > low if low_open else number >= low)
    inside = inside and (number < high if high_open else number <= high)
    if not inside:
        raise fail(argument, repr(value), expected)
    return number


def check_labels(values, argument: str) -> list:
    """A string or a sequence of labels (names, ids) as a list; a number is refused."""
    if isinstance(values, (str, bytes)):
        return [values]
    if np.ndim(values) != 1 or isinstance(values, dict):
        raise fail(argument, repr(values)[:60], "a name or a list of names")
    return list(values)


def checked_names(names, size: int, default: list, argument: str) -> list:
    """Names of ``size`` columns (quantities, observations): ``names`` checked as labels
    (:func:`check_labels`), one per column and each once; ``default`` when None."""
    if names is None:
        return default
    names = check_labels(names, argument)
    if len(names) != size:
        raise fail(argument, f"{len(names)} names", f"one name per column, {size} names")
    check_unique(names, argument)
    return names


def check_unique(labels: Sequence, argument: str) -> None:
    """Labels (observation ids, quantity names) must not repeat."""
    values, counts = np.unique(np.asarray(labels, dtype=object).astype(str), return_counts=True)
    repeated = values[counts > 1]
    if repeated.size:
        shown = ", ".join(repr(str(v)) for v in repeated[:5])
        raise fail(
            argument,
            f"{repeated.size} repeated label(s): {shown}",
            "each label once",
        )


def impossible_columns(log_lik: np.ndarray) -> np.ndarray:
    """Columns with -inf at some draw: observations impossible under part of the posterior
    (pieces of columns shared among :func:`~bayesij.array.numeric.map_chunks`' threads)."""
    out = np.zeros(log_lik.shape[-1], dtype=bool)
    draw_axes = tuple(range(log_lik.ndim - 1))

    def work(piece: slice) -> None:  # the minimum: no boolean temporary
        out[piece] = np.min(log_lik[..., piece], axis=draw_axes) == -np.inf

    map_chunks(work, column_slices(log_lik.shape))
    return out


def log_lik_draws(
    log_lik, chain_ids=None, check: bool = True, *, keep_float32: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``log_lik`` as (n_draws, n_obs) with at least two draws, and its chain codes; values
    checked unless ``check=False`` (input a container or a caller has already checked).
    ``keep_float32``: as :func:`as_float_array`, for callers that read the matrix in
    converted chunks."""
    matrix, chains = as_draws_matrix(log_lik, "log_lik", chain_ids, keep_float32=keep_float32)
    if check:
        check_log_lik_values(matrix)
    if matrix.shape[0] < 2:
        raise fail("log_lik", f"{matrix.shape[0]} draw", "at least 2 posterior draws")
    return matrix, chains


def log_lik_matrix(log_lik, check: bool = True, *, keep_float32: bool = False) -> np.ndarray:
    """:func:`log_lik_draws` without the chain codes."""
    return log_lik_draws(log_lik, None, check, keep_float32=keep_float32)[0]


def checked_r_eff(r_eff, n_obs: int) -> np.ndarray:
    """Relative efficiencies as a float vector of ``n_obs`` finite positive values: a scalar
    for every unit or one per unit. Anything else is an error naming ``r_eff``."""
    expected = f"a finite positive number, or one per unit (shape ({n_obs},))"
    if isinstance(r_eff, (str, bytes, bool)):
        raise fail("r_eff", repr(r_eff), expected)
    try:
        values = np.asarray(r_eff)
    except (TypeError, ValueError):
        raise fail("r_eff", f"a {type(r_eff).__name__}", expected) from None
    if values.dtype.kind not in "iuf":
        raise fail("r_eff", f"values of type {values.dtype}", expected)
    if values.ndim > 1 or (values.ndim == 1 and values.size != n_obs):
        raise fail("r_eff", f"shape {values.shape}", expected)
    values = np.broadcast_to(values.astype(float), (n_obs,)).copy()
    if not np.all((values > 0) & np.isfinite(values)):
        raise fail("r_eff", "values that are not finite and positive", expected)
    return values
