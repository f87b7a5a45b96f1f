"""docs/ against the code, so the reference operators read cannot drift from what nicguard does.

docs/rules.md: one ``## <Code>`` section per ``Code`` member. Each ```yaml block is followed by a
```console block whose first line is the ``nicguard check`` command that judges it (state and
flags included) and whose rest is the output: the test runs that command through
``app.commands.check.check_files`` and compares the output exactly (verdict, messages, field paths),
and requires the section's code among the violations (or among the waived ones, for the
warning variants). Blocks marked ```yaml live-only <view> cannot run in file mode: they are judged
against the examples/cluster state with one part made unavailable (<view>), and the ```text line
after them is the message with ``<reason>`` standing for the cache's reason. The AdmissionReview
response and the kubectl line of "How a denial looks" are rebuilt with app.web.response.

docs/configuration.md: every setting of app/config.py and app/config.py has a table row
with its flag, variable, default and the commands that honour it (read from the parser); every
quoted bad value produces the quoted error line.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

import pytest
import yaml

from app.cli import build_parser
from app.commands.check import check_files, render_text
from app.config import (
    POLICY_OPTIONS,
    SERVE_OPTIONS,
    Option,
    SettingsError,
    serve_options,
    settings_from,
)
from app.documents import load_yaml
from app.domain.cluster import (
    PARAM_SETS_SKIPPED,
    ClusterSnapshot,
    Networks,
    Unverifiable,
    snapshot_of,
)
from app.domain.evaluate import evaluate
from app.domain.kinds import Protected, trainer_kind
from app.domain.review import Operation, Review
from app.domain.verdict import Code, Verdict
from app.files.state import iter_objects
from app.web.request import request_from_body
from app.web.response import review_response
from tests.support.paths import ROOT

RULES: Final = ROOT / "docs" / "rules.md"
CONFIGURATION: Final = ROOT / "docs" / "configuration.md"
INTRO: Final = "How a denial looks"
LIVE_STATE: Final = "examples/cluster"
REASON: Final = "networks cache not synced: initial list pending"
WEBHOOK: Final = "validate.nicguard.dev"


@dataclass(frozen=True)
class Block:
    """A fenced block: its info string (``yaml``, ``console``...), body and opening line."""

    info: str
    body: str
    line: int


@dataclass(frozen=True)
class Section:
    """A ``## `` section of a page: its title, prose and fenced blocks."""

    title: str
    prose: str
    blocks: tuple[Block, ...]

    @property
    def is_code(self) -> bool:
        """Code sections are titled with one CamelCase word; the others with several words."""
        return bool(self.title) and " " not in self.title


def sections(path: Path) -> list[Section]:
    """Split a Markdown page at ``## `` headings outside fenced blocks."""
    found: list[Section] = []
    title = ""
    prose: list[str] = []
    blocks: list[Block] = []
    fence: tuple[str, int, list[str]] | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if fence is not None:
            if line.startswith("```"):
                blocks.append(Block(fence[0], "".join(f"{x}\n" for x in fence[2]), fence[1]))
                fence = None
            else:
                fence[2].append(line)
        elif line.startswith("```"):
            fence = (line[3:].strip(), number, [])
        elif line.startswith("## "):
            found.append(Section(title, "\n".join(prose), tuple(blocks)))
            title, prose, blocks = line[3:].strip(), [], []
        else:
            prose.append(line)
    assert fence is None, f"{path}: unclosed fenced block"
    found.append(Section(title, "\n".join(prose), tuple(blocks)))
    return found


RULE_SECTIONS: Final = sections(RULES)


def section(title: str) -> Section:
    (found,) = (s for s in RULE_SECTIONS if s.title == title)
    return found


# --- (a) one section per code -------------------------------------------------------------


def test_every_code_has_exactly_one_section() -> None:
    titles = Counter(s.title for s in RULE_SECTIONS if s.is_code)
    assert {code.value: titles[code.value] for code in Code} == {code.value: 1 for code in Code}
    unknown = set(titles) - {code.value for code in Code}
    assert not unknown, f"sections for codes nicguard does not have: {sorted(unknown)}"


def test_every_code_section_says_when_shows_and_fixes() -> None:
    for found in (s for s in RULE_SECTIONS if s.is_code):
        assert "**When it fires.**" in found.prose, found.title
        assert "**How to fix it.**" in found.prose or "**What to do.**" in found.prose, found.title
        assert any(b.info.split()[:1] == ["yaml"] for b in found.blocks), found.title


