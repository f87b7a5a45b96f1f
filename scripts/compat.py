"""``make compat``: the e2e and chain tiers on every Kubernetes minor nicguard supports, and the
chain tier on every Trainer release it supports; a summary of each run; exit 1 if any failed.

A run (a leg) is one tier on one kube-apiserver (each minor's newest patch the Go module proxy
serves), with one Trainer release for the chain tier. Binaries come from the versioned caches
(``scripts/k8s-bins.sh`` by ``NICGUARD_K8S_VERSION``, ``scripts/chain-bins.sh`` by
``NICGUARD_TRAINER_VERSION``), built once when missing. 1.33 is the newest minor without
``resource.k8s.io/v1``: its leg shows what nicguard does there (docs/compatibility.md).

Choose legs with space-separated lists: ``COMPAT_K8S`` (versions), ``COMPAT_TIERS`` (e2e chain),
``COMPAT_TRAINERS`` (the chain tier's Trainer releases). JUnit reports and logs go to
``build/compat/``. Run from the repository root (``make compat``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
OUT: Final = ROOT / "build" / "compat"
# Each supported minor's newest patch on the Go module proxy, then the newest minor without
# resource.k8s.io/v1 (GKE's Extended channel still offers it).
K8S_VERSIONS: Final = ("v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2", "v1.33.13")
TRAINER_VERSIONS: Final = ("v2.3.0", "v2.2.1")  # each Trainer minor with runtimePatches
TIERS: Final = ("e2e", "chain")
CHAIN_COMPONENTS: Final = ("trainer", "jobset", "kueue")


@dataclass(frozen=True, slots=True)
class Leg:
    k8s: str
    tier: str
    trainer: str  # "" for the e2e tier (its planes serve every Trainer's CRDs)

    @property
    def name(self) -> str:
        return "-".join(part for part in (self.k8s, self.tier, self.trainer) if part)


@dataclass(frozen=True, slots=True)
class Result:
    leg: Leg
    passed: int
    failed: int
    errors: int
    skipped: int
    seconds: float
    status: int  # pytest's exit status (or the binaries script's)

    @property
    def ok(self) -> bool:
        clean = self.failed == self.errors == self.skipped == 0
        return self.status == 0 and clean and self.passed > 0


def say(line: str) -> None:
    print(line, flush=True)  # noqa: T201 - the progress and the summary are the product


def chosen(variable: str, default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(os.environ.get(variable, "").split()) or default


def legs() -> list[Leg]:
    tiers = chosen("COMPAT_TIERS", TIERS)
    unknown = set(tiers) - set(TIERS)
    if unknown:
        sys.exit(f"compat: unknown tier {' '.join(sorted(unknown))} (known: {' '.join(TIERS)})")
    found = []
    for k8s in chosen("COMPAT_K8S", K8S_VERSIONS):
        if "e2e" in tiers:
            found.append(Leg(k8s, "e2e", ""))
        if "chain" in tiers:
            found += [Leg(k8s, "chain", t) for t in chosen("COMPAT_TRAINERS", TRAINER_VERSIONS)]
    return found


def binaries(script: str, env: dict[str, str], *args: str) -> str:
    """The one line a ``scripts/*-bins.sh`` prints (it builds once when the cache lacks it)."""
    run = subprocess.run(  # noqa: S603 - our own script
        [str(ROOT / "scripts" / script), *args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(args)} failed ({run.returncode})")
    return run.stdout.strip()


def counts(report: Path) -> tuple[int, int, int, int]:
    """(passed, failed, errors, skipped) of a JUnit report; zeros when it is absent."""
    if not report.exists():
        return 0, 0, 0, 0
    suite = ET.parse(report).getroot()  # noqa: S314 - pytest's own report, written just now
    if suite.tag == "testsuites":
        suite = suite[0]
    tests, failed, errors, skipped = (
        int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")
    )
    return tests - failed - errors - skipped, failed, errors, skipped


def run(leg: Leg) -> Result:
    env = dict(os.environ, NICGUARD_K8S_VERSION=leg.k8s)
    started = time.monotonic()
    try:
        env["NICGUARD_K8S_BIN_DIR"] = binaries("k8s-bins.sh", env)
        env["NICGUARD_HELM"] = binaries("helm-bin.sh", env)
        if leg.tier == "chain":
            env["NICGUARD_TRAINER_VERSION"] = leg.trainer
            env["NICGUARD_CHAIN_DIR"] = binaries("chain-bins.sh", env, *CHAIN_COMPONENTS)
    except RuntimeError as error:
        say(f"compat: {leg.name}: {error}")
        return Result(leg, 0, 0, 0, 0, time.monotonic() - started, 2)
    report = OUT / f"{leg.name}.xml"
    report.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", "-m", leg.tier, f"tests/{leg.tier}", "-q"]
    argv += ["-p", "no:cacheprovider", f"--junitxml={report}", "-o", "junit_family=legacy"]
    say(f"compat: {leg.name}: {' '.join(argv[1:])}")
    with (OUT / f"{leg.name}.log").open("w") as log:
        status = subprocess.run(  # noqa: S603 - this interpreter's pytest
            argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False
        )
    passed, failed, errors, skipped = counts(report)
    result = Result(
        leg, passed, failed, errors, skipped, time.monotonic() - started, status.returncode
    )
    say(f"compat: {leg.name}: {summary_line(result)}")
    return result


def summary_line(result: Result) -> str:
    return (
        f"{result.passed} passed, {result.failed} failed, {result.errors} errors, "
        f"{result.skipped} skipped in {result.seconds / 60:.1f} min "
        f"({'ok' if result.ok else f'FAILED, exit {result.status}'})"
    )


def table(results: list[Result]) -> str:
    rows = [("Kubernetes", "tier", "Trainer", "passed", "failed", "errors", "skipped", "min", "")]
    for r in results:
        rows.append(
            (
                r.leg.k8s,
                r.leg.tier,
                r.leg.trainer or "-",
                str(r.passed),
                str(r.failed),
                str(r.errors),
                str(r.skipped),
                f"{r.seconds / 60:.1f}",
                "ok" if r.ok else "FAILED",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    results = [run(leg) for leg in legs()]
    say(f"\ncompat: summary (reports and logs in {OUT.relative_to(ROOT)}/)")
    say(table(results))
    failed = [r.leg.name for r in results if not r.ok]
    if failed:
        say(f"compat: FAILED: {' '.join(failed)}")
        return 1
    say(f"compat: all {len(results)} runs passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
