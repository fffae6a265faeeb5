"""The arithmetic of `plm tune` (pure Python, no ML): parameter grids, random draws,
folds, picking the winner, and writing the tuned config back as TOML.

A trial is one assignment of values to config keys, applied like `--set KEY=VALUE`, so
any key of any stage can be tuned. Trials are scored per query once; choosing on a query
set, or on k-1 folds of it, is then only averages over those per-query scores.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plm_core.config import parse_override
from plm_core.errors import ConfigError


@dataclass(frozen=True)
class Param:
    key: str
    values: tuple[str, ...]  # as typed, each applied as `--set key=value`


def split_values(raw: str) -> list[str]:
    """Comma-separated values; commas inside quotes, [arrays] or {tables} belong to the value."""
    items, current, depth, quote = [], "", 0, ""
    for ch in raw:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        current += ch
    items.append(current.strip())
    return items


def parse_param(arg: str) -> Param:
    """`a.b.c=v1,v2,...` -> Param; each value must parse as a `--set` value would."""
    if "=" not in arg:
        raise ConfigError(f"--param {arg!r}: expected KEY=V1,V2,..., e.g. query.retrieve.fuser.default.k=10,30,60")
    key, raw = arg.split("=", 1)
    key = key.strip()
    values = [v for v in split_values(raw) if v]
    if not key or not values:
        raise ConfigError(f"--param {arg!r}: expected KEY=V1,V2,... with at least one value")
    if len(set(values)) != len(values):
        raise ConfigError(f"--param {arg!r}: a value is listed twice")
    for v in values:
        parse_override(f"{key}={v}")  # a malformed array or table fails here, before any work
    return Param(key, tuple(values))


MAX_TRIALS = 10_000
"""The most trials one `plm tune` runs; each is a full evaluation, and the grid is counted,
never built, before this is checked."""


def trials(params: Sequence[Param], search: str = "grid", n: int | None = None, seed: int = 0) -> list[dict[str, str]]:
    """The assignments to evaluate: the whole grid, or `n` distinct draws from it ("random");
    ConfigError when that is more than MAX_TRIALS."""
    keys = [p.key for p in params]
    if len(set(keys)) != len(keys):
        raise ConfigError("--param: a key is given twice; list all its values in one --param")
    size = math.prod(len(p.values) for p in params)
    if search == "grid":
        if size > MAX_TRIALS:
            raise ConfigError(
                f"--param: the grid has {size:,} combinations, more than the {MAX_TRIALS:,} trials plm tune "
                "runs; draw some of them with --search random --trials N, or list fewer values"
            )
        return [_combination(params, i) for i in range(size)]
    if search != "random":
        raise ConfigError(f"--search {search!r}: choose grid or random")
    if n is None or n < 1:
        raise ConfigError("--search random needs --trials N (N >= 1)")
    if min(n, size) > MAX_TRIALS:
        raise ConfigError(f"--trials {n:,}: more than the {MAX_TRIALS:,} trials plm tune runs")
    rng = random.Random(seed)
    # Indexes into the grid (in itertools.product's order), drawn without building it.
    return [_combination(params, i) for i in sorted(rng.sample(range(size), min(n, size)))]


def _combination(params: Sequence[Param], index: int) -> dict[str, str]:
    """The grid's `index`-th assignment, the last parameter varying fastest."""
    values = []
    for p in reversed(params):
        index, at = divmod(index, len(p.values))
        values.append(p.values[at])
    return dict(zip((p.key for p in params), reversed(values), strict=True))


def overrides_of(trial: Mapping[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in trial.items()]


def folds(qids: Sequence[str], k: int, seed: int = 0) -> list[list[str]]:
    """k disjoint folds of the query ids (a seeded shuffle, then round robin)."""
    if k < 2 or k > len(qids):
        raise ConfigError(f"--folds {k}: need 2 <= folds <= the {len(qids)} queries of the tuning set")
    order = sorted(qids)
    random.Random(seed).shuffle(order)
    return [order[i::k] for i in range(k)]


def mean(scores: Mapping[str, float], qids: Sequence[str]) -> float:
    return sum(scores[q] for q in qids) / len(qids) if qids else math.nan


def best(per_trial: Sequence[Mapping[str, float]], qids: Sequence[str]) -> int:
    """Index of the trial with the highest mean over `qids`; ties go to the earlier trial."""
    means = [mean(s, qids) for s in per_trial]
    return max(range(len(means)), key=lambda i: (means[i], -i))


def cross_validate(per_trial: Sequence[Mapping[str, float]], parts: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Choose on k-1 folds, score on the one left out, for each fold: an estimate of how a
    tuned config does on queries it was not tuned on (the tuning itself is optimistic)."""
    rows = []
    for i, held_out in enumerate(parts):
        train = [q for j, part in enumerate(parts) if j != i for q in part]
        pick = best(per_trial, train)
        rows.append(
            {
                "fold": i,
                "trial": pick,
                "train": mean(per_trial[pick], train),
                "held_out": mean(per_trial[pick], held_out),
                "queries": len(held_out),
            }
        )
    total = sum(r["queries"] for r in rows)
    return {"folds": rows, "held_out": sum(r["held_out"] * r["queries"] for r in rows) / total}


# ----------------------------------------------------------------------- TOML writer
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE_KEY.match(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise ConfigError(f"cannot write {type(v).__name__} value {v!r} as TOML")


def _inline(v: Any) -> bool:
    """A small table of plain values without `use` (weights = { dense = 1.0 }) stays inline."""
    return isinstance(v, dict) and "use" not in v and all(not isinstance(x, dict) for x in v.values())


def dump_toml(raw: Mapping[str, Any], header: str = "") -> str:
    """A config dict as TOML: plain keys first, then one [dotted.table] per stage table."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []

    def table(path: list[str], node: Mapping[str, Any]) -> None:
        # Top-level tables ([job], [store]) are always written as tables.
        plain = [(k, v) for k, v in node.items() if not isinstance(v, dict) or (path and _inline(v))]
        nested = [(k, v) for k, v in node.items() if isinstance(v, dict) and not (path and _inline(v))]
        if path and (plain or not nested):
            lines.extend(["", "[" + ".".join(_key(p) for p in path) + "]"])
        lines.extend(f"{_key(k)} = {_value(v)}" for k, v in plain)
        for k, v in nested:
            table([*path, k], v)

    table([], raw)
    return "\n".join(lines).lstrip("\n") + "\n"
