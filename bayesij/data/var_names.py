"""``var_names`` and ``filter_vars`` as ArviZ reads them: names, ``~name`` to exclude, and
substring (``"like"``) or regular-expression (``"regex"``) matching."""

from __future__ import annotations

import re

from bayesij.array.checks import check_labels, fail

__all__ = ["select_var_names"]

FILTERS = (None, "like", "regex")


def select_var_names(variables: list[str], var_names, filter_vars=None) -> list[str]:
    """The variables ``var_names`` selects, in the order of ``variables``.

    Parameters
    ----------
    variables : list of str
        The variables available.
    var_names : str or list of str
        Names to keep; a name starting with ``~`` is excluded instead (when every name is an
        exclusion, all other variables are kept), as in ArviZ.
    filter_vars : {None, "like", "regex"}, default None
        None: exact names; ``"like"``: names containing the text; ``"regex"``: names a
        regular expression matches (``re.search``).

    Returns
    -------
    list of str

    Examples
    --------
    >>> select_var_names(["mu", "tau", "theta", "theta_t"], ["~theta"])
    ['mu', 'tau', 'theta_t']
    >>> select_var_names(["mu", "tau", "theta", "theta_t"], "theta", filter_vars="like")
    ['theta', 'theta_t']
    """
    if filter_vars not in FILTERS:
        raise fail("filter_vars", repr(filter_vars), "None, 'like' or 'regex'")
    names = check_labels(var_names, "var_names")
    excluded = [n[1:] for n in names if n.startswith("~")]
    included = [n for n in names if not n.startswith("~")]
    keep = set(variables) if not included else set()
    for name in included:
        keep |= _matching(variables, name, filter_vars)
    for name in excluded:
        keep -= _matching(variables, name, filter_vars)
    chosen = [v for v in variables if v in keep]
    if not chosen:
        raise fail(
            "var_names",
            f"{names!r}, which leaves no variable",
            f"names among {', '.join(variables)}",
        )
    return chosen


def _matching(variables: list[str], name: str, filter_vars) -> set:
    if filter_vars is None:
        found = {name} & set(variables)
    elif filter_vars == "like":
        found = {v for v in variables if name in v}
    else:
        try:
            pattern = re.compile(name)
        except re.error as error:
            raise fail(
                "var_names",
                f"the invalid regular expression {name!r} ({error})",
                "a valid regular expression with filter_vars='regex'",
            ) from None
        found = {v for v in variables if pattern.search(v)}
    if not found:
        how = {None: "", "like": " (filter_vars='like')", "regex": " (filter_vars='regex')"}
        raise fail(
            "var_names",
            f"{name!r}, which matches no variable{how[filter_vars]}",
            f"names among {', '.join(variables)}",
        )
    return found
