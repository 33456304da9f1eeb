"""Stan's model header, precompiled once per environment for the suite's PyStan builds.

httpstan compiles each Stan program as one C++ file whose first line includes Stan's model
header, and parsing that header is half of a build: a one-parameter program builds in
20.9 s, and in 9.5 s with the header precompiled (GCC 12, one core). The suite builds 13
programs in every new environment, so it precompiles the header once (about 31 s and
0.8 GB, in a folder of httpstan's cache keyed by the compile command) and every build
includes it first (``-include`` in ``CFLAGS``, which the builds inherit).

Nothing here can change a build's result: GCC reads the precompiled header only where it
was made with the same options as the build, and otherwise parses the plain header, which
holds only the include the program's own first line repeats. A compiler that cannot make
the precompiled header leaves the suite's builds as they were (a file beside it says why).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sysconfig
import warnings
from pathlib import Path

#: Empty for a compile that is not C++ or cannot see Stan's headers (``CFLAGS`` reaches
#: every build the suite starts, not only PyStan's).
HEADER_TEXT = """\
#if defined(__cplusplus) && defined(__has_include)
#if __has_include(<stan/model/model_header.hpp>)
#include <stan/model/model_header.hpp>
#endif
#endif
"""
HEADER_NAME = "stan_model_header.hpp"


def add_header(environ) -> None:
    """Add to ``environ`` (os.environ: every build the suite starts inherits it) the flags
    bayesij's PyStan builds get where none are set
    (:func:`bayesij.refit.stan.default_build_flags`), and ``-include`` of the suite's Stan
    header in ``CFLAGS`` and ``CXXFLAGS``, in a folder keyed by the command that builds
    with those flags (:func:`compile_command`). Nothing more where they include it
    already, or where PyStan or its compiler settings cannot be found."""
    from bayesij.refit.stan import default_build_flags

    environ.update(default_build_flags(environ))
    if _split(environ["CFLAGS"])[1] is not None:
        return
    try:
        header = _header_path(environ["CFLAGS"], environ["CXXFLAGS"])
    except (ImportError, OSError, KeyError):
        return
    for name in ("CFLAGS", "CXXFLAGS"):
        environ[name] = f"{environ[name]} -include {shlex.quote(str(header))}"


def precompile(environ) -> Path | None:
    """Make the precompiled header of the header that ``environ``'s flags include
    (:func:`add_header`), once: under a lock (the workers that ask together wait for one
    build), written whole or not at all. The precompiled file, or None where the flags
    include no header or it could not be made (the compiler's reason beside it)."""
    cflags, header = _split(environ.get("CFLAGS", ""))
    if header is None:
        return None
    from filelock import FileLock

    output, failed = Path(f"{header}.gch"), Path(f"{header}.failed")
    with FileLock(f"{header}.lock"):
        if output.is_file():
            return output
        if failed.is_file():
            warnings.warn(
                f"Stan's header is not precompiled: {failed} says why (delete it to try again)",
                stacklevel=2,
            )
            return None
        partial = output.with_name(f"{output.name}.{os.getpid()}.partial")
        command = compile_command(cflags, _split(environ.get("CXXFLAGS", ""))[0])
        command += ["-x", "c++-header", str(header), "-o", str(partial)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            failed.write_text(f"{shlex.join(command)}\n{done.stderr[-4000:]}", encoding="utf-8")
            warnings.warn(
                f"Stan's header could not be precompiled: {failed} says why", stacklevel=2
            )
            return None
        os.replace(partial, output)
    return output


def compiler_is_gcc(environ) -> bool:
    """Whether the compiler of the builds that ``environ``'s flags are for is GCC (whose
    ``-H`` marks a precompiled header it read with ``!``)."""
    command = compile_command(*(_split(environ.get(n, ""))[0] for n in ("CFLAGS", "CXXFLAGS")))
    found = subprocess.run([command[0], "--version"], capture_output=True, text=True, check=False)
    return "Free Software Foundation" in found.stdout and "clang" not in found.stdout


def _split(flags: str) -> tuple[str, Path | None]:
    """``flags`` without the suite's ``-include``, and the header it includes (None)."""
    words = shlex.split(flags)
    for i, word in enumerate(words[:-1]):
        if word == "-include" and words[i + 1].endswith(HEADER_NAME):
            return shlex.join(words[:i] + words[i + 2 :]), Path(words[i + 1])
    return flags, None


def compile_command(cflags: str, cxxflags: str) -> list[str]:
    """The compiler command httpstan's build runs on a Stan program, but its file, model
    folder and output: setuptools' C++ compiler for this Python with these ``CFLAGS`` and
    ``CXXFLAGS``, httpstan's include folders, macros and arguments."""
    import httpstan
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    saved = {name: os.environ.get(name) for name in ("CFLAGS", "CXXFLAGS")}
    os.environ.update(CFLAGS=cflags, CXXFLAGS=cxxflags)
    try:
        customize_compiler(compiler)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    includes = [Path(httpstan.__file__).parent / "include", sysconfig.get_paths()["include"]]
    macros, arguments = _httpstan_settings()
    cxx = getattr(compiler, "compiler_so_cxx", None) or compiler.compiler_so
    return [*cxx, *(f"-I{folder}" for folder in includes), *macros, *arguments]


def _httpstan_settings() -> tuple[list[str], list[str]]:
    """The macros (as ``-D`` options) and compiler arguments that the installed httpstan's
    ``build_services_extension_module`` gives its builds (read from its source: they are
    local there, and change between versions: ``-std=c++14`` in 4.13, ``c++17`` in 4.17).
    KeyError where that source is not as expected."""
    import inspect

    import httpstan.models

    source = inspect.getsource(httpstan.models.build_services_extension_module)
    macros = re.search(r"stan_macros[^=]*=\s*\[(.*?)\n\s*\]", source, flags=re.S)
    arguments = re.search(r"extra_compile_args\s*=\s*\[(.*?)\]", source, flags=re.S)
    if macros is None or arguments is None:
        raise KeyError("httpstan's build settings")
    defined = [
        f"-D{name}" if value == "None" else f"-D{name}={value.strip(chr(34))}"
        for name, value in re.findall(r'\("(\w+)",\s*(None|"[^"]*")\)', macros.group(1))
    ]
    return defined, re.findall(r'"([^"]+)"', arguments.group(1))


def _header_path(cflags: str, cxxflags: str) -> Path:
    """The header's path (written if missing), in a folder of httpstan's cache named by
    a hash of the compile command (which names this environment's httpstan) and the
    compiler's version."""
    import httpstan.cache

    command = compile_command(cflags, cxxflags)
    version = subprocess.run(
        [command[0], "--version"], capture_output=True, text=True, check=False
    ).stdout
    key = hashlib.sha256("\0".join([*command, version]).encode()).hexdigest()
    folder = httpstan.cache.cache_directory() / "bayesij-tests-header" / key[:16]
    folder.mkdir(parents=True, exist_ok=True)
    header = folder / HEADER_NAME
    if not header.is_file() or header.read_text(encoding="utf-8") != HEADER_TEXT:
        partial = header.with_name(f"{header.name}.{os.getpid()}.partial")
        partial.write_text(HEADER_TEXT, encoding="utf-8")
        os.replace(partial, header)
    return header
