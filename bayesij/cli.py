"""The ``bayesij`` command: ``bayesij demo``, ``bayesij audit FILES...`` and
``bayesij influence FILES...``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["main", "load_fit"]


def load_fit(
    files: list[str], log_lik: str | None = None, argument: str = "FILES", lazy: bool = False
):
    """What FILES hold: one netCDF file as its DataTree (every group kept: the audit reads
    the model's structure and log prior from it), or CmdStan CSV files as a Posterior.
    ``argument`` names the option in errors (``--compare`` for a compared fit). ``lazy``:
    the netCDF file opened, not loaded, its log-likelihood in dask blocks of
    :data:`LAZY_BLOCK_BYTES` (CSV files are refused: they are read whole)."""
    paths = [Path(f) for f in files]
    folders = [str(p) for p in paths if p.is_dir()]
    if folders:
        raise ValueError(
            f"{argument}: found the folder(s) {folders}; expected files (CmdStan CSV files "
            "or one netCDF file), not the folder holding them."
        )
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"{argument}: found missing file(s) {missing}; expected existing files.")
    if _is_netcdf(files):
        return _open_netcdf(paths[0], argument, lazy=lazy)
    if lazy:
        raise _not_lazy([p.name for p in paths])
    if all(p.suffix == ".csv" for p in paths):
        from bayesij.adapters.cmdstan import from_cmdstanpy

        return from_cmdstanpy([str(p) for p in paths], log_lik=log_lik or "log_lik")
    raise ValueError(
        f"{argument}: found {[p.name for p in paths]}; expected CmdStan CSV files (.csv) or "
        "one InferenceData netCDF file (.nc)."
    )


#: The suffixes of a netCDF file.
NETCDF_SUFFIXES = (".nc", ".netcdf", ".h5")

#: The first bytes of a netCDF-3 (classic, 64-bit offset, 64-bit data) and an HDF5
#: (netCDF-4) file.
NETCDF_SIGNATURES = (b"CDF\x01", b"CDF\x02", b"CDF\x05", b"\x89HDF\r\n\x1a\n")


def _check_signature(path: Path, argument: str) -> None:
    """Refuse a file that is not netCDF before xarray tries its engines (whose error is a
    page of install advice)."""
    with open(path, "rb") as handle:
        start = handle.read(8)
    if not any(start.startswith(signature) for signature in NETCDF_SIGNATURES):
        raise ValueError(
            f"{argument}: found {path.name!r}, which is not a netCDF file (it does not start "
            "as netCDF or HDF5 files do); expected an InferenceData / DataTree netCDF file "
            "(idata.to_netcdf(path))."
        )


#: A netCDF file may declare at most this many times its size in data (MCMC draws barely
#: compress) once it declares more than ``DECLARED_FLOOR`` bytes.
DECLARED_RATIO, DECLARED_FLOOR = 100, 64 * 2**20


#: With ``--scheduler``, the log-likelihood is read in blocks of about this many bytes.
LAZY_BLOCK_BYTES = 64 * 2**20


def _open_netcdf(path: Path, argument: str, lazy: bool = False):
    """A netCDF file written by ArviZ 0.23 (InferenceData) or 1.x (DataTree), loaded after
    its declared size is checked against the file's (a tiny file declaring gigabytes is
    refused before anything is read into memory); ``lazy``: opened with its log-likelihood's
    units in dask blocks of :data:`LAZY_BLOCK_BYTES`, not loaded."""
    import xarray as xr

    _check_signature(path, argument)
    try:
        with xr.open_datatree(path) as tree:
            declared = sum(
                variable.nbytes
                for node in tree.subtree
                for variable in node.to_dataset().variables.values()
            )
            size = path.stat().st_size
            if declared > DECLARED_FLOOR and declared > DECLARED_RATIO * size:
                raise ValueError(
                    f"{argument}: found {path.name!r}, a {size / 2**10:.0f} KiB file declaring "
                    f"{declared / 2**30:.2f} GiB of data; expected a file whose arrays are "
                    f"at most {DECLARED_RATIO} times its size (a damaged or hostile file; "
                    "open a genuine one with xarray.open_datatree in Python)."
                )
            if not lazy:
                return tree.load()
            chunks = _unit_chunks(tree)
        return xr.open_datatree(path, chunks=chunks)
    except ValueError as error:
        if str(error).startswith(f"{argument}: found"):
            raise
        raise ValueError(
            f"{argument}: found {path.name!r}, which is not a readable netCDF file "
            f"({error}); expected an InferenceData / DataTree netCDF file."
        ) from None
    except OSError as error:
        raise ValueError(
            f"{argument}: found {path.name!r}, which is not a readable netCDF file "
            f"({error}); expected an InferenceData / DataTree netCDF file."
        ) from None


def _unit_chunks(tree) -> dict:
    """Dask chunks for the dims of a DataTree's log-likelihood other than chain and draw:
    blocks of about :data:`LAZY_BLOCK_BYTES` of units."""
    if "log_likelihood" not in tree.children:
        return {}
    group = tree["log_likelihood"].to_dataset()
    draws = int(group.sizes.get("chain", 1)) * int(group.sizes.get("draw", 1))
    size = max(1, LAZY_BLOCK_BYTES // (8 * max(1, draws)))
    return {dim: size for dim in group.dims if dim not in ("chain", "draw")}


#: How long ``--scheduler`` waits for the scheduler to answer.
SCHEDULER_TIMEOUT = "10s"


def _client(address: str):
    """A dask.distributed Client of the scheduler at ``address`` (``--scheduler``)."""
    try:
        import distributed
    except ImportError:
        raise ValueError(
            f"--scheduler: found {address!r} but dask.distributed is not installed; expected "
            "it installed (pip install 'bayesij[dask]')."
        ) from None
    try:
        return distributed.Client(address, timeout=SCHEDULER_TIMEOUT)
    except (OSError, TimeoutError) as error:
        raise ValueError(
            f"--scheduler: found no scheduler answering at {address!r} ({error}); expected "
            "the address of a running dask scheduler (tcp://host:8786)."
        ) from None


def _run_demo(args) -> None:
    from bayesij.demo import fit_demo

    print(
        "Fitting the demo regression with PyStan (the first run compiles the model, "
        "about a minute)...",
        file=sys.stderr,
    )
    post, data = fit_demo(progress=True)  # PyStan's progress goes to stderr
    print(
        f"Demo: linear regression of {data['N']} points; the last three "
        f"(ids {data['N'] - 2}..{data['N']}) are high-leverage points far out in x.\n"
    )
    result = _print_audit(post, args.out)
    _refit_what_is_undetermined(result, post, data)


def _refit_what_is_undetermined(result, post, data) -> None:
    """The demo's last step: the refits the verdict asks for, run (PyStan, the same model
    without the sets): the questions it leaves open, answered by refits in the loop."""
    from bayesij.demo import demo_backend
    from bayesij.refit.amip import amip
    from bayesij.report.summary import (
        first_order_only,
        headline_amip,
        open_questions,
        target_words,
    )

    searched = headline_amip(result)
    open_ = open_questions(searched) + first_order_only(searched)
    if not open_:
        return
    backend = demo_backend(data)
    print("## The refits the verdict asks for\n")
    for found in open_:
        looped = amip(post, found.quantity, found.target, backend=backend, max_refits=4)
        v = looped.verification
        words = target_words(found)
        if v is None:
            print(f"- To {words}: no refit was needed ({looped.answer}).")
            continue
        print(
            f"- To {words}, refits in the loop (PyStan, {len(looped.refits)}): "
            f"{looped.answer}; without {', '.join(map(str, looped.drop_ids)) or 'nothing'} "
            f"{found.quantity}'s {found.metric} goes from {found.original_value:.3g} to "
            f"{v['value']:.3g}: it does{'' if v['reached'] else ' not'} {words}."
        )
    print()


def _print_audit(fit, out: str | None, tables: str | None = None, **options):
    from bayesij.report.audit import audit

    if out:
        _check_out(out)  # before the whole audit runs
    result = audit(fit, **options)
    print(result.to_markdown())
    if out:
        print(f"Report written to {result.to_html(out)}", file=sys.stderr)
    if tables:
        print(f"Tables written to {result.to_csv(tables)}", file=sys.stderr)
    return result


def _check_tables(folder: str) -> None:
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--tables: found the file {folder!r}; expected a folder.")
    if not path.exists() and not path.parent.is_dir():
        raise ValueError(
            f"--tables: found {folder!r}, whose parent folder does not exist; expected a "
            "folder in an existing one."
        )


def _check_out(out: str) -> None:
    path = Path(out)
    if path.is_dir():
        raise ValueError(f"--out: found the directory {out!r}; expected a file name.")
    if not path.parent.is_dir():
        raise ValueError(
            f"--out: found {out!r}, whose folder {str(path.parent)!r} does not exist; "
            "expected a file in an existing folder."
        )
    writable = os.access(path, os.W_OK) if path.exists() else os.access(path.parent, os.W_OK)
    if not writable:
        raise ValueError(
            f"--out: found {out!r}, which cannot be written; expected a writable file."
        )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"found {text!r}; expected a whole number >= 1")
    return value


def _target(text: str):
    """A --target value: sign, significance, sign_and_significance or a change (float)."""
    if text in ("sign", "significance", "sign_and_significance"):
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"found {text!r}; expected sign, significance, sign_and_significance or a number"
        ) from None


def _groups(value: str | None, fit):
    """--groups: the name of a posterior dim, coordinate or constant_data variable of the
    netCDF file's fit; a file of one label per observation (a line each, or a CSV's first
    column); or FILE:COLUMN, a column of a CSV file with a header line."""
    if value is None:
        return None
    path, column = Path(value), ""
    if not path.is_file() and ":" in value:  # FILE:COLUMN, unless the whole is a file
        head, _, column = value.rpartition(":")
        path = Path(head or value)
    if path.is_file():
        import pandas as pd

        try:  # labels as written: '01' is not '1', 'NA' (North America) is a label
            frame = pd.read_csv(
                path, header=0 if column else None, dtype=str, keep_default_na=False
            )
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as error:
            raise ValueError(
                f"--groups: found {str(path)!r}, which is not a readable CSV file "
                f"({str(error).splitlines()[0]}); expected one label per observation."
            ) from None
        if column and column not in frame.columns:
            raise ValueError(
                f"--groups: found no column {column!r} in {path.name!r} (columns: "
                f"{list(frame.columns)}); expected FILE:COLUMN naming one of them."
            )
        labels = frame[column].tolist() if column else frame.iloc[:, 0].tolist()
        _check_label_lines(labels, path, fit.n_obs, header=bool(column))
        return labels
    if not fit.is_fit_object:
        raise ValueError(
            f"--groups: found {value!r}, which is not a file; expected a file with one group "
            f"label per observation ({fit.n_obs} lines) (a name needs a netCDF file)."
        )
    return value  # a name: audit() resolves it against the fit, or says what it could be


def _check_label_lines(labels: list, path: Path, n_obs: int, header: bool) -> None:
    """One non-empty label per observation: a file of N + 1 lines is not guessed to have a
    header (that would shift every observation into its neighbour's group if it had none)."""
    if len(labels) != n_obs:
        hint = "" if header else " (a file with a header line: --groups FILE:COLUMN)"
        raise ValueError(
            f"--groups: found {len(labels)} label(s) in {path.name!r} for {n_obs} "
            f"observations; expected one label per observation{hint}."
        )
    empty = [k for k, label in enumerate(labels) if not label.strip()]
    if empty:
        line = empty[0] + 1 + header
        raise ValueError(
            f"--groups: found {len(empty)} empty label(s) in {path.name!r} (first on line "
            f"{line}); expected a group label for every observation."
        )


def _fit_of(args):
    """The fit named by the command line, read once (:func:`bayesij.read`): a netCDF
    file's DataTree (--log-lik its log-likelihood variable), CmdStan CSVs or R's CSV exports
    (--draws with --log-lik as the log-likelihood CSV)."""
    from bayesij.data.fit import read

    lazy = getattr(args, "scheduler", None) is not None
    if args.draws is None and args.files and _is_netcdf(args.files):
        return read(load_fit(args.files, lazy=lazy), var_name=args.log_lik, argument="FILES")
    if lazy:
        raise _not_lazy(args.files or [args.draws])
    return read(_loaded(args), argument="FILES")


def _not_lazy(names: list) -> ValueError:
    """The refusal of ``--scheduler`` for input other than one netCDF file."""
    return ValueError(
        f"--scheduler: found {[Path(n).name for n in names]}; expected one netCDF file (read "
        "block by block on the cluster's workers; CSV files are read whole, here)."
    )


def _is_netcdf(files: list[str]) -> bool:
    return len(files) == 1 and Path(files[0]).suffix in NETCDF_SUFFIXES


def _loaded(args):
    """What the command line names, as loaded (a DataTree or a Posterior)."""
    if args.draws is None:
        if not args.files:
            raise ValueError(
                "FILES: found none; expected CmdStan CSV files, one netCDF file, or --draws "
                "draws.csv --log-lik log_lik.csv."
            )
        if args.chains is not None:
            raise ValueError("--chains: found it without --draws; expected it with --draws.")
        return load_fit(args.files, args.log_lik)
    if args.files:
        raise ValueError(
            f"FILES: found {args.files} together with --draws; expected one or the other."
        )
    if args.log_lik is None:
        raise ValueError("--log-lik: found none with --draws; expected log_lik.csv.")
    from bayesij.adapters.r_csv import from_csv

    return from_csv(args.draws, args.log_lik, chains=args.chains)


def _compare(values: list[str] | None) -> dict | None:
    """--compare [NAME=]FILE...: other fits of the same observations, by name."""
    if not values:
        return None
    fits = {}
    for value in values:
        name, _, path = value.partition("=") if "=" in value else (Path(value).stem, "", value)
        if not Path(path).is_file():
            what = "a folder" if Path(path).is_dir() else "not a file"
            raise ValueError(f"--compare: found {path!r}, {what}; expected a .nc file.")
        if name in fits or name == "audited":
            raise ValueError(
                f"--compare: found the name {name!r} twice (or 'audited'); expected "
                "distinct names (NAME=FILE)."
            )
        fits[name] = load_fit([path], argument="--compare")
    return fits


def _gradient_file(path: str):
    """--gradient FILE.npz: the log posterior's gradient and the unconstrained draws it was
    taken at (``numpy.savez(path, gradient=..., unconstrained=...)``), each (chains, draws,
    parameters)."""
    import numpy as np

    try:
        arrays = np.load(path, allow_pickle=False)
        if not hasattr(arrays, "files"):  # a .npy file: one array, no names
            raise ValueError(f"a single array of shape {arrays.shape}")
        with arrays:
            found = {name: arrays[name] for name in arrays.files}
    except OSError as error:
        if Path(path).is_file():
            raise ValueError(
                f"--gradient: found {path!r}, not a NumPy .npz file ({error}); expected "
                "numpy.savez(path, gradient=..., unconstrained=...)."
            ) from None
        raise
    except ValueError as error:
        raise ValueError(
            f"--gradient: found {path!r}, {error}; expected an .npz file of the arrays "
            "'gradient' and 'unconstrained' (numpy.savez)."
        ) from None
    if set(found) != {"gradient", "unconstrained"}:
        raise ValueError(
            f"--gradient: found the arrays {sorted(found)} in {path!r}; expected exactly "
            "'gradient' and 'unconstrained', each (chains, draws, parameters)."
        )
    gradient, unconstrained = found["gradient"], found["unconstrained"]
    if gradient.ndim != 3 or gradient.shape != unconstrained.shape:
        raise ValueError(
            f"--gradient: found 'gradient' of shape {gradient.shape} and 'unconstrained' of "
            f"shape {unconstrained.shape}; expected two arrays of one shape (chains, draws, "
            "parameters)."
        )
    return gradient, unconstrained


def _stan_data(path: str) -> dict:
    """--stan-data FILE.json: the data the fit was sampled with, as CmdStan reads it."""
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"--stan-data: found {path!r}, not JSON ({error}); expected the data as CmdStan "
            "reads it (a JSON object of names and values)."
        ) from None
    if not isinstance(data, dict):
        raise ValueError(
            f"--stan-data: found a JSON {type(data).__name__} in {path!r}; expected an "
            "object of names and values."
        )
    if "weights" not in data:
        raise ValueError(
            f"--stan-data: found no 'weights' in {path!r} ({sorted(data)}); expected the data "
            "of a weighted program: a vector 'weights' multiplying each observation's "
            "log-likelihood (all ones for the fit), as the shipped models take."
        )
    return data


