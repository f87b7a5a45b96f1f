"""The core's value types (app.domain.value_type): compared, hashed and replaced by their fields
as frozen dataclasses are, and refused any assignment by mypy, which `make lint` runs on app and
tests."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
from mypy import api

from app.domain.fields import FieldPath
from app.domain.value_type import value_type
from tests.support.paths import ROOT


@value_type
class _Pair:
    left: str
    right: int = 0


@value_type(kw_only=True)
class _Named:
    name: str


def test_a_value_type_is_compared_and_hashed_by_its_fields() -> None:
    assert _Pair("a", 1) == _Pair("a", 1)
    assert _Pair("a", 1) != _Pair("a", 2)
    assert hash(_Pair("a", 1)) == hash(_Pair("a", 1))
    assert {_Pair("a"): 1}[_Pair("a", 0)] == 1
    assert hash(FieldPath("x").child("y")) == hash(FieldPath("x.y"))


def test_a_value_type_is_slotted_and_replaced_field_by_field() -> None:
    pair = _Pair("a", 1)
    assert not hasattr(pair, "__dict__")
    assert dataclasses.replace(pair, right=2) == _Pair("a", 2)
    assert pair == _Pair("a", 1)


def test_kw_only_takes_its_fields_by_name_alone() -> None:
    assert _Named(name="x").name == "x"
    with pytest.raises(TypeError, match="positional argument"):
        _Named("x")  # type: ignore[call-arg]


def _mypy(source: str, tmp_path: Path) -> tuple[str, int]:
    module = tmp_path / "assigned.py"
    module.write_text(textwrap.dedent(source))
    stdout, _, status = api.run(
        [
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            str(module),
        ]
    )
    return stdout, status


def test_mypy_refuses_an_assignment_to_any_field_of_a_value_type(tmp_path: Path) -> None:
    stdout, status = _mypy(
        """
        from app.domain.fields import FieldPath
        from app.domain.kinds import Kind
        from app.domain.review import Operation, Review
        from app.domain.value_type import value_type

        @value_type
        class Pair:
            left: str

        review = Review(operation=Operation.CREATE, kind=Kind.TRAIN_JOB, namespace="team")
        review.operation = Operation.UPDATE
        review.obj = {}
        FieldPath("a").text = "b"
        Pair("a").left = "b"
        print(review.namespace, Pair("a").left)
        """,
        tmp_path,
    )
    assert status == 1, stdout
    refused = [line for line in stdout.splitlines() if "is read-only" in line]
    assert [line.split(": error: ")[1] for line in refused] == [
        'Property "operation" defined in "Review" is read-only  [misc]',
        'Property "obj" defined in "Review" is read-only  [misc]',
        'Property "text" defined in "FieldPath" is read-only  [misc]',
        'Property "left" defined in "Pair" is read-only  [misc]',
    ]
    assert "Found 4 errors" in stdout
