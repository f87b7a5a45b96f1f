"""Composition root for ``nicguard serve`` (placeholder until the server lands)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from app.settings import Settings


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state")


def serve(args: argparse.Namespace, settings: Settings, environ: Mapping[str, str]) -> int:
    raise NotImplementedError