def _model_options(args) -> dict:
    """The model behind the fit, as the audit takes it: --gradient (arrays) or --stan-model
    with --stan-data (PyStan: the gradient for control variates, and with --refits the
    refits in the loop)."""
    if args.stan_model is None:
        for option, value in (("--stan-data", args.stan_data), ("--refits", args.refits)):
            if value is not None:
                raise ValueError(
                    f"{option}: found it without --stan-model; expected --stan-model "
                    "PROGRAM.stan with --stan-data DATA.json."
                )
        if args.gradient is None:
            return {}
        return {"grad_log_posterior": _gradient_file(args.gradient)}
    if args.gradient is not None:
        raise ValueError(
            "--gradient: found it with --stan-model; expected one of them (the program "
            "gives the gradient)."
        )
    if args.stan_data is None:
        raise ValueError(
            "--stan-model: found it without --stan-data; expected the data JSON file the "
            "fit was sampled with."
        )
    from bayesij.refit.backends import PyStanBackend
    from bayesij.refit.stan_density import PyStanDensity

    data = _stan_data(args.stan_data)
    options: dict = {"grad_log_posterior": PyStanDensity(args.stan_model, data)}
    if args.refits:
        options["backend"] = PyStanBackend(args.stan_model, data)
        options["max_refits"] = args.refits
    return options