def slug(title: str) -> str:
    """GitHub's heading anchor: link text kept, lowercase, punctuation but - and _ dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


MARKDOWN: Final = tuple(
    sorted(
        {
            *ROOT.glob("*.md"),
            *(ROOT / "docs").rglob("*.md"),
            *(ROOT / "manifests").rglob("*.md"),
            *(ROOT / "charts").rglob("*.md"),
            *(ROOT / "certs").rglob("*.md"),
        }
    )
)
LINK: Final = re.compile(r"\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN: Final = re.compile(r"``.*?``|`[^`]*`")


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """The numbered lines of a Markdown page outside fenced blocks (indented fences included)."""
    found = []
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            found.append((number, line))
    return found


def anchors_of(path: Path) -> set[str]:
    """Every heading's anchor, repeats numbered ``-1``, ``-2`` as GitHub numbers them."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose_lines(path):
        if heading := re.match(r"#{1,6} (.+)", line):
            anchor = slug(heading[1])
            found.add(f"{anchor}-{seen[anchor]}" if seen[anchor] else anchor)
            seen[anchor] += 1
    return found


def test_the_slug_is_githubs() -> None:
    assert slug("Policies that turn a denial into a warning") == (
        "policies-that-turn-a-denial-into-a-warning"
    )
    assert slug("The workload doors: JobSets, Jobs and Pods") == (
        "the-workload-doors-jobsets-jobs-and-pods"
    )
    assert slug("`snapshot_json` and [more](x.md)") == "snapshot_json-and-more"


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for number, line in prose_lines(page):
        for link in LINK.finditer(CODE_SPAN.sub("", line)):
            target = link["target"]
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto: are not files of the repository
            path, _, anchor = target.partition("#")
            resolved = (page.parent / unquote(path)).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{number}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved):
                broken.append(f"{number}: {target} (no such heading)")
    assert broken == []


def test_links_into_the_rules_page_resolve() -> None:
    anchors = {slug(s.title) for s in RULE_SECTIONS if s.title}
    rules_text = RULES.read_text(encoding="utf-8")
    config_text = CONFIGURATION.read_text(encoding="utf-8")
    links = re.findall(r"\]\(#([^)]+)\)", rules_text) + re.findall(
        r"\]\(rules\.md#([^)]+)\)", config_text
    )
    assert links
    assert sorted(set(links) - anchors) == []


# --- (b), (c) every example is judged as documented ----------------------------------------


@dataclass(frozen=True)
class Example:
    """A yaml block and the ``nicguard check`` run (or live message) documented after it."""

    title: str
    source: Block
    result: Block

    @property
    def live_view(self) -> str | None:
        words = self.source.info.split()
        return words[2] if words[1:2] == ["live-only"] else None


def examples() -> list[Example]:
    found = []
    for page_section in RULE_SECTIONS:
        blocks = page_section.blocks
        for position, block in enumerate(blocks):
            if block.info.split()[:1] != ["yaml"]:
                continue
            assert position + 1 < len(blocks), f"rules.md:{block.line}: no output after it"
            found.append(Example(page_section.title, block, blocks[position + 1]))
    return found


EXAMPLES: Final = examples()
RUNNABLE: Final = [e for e in EXAMPLES if e.live_view is None]
LIVE: Final = [e for e in EXAMPLES if e.live_view is not None]


def example_id(example: Example) -> str:
    return f"{example.title}@{example.source.line}"


@dataclass(frozen=True)
class CheckRun:
    """A documented ``nicguard check`` command, parsed."""

    args: argparse.Namespace
    environ: dict[str, str]


def parse_command(line: str) -> tuple[list[str], dict[str, str]]:
    """``[VAR=value ...] nicguard ARGS`` as the arguments after ``nicguard`` and the variables."""
    assert line.startswith("$ "), line
    words = shlex.split(line[2:])
    environ = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        environ[name] = value
    assert words[:1] == ["nicguard"], line
    return words[1:], environ


def documented_check(example: Example, tmp_path: Path) -> tuple[CheckRun, str]:
    """The check command of an example, with its file written to ``tmp_path``; and its output."""
    assert example.result.info == "console", f"rules.md:{example.result.line}: not a console"
    command, _, output = example.result.body.partition("\n")
    argv, environ = parse_command(command)
    assert argv[:1] == ["check"], command
    target = tmp_path / argv[-1]
    target.write_text(example.source.body, encoding="utf-8")
    args = build_parser().parse_args([*argv[:-1], str(target)])
    return CheckRun(args, environ), output


