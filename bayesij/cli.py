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
            return from_inference_data(tree.load(), log_lik=log_lik, quantities=quantities)
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
    post, data = fit_demo()
    print(
        f"Demo: linear regression of {data['N']} points; the last three "
        f"(ids {data['N'] - 2}..{data['N']}) are high-leverage points far out in x.\n"
    )
    _print_audit(post, args.out)


def _print_audit(post: Posterior, out: str | None) -> None:
    from bayesij.report.audit import audit

    result = audit(post)
    print(result.to_markdown())
    if out:
        print(f"Report written to {result.to_html(out)}", file=sys.stderr)


def _run_audit(args) -> None:
    _print_audit(load_posterior(args.files, args.log_lik, args.quantity), args.out)


def _run_influence(args) -> None:
    post = load_posterior(args.files, args.log_lik, args.quantity)
    from bayesij.report.text import influence_report

    print(influence_report(post, top=args.top))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesij", description="Audit Bayesian fits from their MCMC draws."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="fit a Stan regression with PyStan and audit it")
    demo.add_argument("--out", default=None, help="also write the audit as this HTML file")
    demo.set_defaults(run=_run_demo)
    aud = commands.add_parser(
        "audit",
        help="audit CmdStan CSV files or an InferenceData netCDF file: summary, tables, figures",
    )
    aud.add_argument("files", nargs="+", help="CmdStan CSV files or one InferenceData .nc")
    aud.add_argument(
        "--quantity",
        action="append",
        default=None,
        help="quantity (variable or element); repeat for several",
    )
    aud.add_argument("--log-lik", default=None, help="log-likelihood variable name")
    aud.add_argument("--out", default=None, help="write a self-contained HTML report here")
    aud.set_defaults(run=_run_audit)
    infl = commands.add_parser(
        "influence", help="influence and IJ tables for CmdStan CSV files or a netCDF file"
    )
    infl.add_argument("files", nargs="+", help="CmdStan CSV files or one InferenceData .nc")
    infl.add_argument("--log-lik", default=None, help="log-likelihood variable name")
    infl.add_argument(
        "--quantity",
        action="append",
        default=None,
        help="quantity (variable or element); repeat for several",
    )
    infl.add_argument("--top", type=int, default=5, help="units shown per quantity")
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
