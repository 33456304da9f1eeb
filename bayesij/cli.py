"""The ``bayesij`` command: ``bayesij demo``, ``bayesij audit FILES...`` and
``bayesij influence FILES...``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bayesij.data.posterior import Posterior

__all__ = ["main", "load_posterior"]


def load_posterior(files: list[str], log_lik: str | None, quantities) -> Posterior:
    """A container from CmdStan CSV files or one InferenceData netCDF file."""
    paths = [Path(f) for f in files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"FILES: found missing file(s) {missing}; expected existing files.")
    if len(paths) == 1 and paths[0].suffix in {".nc", ".netcdf", ".h5"}:
        import xarray as xr

        from bayesij.data.inference_data import from_inference_data

        # A netCDF file written by ArviZ 0.23 (InferenceData) or 1.x (DataTree): groups.
        try:
            tree = xr.open_datatree(paths[0])
        except (OSError, ValueError) as error:
            raise ValueError(
                f"FILES: found {paths[0].name!r}, which is not a readable netCDF file "
                f"({error}); expected an InferenceData / DataTree netCDF file."
            ) from None
        with tree:
            return from_inference_data(tree.load(), var_name=log_lik, quantities=quantities)
    if all(p.suffix == ".csv" for p in paths):
        from bayesij.adapters.cmdstan import from_cmdstanpy

        return from_cmdstanpy(
            [str(p) for p in paths], log_lik=log_lik or "log_lik", quantities=quantities
        )
    raise ValueError(
        f"FILES: found {[p.name for p in paths]}; expected CmdStan CSV files (.csv) or one "
        "InferenceData netCDF file (.nc)."
    )


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
    _print_audit(post, args.out)


def _print_audit(post: Posterior, out: str | None, **options) -> None:
    from bayesij.report.audit import audit

    if out:
        _check_out(out)  # before the whole audit runs
    result = audit(post, **options)
    print(result.to_markdown())
    if out:
        print(f"Report written to {result.to_html(out)}", file=sys.stderr)


def _check_out(out: str) -> None:
    path = Path(out)
    if path.is_dir():
        raise ValueError(f"--out: found the directory {out!r}; expected a file name.")
    if not path.parent.is_dir():
        raise ValueError(
            f"--out: found {out!r}, whose folder {str(path.parent)!r} does not exist; "
            "expected a file in an existing folder."
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


def _groups(value: str | None, post: Posterior):
    """--groups: a file of one label per observation (a line each, or a CSV's first
    column), or the name of a coordinate or variable of the netCDF file's data."""
    if value is None:
        return None
    path = Path(value)
    if path.is_file():
        import pandas as pd

        labels = pd.read_csv(path, header=None).iloc[:, 0].tolist()
        if len(labels) == post.n_obs + 1:  # a header line
            labels = labels[1:]
        return labels
    raise ValueError(
        f"--groups: found {value!r}, which is not a file; expected a file with one group "
        f"label per observation ({post.n_obs} lines)."
    )


def _posterior_of(args) -> Posterior:
    """The container named by the command line: CmdStan CSVs or a netCDF file (FILES), or
    R's CSV exports (--draws with --log-lik as the log-likelihood CSV)."""
    if args.draws is None:
        if not args.files:
            raise ValueError(
                "FILES: found none; expected CmdStan CSV files, one netCDF file, or --draws "
                "draws.csv --log-lik log_lik.csv."
            )
        if args.chains is not None:
            raise ValueError("--chains: found it without --draws; expected it with --draws.")
        return load_posterior(args.files, args.log_lik, args.quantity)
    if args.files:
        raise ValueError(
            f"FILES: found {args.files} together with --draws; expected one or the other."
        )
    if args.log_lik is None:
        raise ValueError("--log-lik: found none with --draws; expected log_lik.csv.")
    from bayesij.adapters.r_csv import from_csv

    return from_csv(args.draws, args.log_lik, chains=args.chains, quantities=args.quantity)


def _run_audit(args) -> None:
    post = _posterior_of(args)
    options = {"groups": _groups(args.groups, post), "alpha_max": args.alpha_max}
    if args.target:
        options["targets"] = tuple(args.target)
    _print_audit(post, args.out, **options)


def _run_influence(args) -> None:
    post = _posterior_of(args)
    from bayesij.report.text import influence_report

    print(influence_report(post, top=args.top))


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
    aud.add_argument("--out", default=None, help="write a self-contained HTML report here")
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
        metavar="FILE",
        help="file with the group label of each observation (one per line): groups become "
        "the exchangeable units",
    )
    aud.add_argument(
        "--alpha-max",
        type=float,
        default=0.1,
        help="largest share of units an influential set may hold (default 0.1)",
    )
    aud.set_defaults(run=_run_audit)
    infl = commands.add_parser(
        "influence", help="influence and IJ tables for CmdStan CSV files, netCDF or R's CSVs"
    )
    _add_input_arguments(infl)
    infl.add_argument("--top", type=_positive, default=5, help="units shown per quantity")
    infl.set_defaults(run=_run_influence)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except ValueError as error:
        print(f"bayesij: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