def judged(run: CheckRun) -> tuple[str, list[Verdict]]:
    settings = settings_from(run.args, run.environ)
    notes: list[str] = []
    results = check_files(ROOT / run.args.state, run.args.files, settings, note=notes.append)
    # A state without GKENetworkParamSets says so on stderr (the page says where it applies).
    assert [note for note in notes if note != PARAM_SETS_SKIPPED] == [], notes
    return render_text(results), [r.verdict for r in results]


@pytest.mark.parametrize("example", RUNNABLE, ids=example_id)
def test_example_yields_its_code_and_the_documented_output(
    example: Example, tmp_path: Path
) -> None:
    run, documented = documented_check(example, tmp_path)
    output, verdicts = judged(run)
    assert output == documented.rstrip("\n")
    if example.title == INTRO:
        assert not any(v.allowed for v in verdicts)
        return
    codes = {v.code.value for verdict in verdicts for v in (*verdict.violations, *verdict.waived)}
    # A warning that carries a code leads with it (e.g. an unbound copy of the recipe's runtime).
    codes |= {w[1:].partition("]")[0] for v in verdicts for w in v.warnings if w.startswith("[")}
    assert example.title in codes


def live_view(name: str) -> ClusterSnapshot:
    """The examples/cluster state with one part made unavailable, as a live cluster can be."""
    snapshot = snapshot_of(
        (o.obj for o in iter_objects([ROOT / LIVE_STATE])),
        recipe_name=settings_from(argparse.Namespace(), {}).recipe_configmap,
        load_yaml=load_yaml,
    )
    views = {
        "state": snapshot,
        "networks-not-served": replace(snapshot, network_state=Networks({}, served=False)),
        "networks-unsynced": replace(snapshot, network_state=Unverifiable(REASON)),
        "recipe-unsynced": replace(snapshot, recipe_state=Unverifiable(REASON)),
        "runtimes-unsynced": replace(snapshot, runtime_state=Unverifiable(REASON)),
    }
    return views[name]


def live_review(example: Example) -> tuple[Review, str]:
    """The request a live-only block stands for, and the view it is judged against.

    ``request`` blocks describe a request that is not an object to check: a DELETE of what the
    wiring depends on (``operation``, ``kind``, ``name``, ``namespace``), judged on the state.
    """
    assert example.live_view is not None
    body = yaml.safe_load(example.source.body)
    if example.live_view == "request":
        review = Review(
            operation=Operation(body["operation"]),
            kind=Protected(body["kind"]),
            namespace=body.get("namespace", ""),
            name=body["name"],
        )
        return review, "state"
    kind = trainer_kind(body)
    assert kind is not None
    namespace = body["metadata"].get("namespace", "") if kind.namespaced else ""
    return Review(operation=Operation.CREATE, kind=kind, namespace=namespace, obj=body), (
        example.live_view
    )


@pytest.mark.parametrize("example", LIVE, ids=example_id)
def test_live_only_example_yields_its_code_and_the_documented_message(example: Example) -> None:
    review, view = live_review(example)
    settings = settings_from(argparse.Namespace(), {})
    verdict = evaluate(review, live_view(view), settings.policy)
    assert {v.code.value for v in verdict.violations} == {example.title}
    assert verdict.undecided is (example.title == Code.CLUSTER_STATE_UNAVAILABLE)
    assert example.result.info == "text", f"rules.md:{example.result.line}: not a text block"
    documented = example.result.body.strip().replace("<reason>", REASON)
    assert documented in [v.render() for v in verdict.violations]


def test_sections_without_a_runnable_example_are_the_live_only_codes() -> None:
    runnable = {e.title for e in RUNNABLE}
    live = {e.title for e in LIVE}
    assert live == {
        Code.NETWORK_API_NOT_SERVED.value,
        Code.CLUSTER_STATE_UNAVAILABLE.value,
        Code.NETWORK_IN_USE.value,
        Code.PARAM_SET_IN_USE.value,
        Code.RECIPE_IN_USE.value,
    }
    assert {code.value for code in Code} - runnable == live


