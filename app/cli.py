"""The ``nicguard`` command line: ``check`` (offline) and ``serve`` (the webhook)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from app.certificates.pem import TLSConfigError
from app.check import check_files, render_json, render_text
from app.config import POLICY_OPTIONS, SettingsError, add_options, add_serve_options, settings_from
from app.kube.client import ClientConfigError
from app.statefiles import StateFileError

EXIT_ALLOWED, EXIT_DENIED, EXIT_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nicguard", description="Guard the GKE multi-NIC wiring of Kubeflow Trainer objects."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="judge files offline against a file-mode state")
    check.add_argument("--state", required=True, type=Path, help="file or directory of state")
    check.add_argument("--output", choices=("text", "json"), default="text")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    add_options(check, POLICY_OPTIONS)
    serve = commands.add_parser("serve", help="serve the admission webhook")
    add_serve_options(serve)
    add_options(serve, POLICY_OPTIONS)
    return parser


def _ignore(message: str) -> None:
    del message


def _note(message: str) -> None:
    print(f"nicguard: {message}", file=sys.stderr)  # noqa: T201


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from(args, os.environ)
        if args.command == "serve":
            # Imported here: `check` should not pay ~1 s for the web stack and Kubernetes client.
            from app.serve import serve

            return serve(args, settings, os.environ)
        # Notes (objects not judged) are informational: shown at log-level info and debug.
        quiet = settings.log_level not in ("debug", "info")
        results = check_files(args.state, args.files, settings, note=_ignore if quiet else _note)
    except (SettingsError, StateFileError, TLSConfigError, ClientConfigError) as error:
        print(f"nicguard: {error}", file=sys.stderr)  # noqa: T201
        return EXIT_INPUT
    print(render_json(results) if args.output == "json" else render_text(results))  # noqa: T201
    return EXIT_ALLOWED if all(r.verdict.allowed for r in results) else EXIT_DENIED
