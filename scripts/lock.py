"""Write requirements.lock: what the image installs, every version pinned, every file hashed.

The runtime dependencies of pyproject.toml and its build backend (``build-system.requires``: the
Dockerfile builds nicguard without build isolation, so setuptools comes from the lock too), resolved
for the image's interpreter (CPython 3.13, Linux x86_64, glibc) with ``uv pip compile``. The
Dockerfile installs it with ``pip install --require-hashes``; tests/test_lock.py fails when
pyproject.toml changes and the lock does not follow. Run from the repository root: ``make lock``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
LOCK: Final = ROOT / "requirements.lock"
PYTHON_VERSION: Final = "3.13"
PLATFORM: Final = "x86_64-manylinux_2_28"  # python:3.13-slim-bookworm: glibc 2.36, amd64
REGENERATE: Final = "make lock"


def build_requirements() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [str(r) for r in pyproject["build-system"]["requires"]]


def uv() -> str:
    """uv from the venv of this interpreter (a pinned dev dependency), else from PATH."""
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which("uv")
    if found is None:
        sys.exit("lock: no uv: pip install -e '.[dev]' (make does)")
    return found


def main() -> int:
    argv = [uv(), "pip", "compile", "pyproject.toml", "-", "--generate-hashes", "--quiet"]
    argv += [f"--python-version={PYTHON_VERSION}", f"--python-platform={PLATFORM}"]
    argv += [f"--custom-compile-command={REGENERATE}", f"--output-file={LOCK.name}"]
    stdin = "".join(f"{requirement}\n" for requirement in build_requirements())
    run = subprocess.run(argv, cwd=ROOT, input=stdin, text=True, check=False)  # noqa: S603 - fixed argv
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