def _run_audit(args) -> None:
    if args.tables:
        _check_tables(args.tables)  # before the fit is read
    fit = _fit_of(args)
    options = {
        "groups": False if args.no_groups else _groups(args.groups, fit),
        "quantities": args.quantity,
        "var_names": args.var_names,
        "filter_vars": args.filter_vars,
        "compare_with": _compare(args.compare),
    }
    settings = {"alpha_max": args.alpha_max, "progress": args.progress}
    if args.log_prior is not None:
        options["log_prior"] = args.log_prior
    if args.target:
        settings["targets"] = tuple(args.target)
    if args.method is not None:
        settings["method"] = args.method
    options.update(_model_options(args))
    if "max_refits" in options:
        settings["max_refits"] = options.pop("max_refits")
    if args.scheduler is None:
        _print_audit(fit, args.out, args.tables, settings=settings, **options)
        return
    with _client(args.scheduler) as client:
        _print_audit(fit, args.out, args.tables, settings={**settings, "client": client}, **options)


def _run_influence(args) -> None:
    fit = _fit_of(args)
    from bayesij.report.text import influence_report

    print(influence_report(fit, top=args.top, quantities=args.quantity))


def _add_input_arguments(command: argparse.ArgumentParser) -> None:
    """Where the draws come from: FILES, or --draws with --log-lik; and what to keep."""
    command.add_argument(
        "files", nargs="*", help="CmdStan CSV files or one InferenceData / DataTree .nc"
    )
    command.add_argument(
        "--draws",
        default=None,
        metavar="CSV",
        help="draws exported from R (write.csv(as.matrix(fit)) or posterior's draws format); "
        "--log-lik is then the log-likelihood CSV (write.csv(log_lik(fit)))",
    )
    command.add_argument(
        "--chains", type=_positive, default=None, help="number of chains stacked in --draws"
    )
    command.add_argument(
        "--log-lik",
        default=None,
        help="log-likelihood variable name (netCDF, CmdStan) or, with --draws, its CSV file",
    )
    command.add_argument(
        "--quantity",
        action="append",
        default=None,
        help="quantity (variable or element); repeat for several",
    )


