"""The checks of the evaluation families: a synthetic query generator
(`check_query_generator`), an evaluator (`check_evaluator`, a query set scored through a
job) and a reporter (`check_reporter`, configs' runs compared and written as files)."""

from __future__ import annotations

import copy
import json
import math
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plm.evaluation import Evaluator, QueryGenerator, Reporter, SyntheticQuery
from plm.testing.corpus import CHUNKS, MARKDOWN_DOCS
from plm.testing.rules import Rules, checking
from plm_core.records import Document, ExpandedQuery, Hit, Query, Ranking


def check_query_generator(generator: QueryGenerator, documents: Sequence[Document] | None = None) -> None:
    """The query generator contract: queries judged relevant to documents of the corpus, the
    same every time, every copied span (`SyntheticQuery.remove`) found verbatim in the
    document it names as its source, and no query found verbatim anywhere once the spans
    and copies are cut (`plm.synthetic.rewrite`, what `plm eval --synthetic` indexes)."""
    from plm.synthetic import leaks, rewrite

    with checking("query_generators") as rules:
        docs = list(documents if documents is not None else MARKDOWN_DOCS)
        first = generator.generate(docs)
        rules.require(isinstance(first, list), "generate returns a list", repr(type(first)))
        rules.require(first, "a generator makes at least one query from its test corpus")
        rules.require(all(isinstance(q, SyntheticQuery) for q in first), "generate returns SyntheticQuery records")
        rules.expect(first == generator.generate(docs), "the same documents give the same queries")
        by_id = {d.id: d for d in docs}
        for q in first:
            rules.expect(q.doc_id in by_id, "a query is judged relevant to a document of the corpus", q.doc_id)
            rules.expect(any(c.isalnum() for c in q.text), "a query has words", repr(q))
            source = by_id.get(q.source_doc or q.doc_id)
            if not rules.expect(source is not None, "source_doc names a document of the corpus", q.source_doc):
                continue
            assert source is not None
            for span in q.remove:
                rules.expect(
                    span in source.text or span in source.title,
                    "each span in `remove` is verbatim in its source document, so cutting it removes the copy",
                    f"{span!r} not in {source.id!r}",
                )
        with rules.part("cutting the copies"):
            queries = [(f"q{i}", q) for i, q in enumerate(first)]
            rewritten, _ = rewrite(docs, first)
            bad = leaks(queries, rewritten)
            rules.expect(not bad, "no query is found verbatim in the corpus it is evaluated on", str(bad[:3]))


# ---------------------------------------------------------------------- evaluators
@dataclass(frozen=True)
class KitQuerySet:
    """A judged query set as an evaluator reads one (plm_eval's QuerySet): `queries` (id ->
    text, in order) and `qrels` (id -> document id -> grade)."""

    name: str
    queries: dict[str, str] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)


QUERY_SET = KitQuerySet(
    "plm-testing",
    {"q1": "pod memory", "q2": "deployment replica", "q3": "node", "q4": "autoscaler cpu", "q5": "nothing matches"},
    {"q1": {"d2": 1}, "q2": {"d1": 1}, "q3": {"d0": 1, "d1": 1}, "q4": {"d3": 2}, "q5": {"d3": 1}},
)


class KitJob:
    """What an evaluator runs a query set through (a `plm.Job`'s `search`): the kit's
    chunks (`plm.testing.CHUNKS`) ranked by the query words they hold, ties in index order."""

    def search(self, query: Query, **_: Any) -> tuple[Ranking, dict[str, float]]:
        words = set(query.text.lower().split())
        scored = [(len(words & set(c.text.split())), -i, c) for i, c in enumerate(CHUNKS)]
        ranked = sorted((s for s in scored if s[0]), key=lambda s: (s[0], s[1]), reverse=True)[: query.k]
        hits = tuple(
            Hit(c.id, c.doc_id, float(score), rank + 1, c.text, metadata=c.metadata)
            for rank, (score, _, c) in enumerate(ranked)
        )
        return Ranking(query=ExpandedQuery.of(query), hits=hits), {"retrieve": 0.0}


def check_evaluator(evaluator: Evaluator, job: Any = None, qset: Any = None) -> None:
    """`evaluator` run on `qset` through `job` (default: `KitJob`, a job over the kit's
    chunks, and `QUERY_SET`, five judged queries): `metric_names()` lists distinct names;
    `evaluate` returns a JSON report with `set`, `queries`, `metrics` (exactly those names,
    in order, each the mean of the `per_query` rows' values) and one `per_query` row per
    query; the same every time; an empty set gives a report of no queries."""
    with checking("evaluators") as rules:
        job = job if job is not None else KitJob()
        qset = qset if qset is not None else QUERY_SET
        names = evaluator.metric_names()
        rules.require(
            isinstance(names, list) and names and all(isinstance(n, str) and n for n in names),
            "metric_names() is a non-empty list of names",
            repr(names),
        )
        rules.expect(len(set(names)) == len(names), "metric names are distinct", f"{names}")
        evaluator.ensure_warm()
        report = evaluator.evaluate(job, qset)
        _check_report(rules, report, names, qset)
        with rules.part("evaluating again"):
            again = evaluator.evaluate(job, qset)
            rules.expect(
                isinstance(again, dict) and again.get("metrics") == report.get("metrics"),
                "the same job and queries give the same metrics",
                f"{report.get('metrics')} then {again.get('metrics') if isinstance(again, dict) else again!r}",
            )
        with rules.part("an empty query set"):
            empty = evaluator.evaluate(job, KitQuerySet(qset.name))
            rules.expect(
                isinstance(empty, dict) and empty.get("queries") == 0 and empty.get("per_query") == [],
                "a set of no queries gives a report of no queries (and no error)",
                repr(empty)[:200],
            )


