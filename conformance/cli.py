"""``fx-conformance``: the command line. Exit codes: 0 clean, 1 a check failed, 2 usage error."""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

from .profiles import PROFILES

SUITE_DIR = pathlib.Path(__file__).resolve().parent / "suite"


def _run(args) -> int:
    # A fresh interpreter, so pytest sees (and assertion-rewrites) the suite before anything imports it.
    argv = [sys.executable, "-m", "pytest", str(SUITE_DIR), "-p", "no:cacheprovider",
            f"--hypothesis-profile={args.profile}", "--fx-summary", "-q", *args.pytest_args]
    code = subprocess.call(argv)
    return 0 if code == 0 else 1 if code == 1 else 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fx-conformance",
                                     description="Property-based conformance checks for PyTorch FX graph passes.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the conformance suite over the reference implementations")
    run.add_argument("--profile", choices=sorted(PROFILES), default="dev",
                     help="Hypothesis profile: dev (quick), ci (small, derandomized), nightly (large)")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra arguments passed to pytest")
    run.set_defaults(func=_run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one usage line
        return 2 if exc.code else 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
