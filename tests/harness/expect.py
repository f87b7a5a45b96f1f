"""Assertions on ``kubectl`` runs: exact exit status, and nicguard's message as users see it."""

from __future__ import annotations

from tests.harness.objects import WEBHOOK
from tests.harness.state import Run


def shown(run: Run) -> str:
    return f"exit {run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"


def allowed(run: Run, *stdout: str) -> None:
    """Exit 0, no warning, and each of ``stdout`` printed."""
    assert run.returncode == 0, shown(run)
    assert "Warning:" not in run.stderr, shown(run)
    for fragment in stdout:
        assert fragment in run.stdout, shown(run)


def warned(run: Run, *warnings: str) -> None:
    """Exit 0 with each of ``warnings`` shown as kubectl's ``Warning: ...`` line."""
    assert run.returncode == 0, shown(run)
    lines = [line for line in run.stderr.splitlines() if line.startswith("Warning: ")]
    for warning in warnings:
        assert any(warning in line for line in lines), shown(run)


# The webhook of each code that is not about the Trainer objects (manifests/base/webhook.yaml).
_WEBHOOK_OF_CODE = {
    "NetworkInUse": "protect.nicguard.dev",
    "ParamSetInUse": "protect.nicguard.dev",
    "RecipeInUse": "recipe.nicguard.dev",
}


def denied(run: Run, subject: str, code: str, *fragments: str, webhook: str | None = None) -> str:
    """Exit 1 and stderr showing nicguard's denial of ``subject`` led by ``[code]`` (by the
    recipe webhook for a ConfigMap, the protect webhook for Networks and param sets, unless
    ``webhook`` names another).

    Returns nicguard's message (what follows the apiserver's prefix) for further checks.
    """
    assert run.returncode == 1, shown(run)
    assert "Error from server (Forbidden)" in run.stderr, shown(run)
    default = "recipe.nicguard.dev" if subject.startswith("ConfigMap/") else WEBHOOK
    webhook = webhook or _WEBHOOK_OF_CODE.get(code, default)
    prefix = f'admission webhook "{webhook}" denied the request: '
    lead = f"{prefix}{subject}: [{code}] "
    assert lead in run.stderr, f"expected {lead!r}\n{shown(run)}"
    message = run.stderr[run.stderr.index(lead) + len(prefix) :]
    for fragment in fragments:
        assert fragment in message, f"expected {fragment!r}\n{shown(run)}"
    return message
