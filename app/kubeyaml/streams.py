"""A file split into objects as kubectl splits it (k8s.io/apimachinery/pkg/util/yaml): a JSON
stream when the first non-space of its first 4096 bytes is ``{``, else YAML documents between
lines that start with ``---``.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from typing import Final

from app.kubeyaml.errors import KubeYamlError

_GUESS_BYTES: Final = 4096
_LATIN1_SPACE: Final = "\t\n\v\f\r \x85\xa0"
_JSON_SPACE: Final = " \t\r\n"
_SEPARATOR: Final = "---"
_MIN_INT64: Final = -(1 << 63)
_MAX_INT64: Final = (1 << 63) - 1
_PLAIN_FLOAT_BOUND: Final = 1e21


def _go_space(char: str) -> bool:
    """Go's unicode.IsSpace."""
    return char in _LATIN1_SPACE or (ord(char) > 0xFF and char.isspace())


def _trim_left(text: str) -> str:
    index = 0
    while index < len(text) and _go_space(text[index]):
        index += 1
    return text[index:]


def looks_like_json(text: str) -> bool:
    """GuessJSONStream: ``{`` first after Go's white space, within the first 4096 bytes."""
    head = text.encode("utf-8", "surrogatepass")[:_GUESS_BYTES].decode("utf-8", "replace")
    return _trim_left(head).startswith("{")


def yaml_chunks(text: str, first_line: int = 0) -> Iterator[tuple[int, str]]:
    """YAMLReader's documents with the 0-based line each starts on: lines as bufio's ReadLine
    gives them (``\\r\\n`` and ``\\n`` dropped, ``\\n`` put back), split at lines starting with
    ``---`` followed by nothing but space and a comment; empty documents are dropped."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ended with a line break: no last, unterminated line
    else:
        lines[-1] += "\r"  # kept below: ReadLine strips \r only before \n
    buffer: list[str] = []
    start = first_line
    for number, raw in enumerate(lines, start=first_line):
        line = raw[:-1] if raw.endswith("\r") else raw
        if line.startswith(_SEPARATOR):
            rest = _trim_left(line[len(_SEPARATOR) :])
            if rest and rest[0] != "#":
                raise KubeYamlError(f"invalid Yaml document separator: {rest} at line {number + 1}")
            if buffer:
                yield start, "".join(buffer)
            buffer, start = [], number + 1
            continue
        buffer.append(line + "\n")
    if buffer:
        yield start, "".join(buffer)


class _NotJsonError(Exception):
    """Text Go's JSON decoder refuses that Python's accepts (NaN, Infinity)."""


def json_values(text: str) -> Generator[object, None, tuple[int, int] | None]:
    """Each JSON value of the stream (Go's json.Decoder), ``null`` skipped as kubectl skips it;
    numbers as kubectl sends them on (64-bit integers, whole floats written as integers).

    Where the stream stops being JSON after at most one value, YAMLOrJSONDecoder reads the rest
    as YAML: how many values were yielded and the index it starts from are returned (None at the
    end of a JSON stream).
    """
    decoder = json.JSONDecoder(parse_constant=_no_constant, parse_int=_int64, parse_float=_float64)
    consumed, decoded, yielded = 0, 0, 0
    while True:
        index = consumed
        while index < len(text) and text[index] in _JSON_SPACE:
            index += 1
        if index == len(text):
            return None
        try:
            value, consumed = decoder.raw_decode(text, index)
        except (json.JSONDecodeError, _NotJsonError) as error:
            if decoded > 1:
                raise KubeYamlError(
                    f"document {decoded + 1}: not JSON, though the file starts with '{{' "
                    f"({' '.join(str(error).split())})"
                ) from None
            return yielded, _after_blank_line(text, consumed)
        except RecursionError:
            raise KubeYamlError(f"document {decoded + 1}: JSON nested too deeply") from None
        decoded += 1
        if value is not None:
            yielded += 1
            yield value


def _after_blank_line(text: str, index: int) -> int:
    """YAMLOrJSONDecoder's consumeWhitespace: white space up to and including a line break."""
    while index < len(text) and _go_space(text[index]):
        index += 1
        if text[index - 1] == "\n":
            break
    return index


def _no_constant(name: str) -> object:
    raise _NotJsonError(f"{name} is not a JSON number")


def _int64(text: str) -> int:
    value = int(text)
    if not _MIN_INT64 <= value <= _MAX_INT64:
        raise KubeYamlError(f"the JSON integer {text} does not fit 64 bits")
    return value


def _float64(text: str) -> object:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise KubeYamlError(f"the JSON number {text} does not fit 64 bits")
    if value.is_integer() and abs(value) < _PLAIN_FLOAT_BOUND:
        return int(value)
    return value
