"""Values typed on the command line: `--set` scalars and `--filter` conditions, read one
way (`parse_cli_value`) and turned into the filter spec of `plm_index.filters`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from plm_core.config import parse_cli_value
from plm_core.errors import PlmUserError
from plm_index.filters import normalize_filters

_CLI_OPS = {">=": "gte", "<=": "lte", "!=": "ne", "==": "eq", "=": "eq", ">": "gt", "<": "lt"}
_CLI_ARG = re.compile(r"^\s*([^=<>!\s]+)\s*(>=|<=|!=|==|=|>|<)\s*(.*?)\s*$", re.DOTALL)
_CLI_HELP = "e.g. --filter team=storage, --filter tags=db,backup, --filter 'version>=2', --filter 'updated<2024-06-01'"


def _split_values(raw: str) -> list[str]:
    """Comma-separated items; a comma inside quotes belongs to its item."""
    items, current, quote = [], "", ""
    for ch in raw:
        if quote:
            current += ch
            if ch == quote:
                quote = ""
        elif ch in "\"'" and not current.strip():
            quote, current = ch, current + ch
        elif ch == ",":
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    return items


def parse_filter_args(args: Sequence[str]) -> dict[str, Any]:
    """`--filter` arguments -> a filter spec; conditions on one key combine (AND).

    `key=value` equality, `key=a,b,c` one of, `key!=v`, `key>v`, `key>=v`, `key<v`,
    `key<=v`. `["year>=2020", "year<2024"]` gives {"year": {"gte": 2020, "lt": 2024}}.
    """
    ops_by_key: dict[str, dict[str, Any]] = {}
    for arg in args:
        match = _CLI_ARG.match(arg)
        if match is None:
            raise PlmUserError(f"bad filter {arg!r}: expected KEY=VALUE or KEY>=VALUE (also >, <, <=, !=); {_CLI_HELP}")
        key, symbol, raw = match.groups()
        if not raw:
            raise PlmUserError(f"bad filter {arg!r}: no value after {symbol!r}; {_CLI_HELP}")
        if raw[0] in "=<>!":
            raise PlmUserError(f"bad filter {arg!r}: the value starts with an operator ({raw!r}); {_CLI_HELP}")
        op = _CLI_OPS[symbol]
        items = _split_values(raw)
        if len(items) > 1:
            if op != "eq":
                raise PlmUserError(f"bad filter {arg!r}: a comma list (one of) only works with '='; {_CLI_HELP}")
            if any(not item.strip() for item in items):
                raise PlmUserError(f"bad filter {arg!r}: empty item in the list; {_CLI_HELP}")
            op, operand = "in", [parse_cli_value(item) for item in items]
        else:
            operand = parse_cli_value(raw)
        ops = ops_by_key.setdefault(key, {})
        if op in ops:
            raise PlmUserError(
                f"bad filter {arg!r}: {key!r} already has a {op!r} condition ({ops[op]!r}); "
                f"to accept several values write {key}=a,b"
            )
        ops[op] = operand
    spec: dict[str, Any] = {k: (ops["eq"] if list(ops) == ["eq"] else ops) for k, ops in ops_by_key.items()}
    normalize_filters(spec)  # bad bounds (`version>=abc`) fail here, naming the key
    return spec


def parse_weight_args(args: Sequence[str]) -> dict[str, float]:
    """`--weight NAME=W` arguments -> {source: weight}; W a number >= 0."""
    weights: dict[str, float] = {}
    for arg in args:
        name, sep, raw = arg.partition("=")
        value = parse_cli_value(raw) if sep else None
        if not name.strip() or isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise PlmUserError(f"--weight {arg!r}: expected SOURCE=NUMBER with a number >= 0, e.g. --weight dense=0.5")
        weights[name.strip()] = float(value)
    return weights