def test_the_denial_walkthrough_is_the_webhook_response() -> None:
    intro = section(INTRO)
    (source,) = (b for b in intro.blocks if b.info == "yaml")
    (console,) = (b for b in intro.blocks if b.info == "console")
    (response_block,) = (b for b in intro.blocks if b.info == "json")
    (kubectl,) = (b for b in intro.blocks if b.info == "text")
    obj = yaml.safe_load(source.body)
    argv, environ = parse_command(console.body.partition("\n")[0])
    args = build_parser().parse_args(argv)
    settings = settings_from(args, environ)
    view = snapshot_of(
        (o.obj for o in iter_objects([ROOT / args.state])),
        recipe_name=settings.recipe_configmap,
        load_yaml=load_yaml,
    )
    documented: dict[str, Any] = json.loads(response_block.body)
    request = {
        "uid": documented["response"]["uid"],
        "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": obj["kind"]},
        "name": obj["metadata"]["name"],
        "operation": "CREATE",
        "object": obj,
    }
    admission = request_from_body({**documented, "request": request})
    response = review_response(admission, evaluate(admission.review, view, settings.policy))
    assert documented == response
    lead = (
        f'Error from server (Forbidden): error when creating "{args.files[0]}": '
        f'admission webhook "{WEBHOOK}" denied the request: '
    )
    assert kubectl.body.startswith(lead)
    assert (
        kubectl.body.removeprefix(lead).rstrip("\n") == documented["response"]["status"]["message"]
    )
    assert f"name: {WEBHOOK}" in (ROOT / "manifests/base/webhook.yaml").read_text(encoding="utf-8")


# --- (d) every setting is documented -------------------------------------------------------

OPTIONS: Final = (*POLICY_OPTIONS, *SERVE_OPTIONS)


def setting_rows() -> dict[str, list[str]]:
    """Table rows whose first cells are a setting and its flag, by setting name."""
    rows: dict[str, list[str]] = {}
    for line in CONFIGURATION.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 1 and cells[1].startswith("`--"):
            name = cells[0].strip("`")
            assert name not in rows, f"{name} has two rows"
            rows[name] = cells
    return rows


def commands_honouring(option: Option) -> set[str]:
    """The subcommands whose parser has the setting's flag, the one that names its variable.

    (``check`` has a ``--state`` of its own, required and without a variable: not the setting.)
    """
    commands = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            choices: Mapping[str, argparse.ArgumentParser] = action.choices
            for command, parser in choices.items():
                for sub_action in parser._actions:
                    flagged = f"--{option.name}" in sub_action.option_strings
                    if flagged and option.env in (sub_action.help or ""):
                        commands.add(command)
    return commands


def test_the_options_are_distinct() -> None:
    assert len({option.name for option in OPTIONS}) == len(OPTIONS)


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
def test_every_setting_has_a_row_with_flag_env_default_and_commands(option: Option) -> None:
    rows = setting_rows()
    assert option.name in rows, f"docs/configuration.md has no row for {option.name}"
    _setting, flag, env, default, _allowed, commands = rows[option.name]
    assert flag == f"`--{option.name}`"
    assert env == f"`{option.env}`"
    if option.default:
        assert default == f"`{option.default}`"
    else:
        assert default.startswith("unset")
    assert set(commands.split(", ")) == commands_honouring(option)


def test_no_row_documents_a_setting_that_does_not_exist() -> None:
    assert sorted(setting_rows()) == sorted(option.name for option in OPTIONS)


def bad_values() -> list[tuple[str, str]]:
    """``$ command`` / ``nicguard: error`` pairs of the configuration page's console blocks."""
    pairs: list[tuple[str, str]] = []
    for page_section in sections(CONFIGURATION):
        for block in page_section.blocks:
            if block.info != "console":
                continue
            lines = block.body.splitlines()
            assert len(lines) % 2 == 0, f"configuration.md:{block.line}: unpaired lines"
            pairs.extend(zip(lines[::2], lines[1::2], strict=True))
    return pairs


def read_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """What ``nicguard`` reads before it does anything; ``serve`` is parsed, never started."""
    settings_from(args, environ)
    if args.command == "serve":
        serve_options(args, environ)


BAD_VALUES: Final = [pytest.param(cmd, err, id=cmd.removeprefix("$ ")) for cmd, err in bad_values()]


@pytest.mark.parametrize(("command", "error"), BAD_VALUES)
def test_every_quoted_bad_value_fails_with_the_quoted_line(command: str, error: str) -> None:
    argv, environ = parse_command(command)
    args = build_parser().parse_args(argv)
    with pytest.raises(SettingsError) as raised:
        read_settings(args, environ)
    assert f"nicguard: {raised.value}" == error


def test_every_setting_has_a_quoted_bad_value_or_accepts_anything() -> None:
    quoted = " ".join(command for command, _ in bad_values())
    # Any string is accepted (files are read later; tls-key's pairing rule is quoted via tls-cert).
    anything = {"host", "state", "tls-key", "cert-dir", "service-name", "service-namespace"}
    anything |= {"client-ca", "pod-name"}
    # A DRA profile's runtimes may be none at all (its default).
    anything |= {f"{p}-dranet-runtimes" for p in ("a3-ultra", "a4", "a4x", "a4x-max")}
    for option in OPTIONS:
        if option.name not in anything:
            assert f"--{option.name}" in quoted or option.env in quoted, option.name