def _check_report(rules: Rules, report: Any, names: list[str], qset: Any) -> None:
    rules.require(isinstance(report, dict), "evaluate returns a dict", repr(type(report)))
    missing = [k for k in ("set", "queries", "metrics", "per_query") if k not in report]
    rules.require(not missing, "the report has set, queries, metrics and per_query", f"missing {missing}")
    rules.expect(report["set"] == qset.name, "`set` names the query set", repr(report["set"]))
    n = len(qset.queries)
    rules.expect(report["queries"] == n, "`queries` counts the queries", f"{report['queries']} for {n}")
    metrics = report["metrics"]
    rules.require(isinstance(metrics, dict), "`metrics` maps names to values", repr(metrics))
    rules.expect(list(metrics) == names, "`metrics` holds metric_names(), in order", f"{list(metrics)} vs {names}")
    rows = report["per_query"]
    rules.require(isinstance(rows, list) and len(rows) == n, "`per_query` has one row per query", f"{len(rows)}")
    for name in names:
        values = [r.get(name) for r in rows]
        rules.expect(
            all(isinstance(v, int | float) and math.isfinite(v) for v in values),
            "each per_query row holds each metric, a number",
            f"{name}: {values}",
        )
        if name in metrics and values and all(isinstance(v, int | float) for v in values):
            mean = sum(values) / len(values)
            rules.expect(
                abs(float(metrics[name]) - mean) <= 1e-4 * max(1.0, abs(mean)),
                "each metric is the mean of its per_query values",
                f"{name}: {metrics[name]}, the rows' mean {mean}",
            )
    try:
        json.dumps(report)
    except (TypeError, ValueError) as err:
        rules.expect(False, "the report is JSON (plm run writes it)", f"{err}")


# ---------------------------------------------------------------------- reporters
def _run(label: str, hits: list[float], ranks: list[float]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [
        {"query_id": f"q{i}", "query": f"query {i}", "relevant": [f"d{i}"], "Hit@1": h, "MRR": r}
        for i, (h, r) in enumerate(zip(hits, ranks, strict=True))
    ]
    metrics = {m: sum(r[m] for r in rows) / len(rows) for m in ("Hit@1", "MRR")}
    return {"job": label, "sets": [{"set": "plm-testing", "queries": len(rows), "metrics": metrics, "per_query": rows}]}


RUNS = [
    ("baseline", _run("baseline", [1, 0, 1, 0, 1, 0, 0, 1], [1, 0.5, 1, 0.25, 1, 0, 0.5, 1])),
    ("candidate", _run("candidate", [1, 1, 1, 0, 1, 1, 0, 1], [1, 1, 1, 0.5, 1, 1, 0.5, 1])),
]


def check_reporter(
    reporter: Reporter, runs: Sequence[tuple[str, Mapping[str, Any]]] | None = None, folder: Path | str | None = None
) -> None:
    """`runs`: (label, run report) per config, the baseline first (default `RUNS`: two
    configs on one set of eight queries, as `plm run` reports them: `sets`, each an
    evaluator's report); `folder`: where `write` puts its files (default: a temporary
    folder). `compare` gives a JSON comparison, the same every time, and leaves the runs as
    they were; `write` returns name -> path, each a file or folder it wrote inside `folder`,
    and can write into a folder it wrote before."""
    made = folder is None
    out = Path(tempfile.mkdtemp(prefix="plm-testing-")) if folder is None else Path(folder)
    try:
        with checking("reporters") as rules:
            given = list(runs if runs is not None else RUNS)
            kept = copy.deepcopy(given)
            comparison = reporter.compare(given)
            rules.require(isinstance(comparison, dict), "compare returns a dict", repr(type(comparison)))
            rules.expect(given == kept, "compare leaves the runs as they were")
            try:
                json.dumps(comparison)
            except (TypeError, ValueError) as err:
                rules.expect(False, "the comparison is JSON", f"{err}")
            with rules.part("comparing again"):
                rules.expect(reporter.compare(copy.deepcopy(kept)) == comparison, "the same runs, the same comparison")
            for attempt in ("a new folder", "the same folder again"):
                with rules.part(f"writing into {attempt}"):
                    _check_written(rules, reporter.write(comparison, out), out)
    finally:
        if made:
            shutil.rmtree(out, ignore_errors=True)


def _check_written(rules: Rules, files: Any, folder: Path) -> None:
    rules.require(isinstance(files, Mapping) and files, "write returns its files, name -> path", repr(files))

    def paths(value: Any) -> list[Path]:
        if isinstance(value, Mapping):
            return [p for v in value.values() for p in paths(v)]
        if isinstance(value, list | tuple):
            return [p for v in value for p in paths(v)]
        return [Path(value)] if isinstance(value, str | Path) else []

    found = paths(files)
    rules.expect(found, "write returns paths", repr(files))
    root = folder.resolve()
    for path in found:
        rules.expect(path.exists(), "each path write returns exists", str(path))
        rules.expect(path.resolve().is_relative_to(root), "write writes inside the folder it is given", str(path))
