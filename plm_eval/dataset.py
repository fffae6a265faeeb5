"""Reading BEIR-layout evaluation data: queries and qrels (pure Python, no ML)."""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
import reprlib
from dataclasses import dataclass
from pathlib import Path

from plm_core.config import JobConfig
from plm_core.errors import PlmUserError
from plm_eval.settings import eval_settings


@dataclass(frozen=True)
class QuerySet:
    name: str
    queries: dict[str, str]  # query id -> text, file order
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade


# Line ends as a file read in text mode sees them. Not str.splitlines(): it also splits at
# U+2028, U+0085 and other characters that JSON strings may hold unescaped.
_NEWLINE = re.compile(r"\r\n|\r|\n")
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60


def _lines(path: Path) -> list[str]:
    """A text file's lines, or one clear error (not UTF-8, unreadable); a UTF-8 BOM is dropped."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise PlmUserError(f"{path}: cannot be read ({err.strerror or err})") from None
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0  # Windows editors write one
    try:
        text = (data[bom:] if bom else data).decode("utf-8")
    except UnicodeDecodeError as err:
        offset = bom + err.start
        line = data.count(b"\n", 0, offset) + 1
        raise PlmUserError(
            f"{path}:{line}: not UTF-8 (byte offset {offset}: {data[offset : offset + 1]!r}); save the file as UTF-8"
        ) from None
    return _NEWLINE.split(text)


def _read_queries(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    expected = "expected one JSON object per line with a string '_id' and a string 'text'"
    for n, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            raise PlmUserError(f"{path}:{n}: not valid JSON ({err}); {expected}") from None
        if not isinstance(rec, dict):
            raise PlmUserError(f"{path}:{n}: a JSON {_JSON_TYPES.get(type(rec), 'value')}, not an object; {expected}")
        qid, text = rec.get("_id"), rec.get("text")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            missing = " (missing)" if "_id" not in rec else ""
            raise PlmUserError(f"{path}:{n}: '_id' is {_SHORT.repr(qid)}{missing}, not a string or integer; {expected}")
        if not isinstance(text, str):
            missing = " (missing)" if "text" not in rec else ""
            raise PlmUserError(f"{path}:{n}: 'text' is {type(text).__name__}{missing}, not a string; {expected}")
        out[str(qid)] = text
    return out


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    # Decoded up front (`_lines`): a non-UTF-8 file is one clear error, not a traceback.
    rows = csv.reader(_lines(path), delimiter="\t")
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as err:  # a field over csv's size limit, an unclosed quote
            raise PlmUserError(
                f"{path}:{rows.line_num}: not a qrels row ({err}); expected 'query-id<TAB>corpus-id<TAB>score'"
            ) from None
        n = rows.line_num
        if not row or (n == 1 and row[0] == "query-id"):
            continue
        if len(row) < 3:
            raise PlmUserError(f"{path}:{n}: expected 'query-id<TAB>corpus-id<TAB>score'")
        try:
            grade = int(float(row[2]))
        except (ValueError, OverflowError):
            raise PlmUserError(f"{path}:{n}: relevance {row[2]!r} is not a number") from None
        qrels.setdefault(row[0], {})[row[1]] = grade
    return qrels


def load_query_set(dataset: Path, name: str) -> QuerySet:
    """`queries/<name>.jsonl` if present, else the shared `queries.jsonl`; qrels from `qrels/<name>.tsv`."""
    qrels_path = dataset / "qrels" / f"{name}.tsv"
    if not qrels_path.is_file():
        have = sorted(p.stem for p in (dataset / "qrels").glob("*.tsv"))
        raise PlmUserError(f"no qrels for query set {name!r} in {dataset}; available: {', '.join(have) or 'none'}")
    qpath = dataset / "queries" / f"{name}.jsonl"
    if not qpath.is_file():
        qpath = dataset / "queries.jsonl"
    if not qpath.is_file():
        raise PlmUserError(f"no queries for set {name!r} in {dataset} (looked for queries/{name}.jsonl, queries.jsonl)")
    qrels = read_qrels(qrels_path)
    queries = _read_queries(qpath)
    judged = {qid: queries[qid] for qid in queries if qid in qrels}
    if not judged:
        # Metrics over no query would print as 0.000 with p = 1: meaningless, so an error.
        raise PlmUserError(
            f"query set {name!r} in {dataset} has no judged queries: none of the {len(queries)} queries in "
            f"{qpath.name} has a row in {qrels_path.name} ({len(qrels)} query ids there); check the ids"
        )
    return QuerySet(name, judged, qrels)


def resolve_dataset(config: JobConfig, dataset: str | Path | None) -> Path | None:
    """The dataset folder: the CLI's --dataset, else [job].dataset relative to the config."""
    given = eval_settings(config).dataset
    if dataset is not None:
        path = Path(dataset)
    elif given:
        path = (config.path.parent / given).resolve()
    else:
        return None
    if not path.is_dir():
        raise PlmUserError(f"dataset folder not found: {path}")
    return path


def resolve_corpus(config: JobConfig, dataset: Path, corpus: str | None = None) -> Path:
    """What the loader reads inside a dataset: --corpus, else the first of [job].corpus that exists."""
    candidates = [corpus] if corpus else list(eval_settings(config).corpus)
    for cand in candidates:
        # Read as written, the path stays inside the dataset: a config cannot reach other files.
        # (A symlink in the dataset folder is its owner's choice and is followed.)
        if os.path.isabs(cand) or os.path.normpath(cand).split(os.sep)[0] == os.pardir:
            where = "--corpus" if corpus else f"{config.path} [job] corpus"
            raise PlmUserError(
                f"{where}: {cand!r} leads outside the dataset folder {dataset}; name a file or folder inside it"
            )
        if (dataset / cand).exists():
            return dataset / cand
    raise PlmUserError(f"none of {candidates} exists in dataset {dataset}; pass --corpus SUBPATH")
