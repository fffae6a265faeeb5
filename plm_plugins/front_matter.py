"""Front matter as metadata: the top-level `key: value` lines of a leading `---` block, read
leniently by a small reader of its own (the text itself never changes), and one line saying
why a block that looks like front matter is not valid YAML. `markdown_dir` and the Markdown
converter read it the same way."""

from __future__ import annotations

import math
import re
from typing import Any

from plm.documents import MAX_METADATA_INT, front_matter_lines

# A top-level `key: value` line; the value may be empty (a nested map, a list follows).
_KEY_LINE = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:[ \t]+(.*?))?\s*$")
_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$")
_BLOCK_SCALAR = re.compile(r"^[|>][+-]?$")


def parse_scalar(raw: str) -> Any:
    """A YAML-ish scalar: quoted strings unquoted, ints, floats, booleans, null.

    Dates (`2024-05-01`), numbers metadata cannot hold (`1e999`, 30-digit integers) and
    everything else stay strings, so metadata is always JSON-serialisable and compares
    the same way after a round trip through the store.
    """
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if " #" in value:  # a trailing comment on a plain scalar
        value = value.split(" #", 1)[0].rstrip()
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~", ""):
        return None
    # A number metadata cannot hold exactly (over 64 bits, or inf) stays text, as a date does.
    if _INT.match(value):
        return number if len(value) <= 20 and abs(number := int(value)) <= MAX_METADATA_INT else value
    if _FLOAT.match(value) and math.isfinite(real := float(value)):
        return real
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1].strip()
        return [parse_scalar(part) for part in inner.split(",")] if inner else []
    return value


def front_matter_problem(text: str) -> str | None:
    """Why a leading `---` block is not the YAML front matter it looks like, or None. The
    metadata reader below is lenient on purpose; this only tells the user what it skipped."""
    lines = text.split("\n")
    if lines[0].lstrip("\ufeff").rstrip() != "---":
        return None
    end = front_matter_lines(lines) - 1  # the closing `---` line
    if end < 0:
        return "front matter opened with '---' is never closed: no metadata was read from it"
    import yaml

    try:
        # Composed, not loaded: the syntax is checked without building values, so an alias
        # bomb or a 5,000-digit number costs nothing here.
        node = yaml.compose("\n".join(lines[1:end]), Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        reason = getattr(err, "problem", None) or str(err).splitlines()[0]
        return f"front matter is not valid YAML{where}: {reason}; only its plain `key: value` lines were read"
    except RecursionError:
        return "front matter is nested too deeply to read; only its plain `key: value` lines were read"
    if node is not None and not isinstance(node, yaml.MappingNode):
        return "front matter is not a YAML mapping of `key: value` lines; no metadata was read from it"
    return None


def parse_front_matter(text: str) -> dict[str, Any]:
    """Top-level `key: value` pairs between a leading `---` line and the next `---` line.

    Supports plain scalars, `key:` followed by `- item` lines (a list), and `>` / `|`
    block scalars. Nested maps are skipped: this is metadata for filters, not a YAML
    parser, and the project deliberately takes no YAML dependency.
    """
    lines = text.split("\n")
    end = front_matter_lines(lines) - 1  # the closing `---` line
    if end < 0:
        return {}
    body = lines[1:end]
    meta: dict[str, Any] = {}
    i = 0
    while i < len(body):
        match = _KEY_LINE.match(body[i])
        i += 1
        if match is None:  # indented, comment, or something we do not read
            continue
        key, value = match.group(1), match.group(2) or ""
        # Lines that belong to this key: indented ones, or `- item` lines right under it.
        nested: list[str] = []
        while i < len(body) and (body[i][:1] in (" ", "\t", "-") or not body[i].strip()):
            nested.append(body[i])
            i += 1
        if _BLOCK_SCALAR.match(value):
            parts = [line.strip() for line in nested if line.strip()]
            meta[key] = (" " if value[0] == ">" else "\n").join(parts)
        elif value:
            meta[key] = parse_scalar(value)
        else:
            items = [line.strip()[1:].strip() for line in nested if line.strip().startswith("-")]
            if items and len(items) == len([line for line in nested if line.strip()]):
                meta[key] = [parse_scalar(item) for item in items]
    return meta
