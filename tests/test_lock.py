"""requirements.lock, what the image installs with ``pip install --require-hashes``, follows
pyproject.toml: every runtime dependency and the build backend present, pinned with ``==`` to a
version its specifier allows, each with hashes. After changing the dependencies: ``make lock``."""

from __future__ import annotations

import re
import tomllib
from typing import Final

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from scripts.lock import LOCK, PLATFORM, PYTHON_VERSION, REGENERATE, build_requirements
from tests.support.paths import ROOT

PYPROJECT: Final = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PIN: Final = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+) \\$")
HASH: Final = re.compile(r"^ +--hash=sha256:[0-9a-f]{64}(?: \\)?$")


def pins() -> dict[str, tuple[Version, int]]:
    """Each locked distribution (canonical name) -> (its version, how many hashes it has)."""
    found: dict[str, tuple[Version, int]] = {}
    name = ""
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if (pin := PIN.match(line)) is not None:
            name = canonicalize_name(pin["name"])
            assert name not in found, f"{name} locked twice"
            found[name] = (Version(pin["version"]), 0)
        elif HASH.match(line) and name:
            version, hashes = found[name]
            found[name] = (version, hashes + 1)
        else:
            pytest.fail(f"{LOCK.name}: neither a `name==version \\` pin nor a hash: {line!r}")
    return found


REQUIRED: Final = [
    *(Requirement(r) for r in PYPROJECT["project"]["dependencies"]),
    *(Requirement(r) for r in build_requirements()),
]


@pytest.mark.parametrize("requirement", REQUIRED, ids=str)
def test_every_requirement_is_locked_to_a_version_it_allows(requirement: Requirement) -> None:
    locked = pins()
    name = canonicalize_name(requirement.name)
    assert name in locked, f"{requirement} is not in {LOCK.name}: run `{REGENERATE}`"
    version, _ = locked[name]
    assert requirement.specifier.contains(version, prereleases=True), (
        f"{LOCK.name} pins {name}=={version}, outside {requirement}: run `{REGENERATE}`"
    )


def test_every_pin_has_hashes() -> None:
    """``pip install --require-hashes`` refuses a requirement without one."""
    unhashed = [name for name, (_, hashes) in pins().items() if hashes == 0]
    assert unhashed == []


def test_the_dockerfile_installs_the_lock_with_hashes_and_nothing_unlocked() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY requirements.lock ./" in dockerfile
    assert "pip install --require-hashes --no-deps --no-compile -r requirements.lock" in dockerfile
    # nicguard itself: no dependency resolved, no build backend fetched outside the lock.
    assert "pip install --no-deps --no-compile --no-build-isolation ." in dockerfile


def test_the_lock_is_for_the_interpreter_of_the_image() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    bases = re.findall(r"^FROM python:(\d+\.\d+)-slim", dockerfile, flags=re.MULTILINE)
    assert bases, "no python base image in the Dockerfile"
    assert set(bases) == {PYTHON_VERSION}
    assert PLATFORM.startswith("x86_64-manylinux")
