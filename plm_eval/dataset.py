"""Reading BEIR-layout evaluation data: queries and qrels (pure Python, no ML)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from plm_core.config import JobConfig
from plm_core.errors import PlmUserError


@dataclass(frozen=True)
class QuerySet:
    name: str
    queries: dict[str, str]  # query id -> text, file order
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade


def _lines(path: Path) -> list[str]:
    """A text file's lines, or one clear error (not UTF-8, unreadable)."""
    try:
        data = path.read_bytes()
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise PlmUserError(f"{path}:{line}: not UTF-8 (byte offset {err.start}); save the file as UTF-8") from None
    except OSError as err:
        raise PlmUserError(f"{path}: cannot be read ({err.strerror or err})") from None


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
            raise PlmUserError(f"{path}:{n}: a JSON {type(rec).__name__}, not an object; {expected}")
        qid, text = rec.get("_id"), rec.get("text")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not isinstance(text, str):
            raise PlmUserError(f"{path}:{n}: '_id' is {qid!r} and 'text' is {type(text).__name__}; {expected}")
        out[str(qid)] = text
    return out


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    # Decoded up front (`_lines`): a non-UTF-8 file is one clear error, not a traceback.
    for n, row in enumerate(csv.reader(_lines(path), delimiter="\t"), 1):
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
    return QuerySet(name, judged, qrels)


def resolve_dataset(config: JobConfig, dataset: str | Path | None) -> Path | None:
    """The dataset folder: the CLI's --dataset, else [job].dataset relative to the config."""
    if dataset is not None:
        path = Path(dataset)
    elif config.job.dataset:
        path = (config.path.parent / config.job.dataset).resolve()
    else:
        return None
    if not path.is_dir():
        raise PlmUserError(f"dataset folder not found: {path}")
    return path


def resolve_corpus(config: JobConfig, dataset: Path, corpus: str | None = None) -> Path:
    """What the loader reads inside a dataset: --corpus, else the first of [job].corpus that exists."""
    candidates = [corpus] if corpus else list(config.job.corpus)
    for cand in candidates:
        if (dataset / cand).exists():
            return dataset / cand
    raise PlmUserError(f"none of {candidates} exists in dataset {dataset}; pass --corpus SUBPATH")