def build_parser() -> argparse.ArgumentParser:
    from bayesij import __version__

    parser = argparse.ArgumentParser(
        prog="bayesij", description="Audit Bayesian fits from their MCMC draws."
    )
    parser.add_argument("--version", action="version", version=f"bayesij {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="fit a Stan regression with PyStan and audit it")
    demo.add_argument("--out", default=None, help="also write the audit as this HTML file")
    demo.set_defaults(run=_run_demo)
    aud = commands.add_parser(
        "audit",
        help="audit CmdStan CSV files, a netCDF file or R's CSV exports: summary, tables, figures",
    )
    _add_input_arguments(aud)
    for add in (_add_report_arguments, _add_question_arguments, _add_model_arguments):
        add(aud)
    _add_run_arguments(aud)
    aud.set_defaults(run=_run_audit)
    infl = commands.add_parser(
        "influence", help="influence and IJ tables for CmdStan CSV files, netCDF or R's CSVs"
    )
    _add_input_arguments(infl)
    infl.add_argument("--top", type=_positive, default=5, help="units shown per quantity")
    infl.set_defaults(run=_run_influence)
    return parser


def _add_report_arguments(aud: argparse.ArgumentParser) -> None:
    """Where the audit is written: --out (HTML), --tables (CSV)."""
    aud.add_argument("--out", default=None, help="write a self-contained HTML report here")
    aud.add_argument(
        "--tables",
        default=None,
        metavar="FOLDER",
        help="also write every table as CSV with index.json (heading, summary, the tables' "
        "files): what R's bayesij_audit() reads back as data frames",
    )


def _add_question_arguments(aud: argparse.ArgumentParser) -> None:
    """What the audit asks: the AMIP targets, the unit, the quantities, the prior, the
    fits to compare with and the search."""
    aud.add_argument(
        "--target",
        action="append",
        type=_target,
        default=None,
        help="AMIP target: sign, significance, sign_and_significance or a change (a number); "
        "repeat for several (default: sign and significance)",
    )
    aud.add_argument(
        "--groups",
        default=None,
        metavar="NAME|FILE|FILE:COLUMN",
        help="the exchangeable unit: a posterior dim, coordinate or constant_data variable of "
        "the netCDF fit (default: read from it), a file of one label per observation, or a "
        "CSV column",
    )
    aud.add_argument(
        "--no-groups",
        action="store_true",
        help="the observations are the units, whatever grouping the fit has",
    )
    aud.add_argument(
        "--var-names",
        nargs="+",
        default=None,
        metavar="NAME",
        help="posterior variables to audit, as ArviZ reads them (~name excludes); default: "
        "the global ones (no dim over observations or groups)",
    )
    aud.add_argument(
        "--filter-vars",
        choices=("like", "regex"),
        default=None,
        help="how --var-names match (as ArviZ's filter_vars)",
    )
    aud.add_argument(
        "--log-prior",
        default=None,
        metavar="NAME",
        help="posterior variable holding the log prior at each draw, for power-scaling "
        "sensitivity (default: the netCDF file's log_prior group when it has one)",
    )
    aud.add_argument(
        "--compare",
        action="append",
        default=None,
        metavar="[NAME=]FILE",
        help="another fit of the same observations (.nc) to compare by PSIS-LOO with "
        "stacking weights; repeat for several",
    )
    aud.add_argument(
        "--alpha-max",
        type=float,
        default=0.1,
        help="largest share of units an influential set may hold (default 0.1)",
    )
    aud.add_argument(
        "--method",
        choices=("reweighted", "linear"),
        default=None,
        help="AMIP search: reweighted (default; PSIS-reweighted draws) or linear (sorted "
        "influence; best with a gradient)",
    )


def _add_model_arguments(aud: argparse.ArgumentParser) -> None:
    """The model behind the fit: its gradient (--gradient, or --stan-model with
    --stan-data) and refits in the loop (--refits)."""
    aud.add_argument(
        "--gradient",
        default=None,
        metavar="FILE.npz",
        help="the log posterior's gradient at each draw and the unconstrained draws "
        "(numpy.savez(FILE, gradient=..., unconstrained=...), each chains x draws x "
        "parameters), for the AMIP influences' control variates",
    )
    aud.add_argument(
        "--stan-model",
        default=None,
        metavar="PROGRAM",
        help="the weighted Stan program the fit was sampled from (a .stan file or a shipped "
        "model's name; a 'weights' vector multiplies each log_lik term): its gradient "
        "through PyStan for the control variates, and with --refits its refits",
    )
    aud.add_argument(
        "--stan-data", default=None, metavar="DATA.json", help="the data of --stan-model"
    )
    aud.add_argument(
        "--refits",
        type=_positive,
        default=None,
        metavar="N",
        help="answer every AMIP question by up to N refits of --stan-model in the loop",
    )


def _add_run_arguments(aud: argparse.ArgumentParser) -> None:
    """How the audit runs: on a dask scheduler, with progress lines."""
    aud.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the audit's pass on this dask.distributed scheduler (tcp://host:8786): the "
        "netCDF file is opened lazily and its log-likelihood read block by block by the "
        "workers (they must see the file's path); AMIP by the linear method",
    )
    aud.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="one line per stage on stderr while the audit works (default: in a terminal)",
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except (ValueError, OSError, MemoryError, ImportError) as error:
        if isinstance(error, ImportError) and not _unloadable_stan(error):
            raise  # a missing module is a bug or an install to fix: its traceback
        text = str(error) or type(error).__name__
        if isinstance(error, OSError) and not text.startswith(("store:", "--")):
            text = f"{error.strerror or type(error).__name__}: {error.filename or text}"
        print(f"bayesij: error: {text}", file=sys.stderr)
        return 2
    return 0


def _unloadable_stan(error: ImportError) -> bool:
    """Whether ``error`` is PyStan's build that this Python cannot load (said in one line,
    as bad input is: :class:`bayesij.refit.stan.UnloadableStanModel`)."""
    from bayesij.refit.stan import UnloadableStanModel

    return isinstance(error, UnloadableStanModel)


if __name__ == "__main__":
    sys.exit(main())
