"""The ``nicguard`` command line: ``check`` (offline), ``audit`` (every runtime's standing),
``doctor`` (the cluster and the installation) and ``serve`` (the webhook)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from app.commands.audit import OUTPUTS, audit_cluster, audit_state, failed, render, report_api
from app.commands.check import check_files, render_json, render_text
from app.config import (
    POLICY_OPTIONS,
    WEBHOOK_CONFIGURATION,
    Settings,
    SettingsError,
    add_options,
    add_serve_options,
    settings_from,
    webhook_configuration_of,
)
from app.domain.claims import DEFAULT_NAMESPACE
from app.files.state import StateFileError
from app.kube.credentials import ClientConfigError

EXIT_ALLOWED, EXIT_DENIED, EXIT_INPUT = 0, 1, 2

_CHECK_DESCRIPTION = (
    "Judge every ClusterTrainingRuntime, TrainingRuntime and TrainJob in the FILEs as a CREATE "
    "against a file-mode cluster state (--state: Networks, the recipe ConfigMap, runtimes). "
    "Exit status: 0 when every object is allowed (warnings included), 1 when any object is "
    "denied, 2 on a usage or input error (one line on stderr)."
)


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        del kwargs
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        del namespace, values, option_string
        print(f"{parser.prog} {version()}")  # noqa: T201
        parser.exit()


def version() -> str:
    """The version of the installed ``nicguard`` distribution (pyproject.toml's)."""
    from importlib.metadata import PackageNotFoundError, version as installed

    try:
        return installed("nicguard")
    except PackageNotFoundError:  # app/ run from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nicguard", description="Guard the GKE multi-NIC wiring of Kubeflow Trainer objects."
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check",
        help="judge files offline against a file-mode state",
        description=_CHECK_DESCRIPTION,
    )
    check.add_argument("--state", required=True, type=Path, help="file or directory of state")
    check.add_argument("--output", choices=("text", "json"), default="text")
    check.add_argument(
        "--namespace",
        type=_namespace,
        default=DEFAULT_NAMESPACE,
        help="the namespace of namespaced objects without metadata.namespace (default: default, "
        "as kubectl without a context)",
    )
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    add_options(check, POLICY_OPTIONS)
    audit = commands.add_parser(
        "audit",
        help="judge every ClusterTrainingRuntime and TrainingRuntime as a CREATE",
        description="Judge every ClusterTrainingRuntime and TrainingRuntime of the cluster "
        "(one LIST per resource; kubeconfig or in-cluster credentials) or of a file state. "
        "Exit 0 when none fails, 1 when any fails, 2 when the input or cluster cannot be read.",
    )
    _audit_options(audit)
    doctor = commands.add_parser(
        "doctor",
        help="read-only checks of the cluster and of nicguard installed on it",
        description="Check the cluster and nicguard installed on it, one line each "
        "(docs/doctor.md). Exit 0 when every check passes (! allowed), 1 when any fails, "
        "2 when the cluster cannot be read.",
    )
    doctor.add_argument(
        "--namespace",
        type=_namespace,
        default=DEFAULT_NAMESPACE,
        help="where the Pods of the doors check are dry-run created (default: default)",
    )
    doctor.add_argument("--output", choices=("text", "json"), default="text")
    add_options(doctor, (*POLICY_OPTIONS, WEBHOOK_CONFIGURATION))
    serve = commands.add_parser("serve", help="serve the admission webhook")
    add_serve_options(serve)
    add_options(serve, POLICY_OPTIONS)
    return parser


_OUTPUT_HELP = (
    "reports: the policy report objects as YAML for `kubectl apply -f -`, in the API the setting "
    "reports names, else (auto, off) the one the cluster serves: openreports.io/v1alpha1 in file "
    "mode or when it serves neither (off stops the server writing reports, not this printout)"
)


def _audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        type=Path,
        help="file or directory of cluster state (unset: the cluster of kubeconfig)",
    )
    parser.add_argument("--output", choices=OUTPUTS, default="text", help=_OUTPUT_HELP)
    parser.add_argument(
        "--namespace",
        type=_namespace,
        help="only the TrainingRuntimes (and workloads) of this namespace",
    )
    parser.add_argument(
        "--include-workloads",
        action="store_true",
        help="also judge every JobSet, Job and Pod whose pod templates carry the interfaces "
        "annotation (one LIST each; text and json output)",
    )
    add_options(parser, POLICY_OPTIONS)


def _namespace(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a namespace")
    return value.strip()


def _ignore(message: str) -> None:
    del message


def _note(message: str) -> None:
    _print(f"nicguard: {message}", sys.stderr)


def _print(text: str, stream: TextIO | None = None) -> None:
    """One line of output. A reader that has gone (``nicguard check ... | head -1``) ends the
    output quietly: the rest is dropped, the exit status stays the verdict's (docs/commands.md)."""
    stream = stream or sys.stdout
    try:
        print(text, file=stream)
        stream.flush()
    except BrokenPipeError:
        # Python flushes the stream again at exit: what is still buffered goes nowhere instead.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "audit" and args.include_workloads and args.output == "reports":
        # Policy reports hold runtimes' standings (docs/audit.md); a workload has none there.
        parser.error("--include-workloads prints text or json, not reports")
    try:
        settings = settings_from(args, os.environ)
        if args.command == "serve":
            return _serve(args, settings)
        # Notes (what is not judged) are informational: shown at log-level info and debug.
        note = _ignore if settings.log_level not in ("debug", "info") else _note
        if args.command == "audit":
            return _audit(args, settings, note)
        if args.command == "doctor":
            return _doctor(args, settings)
        results = check_files(args.state, args.files, settings, namespace=args.namespace, note=note)
    except (SettingsError, StateFileError, ClientConfigError) as error:
        return _input_error(error)
    _print(render_json(results) if args.output == "json" else render_text(results))
    return EXIT_ALLOWED if all(r.verdict.allowed for r in results) else EXIT_DENIED


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: `check` pays for neither the web stack, nor cryptography, nor the Kubernetes
    # client (their imports are most of its CPU per start).
    from app.certificates.pem import TLSConfigError
    from app.serve import serve

    try:
        return serve(args, settings, os.environ)
    except TLSConfigError as error:
        return _input_error(error)


def _audit(args: argparse.Namespace, settings: Settings, note: Callable[[str], None]) -> int:
    namespace, workloads = args.namespace, args.include_workloads
    if args.state is not None:
        results = audit_state(args.state, settings, namespace, note, workloads=workloads)
        api = report_api(settings.reports)
    else:
        # Imported here: only a live audit loads the Kubernetes API client (~0.5 s).
        from app.kube.listing import ClusterReadError

        try:
            discover = args.output == "reports"
            results, api = audit_cluster(
                settings, namespace, os.environ, discover=discover, workloads=workloads
            )
        except ClusterReadError as error:
            return _input_error(error)
    _print(render(args.output, results, api, namespace, int(time.time())))
    return EXIT_DENIED if failed(results) else EXIT_ALLOWED


def _doctor(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: only a live command loads the Kubernetes API client (~0.5 s).
    from app.commands.doctor import doctor, render
    from app.domain.doctor import exit_status
    from app.kube.listing import ClusterReadError

    configuration = webhook_configuration_of(args, os.environ)
    try:
        lines = doctor(settings, args.namespace, os.environ, configuration=configuration)
    except ClusterReadError as error:
        return _input_error(error)
    _print(render(args.output, lines))
    return exit_status(lines)


def _input_error(error: Exception) -> int:
    print(f"nicguard: {error}", file=sys.stderr)  # noqa: T201
    return EXIT_INPUT
