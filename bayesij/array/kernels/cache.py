"""Whether the kernels may use numba's on-disk cache, decided once per process.

numba caches compiled kernels in a folder (``NUMBA_CACHE_DIR``, else ``__pycache__`` beside
the source when it is writable, else the user's cache folder) and reads them back with
``pickle``: a folder another user may write would let them run code as this one, a damaged
index file breaks every kernel until deleted, and a read-only install without a writable
home has no folder at all. So the cache is used only when its folder is there (or can be
made), writable and private (owned by this user, not writable by others); its damaged index
files are removed. Otherwise the kernels compile in memory in each process, with one warning
saying why.
"""

from __future__ import annotations

import inspect
import os
import pickle
import warnings
from typing import Any

__all__ = ["CACHE", "KernelCacheWarning", "cache_folder", "kernel_modules"]


class KernelCacheWarning(UserWarning):
    """numba's cache cannot be used safely: the kernels compile in memory in this process."""


def _probe(x):  # a function of this package, to ask numba where its cache would be
    return x


def cache_folder() -> tuple[str | None, str]:
    """numba's cache folder for this package's kernels and, if it cannot be used, why."""
    from numba.core import caching

    source = inspect.getfile(_probe)
    locator_classes: list[Any] = list(caching.CacheImpl._locator_classes)
    for locator_class in locator_classes:
        try:
            locator = locator_class.from_function(_probe, source)
        except Exception:  # a locator that cannot work here (no home, no IPython)
            continue
        if locator is None:
            continue
        path = locator.get_cache_path()
        try:
            locator.ensure_cache_path()
        except OSError as error:
            return path, f"it cannot be written ({error.strerror or error})"
        return path, _not_private(path)
    return None, "numba finds no writable folder for it (no writable home or source folder)"


def _not_private(path: str) -> str:
    if not hasattr(os, "getuid"):
        return ""
    for folder in (path, os.path.dirname(path)):
        info = os.stat(folder)
        if info.st_uid != os.getuid() and folder == path:
            return f"{folder!r} belongs to another user"
        if info.st_mode & 0o002 and not info.st_mode & 0o1000:
            return f"{folder!r} may be written by any user (mode {oct(info.st_mode & 0o7777)})"
        if info.st_mode & 0o020 and info.st_uid == os.getuid() and folder == path:
            return f"{folder!r} may be written by its group (mode {oct(info.st_mode & 0o777)})"
    return ""


def kernel_modules() -> list[str]:
    """The modules of this folder whose functions numba compiles and caches (every module
    but this one, ``first_use`` and the package's ``__init__``): the prefixes of their
    cache files."""
    folder = os.path.dirname(os.path.abspath(__file__))
    names = (name[:-3] for name in os.listdir(folder) if name.endswith(".py"))
    return sorted(set(names) - {"__init__", "cache", "first_use"})


def _remove_damaged(path: str) -> list[str]:
    """Delete index files of this package's kernels that do not unpickle (private folder)."""
    removed = []
    prefixes = tuple(f"{name}." for name in kernel_modules())
    for name in os.listdir(path):
        if not (name.endswith(".nbi") and name.startswith(prefixes)):
            continue
        file = os.path.join(path, name)
        try:
            with open(file, "rb") as handle:
                pickle.load(handle)
                pickle.loads(handle.read())
        except Exception:
            try:
                os.remove(file)
                removed.append(name)
            except OSError:
                pass
    return removed


def _decide() -> bool:
    path, problem = cache_folder()
    if problem:
        warnings.warn(
            f"bayesij: numba's cache folder {path!r} is not used: {problem}; the kernels are "
            "compiled in memory in this process (about 40 s for an audit). Set "
            "NUMBA_CACHE_DIR to a private folder of yours to keep them between runs.",
            KernelCacheWarning,
            stacklevel=2,
        )
        return False
    assert path is not None
    removed = _remove_damaged(path)
    if removed:
        warnings.warn(
            f"bayesij: removed {len(removed)} damaged file(s) from numba's cache {path!r} "
            f"({', '.join(removed[:3])}); those kernels compile again.",
            KernelCacheWarning,
            stacklevel=2,
        )
    return True


#: Whether the kernels use numba's on-disk cache in this process.
CACHE = _decide()
