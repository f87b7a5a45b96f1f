"""A ``helm --post-renderer``: point every webhook of the chart at a URL (nicguard outside).

A bare apiserver has no cluster network to reach a Service, as in webhook.py; the caBundle is left
to the self-managed certificate controller. Run as ``python -m tests.harness.helm_url URL``.
"""

from __future__ import annotations

import sys

import yaml


def pointed_at(manifests: str, url: str) -> str:
    docs = [doc for doc in yaml.safe_load_all(manifests) if isinstance(doc, dict)]
    for doc in docs:
        if doc["kind"] == "ValidatingWebhookConfiguration":
            for hook in doc["webhooks"]:
                hook["clientConfig"] = {"url": url}
    return yaml.safe_dump_all(docs, sort_keys=False)


if __name__ == "__main__":
    (_, target) = sys.argv
    sys.stdout.write(pointed_at(sys.stdin.read(), target))
