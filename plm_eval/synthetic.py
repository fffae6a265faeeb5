"""Synthetic judged queries for a corpus nobody has labelled (`plm eval --synthetic N`).

The registered query generators (family `query_generators`) each propose queries made from
the corpus itself (a heading for its section, a sentence for its passage, a link's sentence
for the page it points to), each judged relevant to one document. Here N are drawn (seeded,
shared equally among the generators, one query per target document), and the corpus is
rewritten so that no query can be found as a copy of the text searched: every span a query
was copied from (`SyntheticQuery.remove`) and every verbatim occurrence of the query itself
(case and punctuation aside, as a tokenizer sees it) are cut from every document. The result
is a BEIR-layout folder (corpus.jsonl, queries/synthetic.jsonl, qrels/synthetic.tsv and
synthetic.json saying how it was made) that `plm eval` evaluates like any judged set and
that can be inspected, edited or evaluated again.

A generator takes settings as any stage does (its Config), given on the command line as
`--generator-option NAME.KEY=VALUE` (e.g. `llm.model=llama3.2` for the `llm` generator, which
asks a chat endpoint and is never in the default set); synthetic.json records every
generator's settings.

The default generators need structure (titles or headings, sentence marks, links). On text
with none (abstracts without titles, tickets, transcripts) they make no query, and the
default falls back to `spans` (a run of words taken out of each document), which needs
none; synthetic.json says so (`fallback`). Generators named with `--generators` never fall
back: their empty result is an error that names `spans`.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from plm.evaluation import QueryGenerator, SyntheticQuery
from plm.synthetic import leaks, normalized, rewrite
from plm_core.config import JobConfig, format_validation, parse_override
from plm_core.errors import ConfigError, PlmUserError
from plm_core.interfaces import Loader
from plm_core.records import Document
from plm_core.registry import Registry

SET_NAME = "synthetic"
DEFAULT_GENERATORS = ("headings", "inverse_cloze", "links")
# What the default generators fall back to when they make no query: needs no structure.
FALLBACK_GENERATORS = ("spans",)
# `--generator-option` of `plm eval` and `plm tune`, one declaration for both commands.
GeneratorOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--generator-option",
        help="NAME.KEY=VALUE: a setting of one of --generators, e.g. llm.model=llama3.2 (repeat it; "
        "`plm plugins show NAME` lists the keys).",
    ),
]
# The loader the rewritten corpus is read with (any config's loader gave these documents).
LOADER_OVERRIDE = 'index.load={use="beir_corpus"}'
_WORD = re.compile(r"\w+")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyntheticSet:
    queries: list[tuple[str, SyntheticQuery]]  # (query id, query)
    documents: list[Document]  # the corpus as it is searched: every copied span cut
    candidates: dict[str, int]  # generator -> how many queries it proposed
    changed: int  # documents whose text the cut changed
    fallback: tuple[str, ...] = ()  # the generators used because the ones asked made no query


def make_set(
    documents: Sequence[Document],
    generators: Sequence[QueryGenerator],
    n: int,
    seed: int = 0,
    fallback: Sequence[QueryGenerator] = (),
) -> SyntheticSet:
    """N queries drawn from the generators' proposals (equal shares; a generator that
    proposes fewer leaves its share to the others), at most one per target document, and
    the corpus rewritten so that none is found verbatim. When the generators make no query,
    the `fallback` generators make them (none: an error)."""
    if n < 1:
        raise PlmUserError("--synthetic N: N must be at least 1")
    rng = random.Random(seed)
    ids = {d.id for d in documents}
    pools: dict[str, list[SyntheticQuery]] = {}
    used: tuple[str, ...] = ()

    def propose(gens: Sequence[QueryGenerator]) -> None:
        for gen in gens:
            found = [q for q in gen.generate(documents) if q.doc_id in ids and _WORD.search(q.text)]
            rng.shuffle(found)
            pools[gen.name] = found  # type: ignore[attr-defined]

    propose(generators)
    asked = ", ".join(pools)
    if not any(pools.values()) and fallback:
        used = tuple(str(gen.name) for gen in fallback)  # type: ignore[attr-defined]
        log.warning(
            "the generators %s made no query from these %d documents (no headings, sentences or links long "
            "enough): using %s instead (runs of words taken out of each document; needs no structure)",
            asked, len(documents), ", ".join(used),
        )  # fmt: skip
        propose(fallback)
    candidates = {name: len(pool) for name, pool in pools.items()}
    if not any(pools.values()):
        raise PlmUserError(
            f"the generators {', '.join(pools)} made no query from these {len(documents)} documents "
            "(no headings, sentences or links long enough): --generators spans needs no structure (a run "
            "of words taken out of each document; one of fewer than 56 words gives none)"
        )
    chosen: list[SyntheticQuery] = []
    targets: set[str] = set()
    texts: set[str] = set()
    # Round robin: each generator in turn gives its next query for a document not yet a target.
    cursors = dict.fromkeys(pools, 0)
    while len(chosen) < n and any(cursors[g] < len(pools[g]) for g in pools):
        for g, pool in pools.items():
            while cursors[g] < len(pool):
                q = pool[cursors[g]]
                cursors[g] += 1
                key = normalized(q.text)
                if q.doc_id not in targets and key not in texts:
                    chosen.append(q)
                    targets.add(q.doc_id)
                    texts.add(key)
                    break
            if len(chosen) >= n:
                break
    rewritten, changed = rewrite(documents, chosen)
    queries = [(f"syn{i:05d}", q) for i, q in enumerate(chosen)]
    # A query that still names several documents verbatim after the cut cannot happen (the
    # cut is global); a target emptied by the cut is no test of anything: both dropped.
    by_id = {d.id: d for d in rewritten}
    queries = [(qid, q) for qid, q in queries if by_id[q.doc_id].text != "(removed)"]
    return SyntheticSet(queries, rewritten, candidates, changed, used)


def write_set(synthetic: SyntheticSet, folder: Path, about: dict[str, Any]) -> Path:
    """The set as a BEIR dataset folder; returns the folder."""
    (folder / "queries").mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in synthetic.documents:
            record: dict[str, Any] = {"_id": d.id, "title": d.title, "text": d.text}
            if d.metadata:
                record["metadata"] = json.loads(json.dumps(dict(d.metadata), default=str))
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    with (folder / "queries" / f"{SET_NAME}.jsonl").open("w", encoding="utf-8") as f:
        for qid, q in synthetic.queries:
            row = {"_id": qid, "text": q.text, "kind": q.kind, "target": q.doc_id, "source": q.source_doc}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (folder / "qrels" / f"{SET_NAME}.tsv").open("w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, q in synthetic.queries:
            f.write(f"{qid}\t{q.doc_id}\t1\n")
    kinds: dict[str, int] = {}
    for _, q in synthetic.queries:
        kinds[q.kind] = kinds.get(q.kind, 0) + 1
    summary = {
        **about,
        "queries": len(synthetic.queries),
        "by_generator": kinds,
        "candidates": synthetic.candidates,
        "documents": len(synthetic.documents),
        "documents_cut": synthetic.changed,
        **({"fallback": list(synthetic.fallback)} if synthetic.fallback else {}),
        "how": (
            "synthetic judgments: each query was made from the corpus by a generator and is judged relevant "
            "to one document (grade 1); the text it was copied from, and every verbatim copy of the query, "
            "were removed from every document before indexing"
        ),
    }
    (folder / "synthetic.json").write_text(json.dumps(summary, indent=1))
    return folder


def load_documents(config: JobConfig, source: Path, registry: Registry, settings: Any) -> list[Document]:
    """The documents the config's loader reads from `source`, as an ingest would read them."""
    from plm_index.assembly import Assembler

    spec = next((s for s in config.index if isinstance(s.cls, type) and issubclass(s.cls, Loader)), None)
    if spec is None:
        raise PlmUserError(f"{config.path}: no [index.load] loader to read the corpus with")
    loader = Assembler(config, registry, settings, source).build(spec)
    docs, failures = loader.load(str(source))
    if not docs:
        raise PlmUserError(f"{source}: the loader of {config.path} read no document ({len(failures)} failed)")
    return list(docs)


def generator_options(assignments: Sequence[str], names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`--generator-option NAME.KEY=VALUE` (repeated) -> {name: {key: value}}; a value is read
    as `--set` reads one (a number, true/false, a TOML array or table, else a string)."""
    options: dict[str, dict[str, Any]] = {}
    for assignment in assignments:
        try:
            keys, value = parse_override(assignment)
        except ConfigError:
            keys, value = [], None
        if len(keys) != 2 or not all(keys):
            raise PlmUserError(f"--generator-option {assignment!r}: expected NAME.KEY=VALUE, e.g. llm.model=llama3.2")
        name, key = keys
        if name not in names:
            raise PlmUserError(
                f"--generator-option {assignment!r}: {name!r} is not among --generators ({', '.join(names)})"
            )
        options.setdefault(name, {})[key] = value
    return options


def generators_named(
    names: Sequence[str], registry: Registry, options: Mapping[str, Mapping[str, Any]] | None = None
) -> list[QueryGenerator]:
    """The named generators, each built with its options and checked (one line if wrong)."""
    made = []
    for name in names:
        cls: Any = registry.get(name, "query_generators").cls
        try:
            gen = cls(**dict((options or {}).get(name, {})))
        except ValidationError as err:
            raise ConfigError(
                format_validation(err, f"query generator {name!r} (--generator-option {name}.KEY=VALUE)", cls.Config)
            ) from None
        gen.check()
        made.append(gen)
    return made


def generator_config(generators: Sequence[QueryGenerator]) -> dict[str, dict[str, Any]]:
    """Every generator's settings, defaults included (what synthetic.json records)."""
    return {str(gen.name): gen.config.model_dump(mode="json") for gen in generators}  # type: ignore[attr-defined]


def options_line(options: Mapping[str, Mapping[str, Any]], name: str) -> str:
    """What a generator was given, as " (model=llama3.2, base_url=...)"; "" when nothing."""
    given = options.get(name) or {}
    shown = [f"{k}={str(v)[:60] + '...' if len(str(v)) > 60 else v}" for k, v in given.items()]
    return f" ({', '.join(shown)})" if shown else ""


def build(
    config: JobConfig,
    source: Path,
    folder: Path,
    n: int,
    names: Sequence[str],
    registry: Registry,
    settings: Any,
    seed: int = 0,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Generate, rewrite and write a synthetic set from the config's corpus; the folder and its
    summary. `options`: each generator's settings by name (`generator_options`). The default
    generators fall back to `FALLBACK_GENERATORS` when they make no query; others never do."""
    generators = generators_named(names, registry, options)  # a wrong option fails before the corpus is read
    fallback = generators_named(FALLBACK_GENERATORS, registry) if tuple(names) == DEFAULT_GENERATORS else []
    documents = load_documents(config, source, registry, settings)
    synthetic = make_set(documents, generators, n, seed, fallback)
    bad = leaks(synthetic.queries, synthetic.documents)
    if bad:  # the cut is global: a leak here is a bug, never a result to report
        raise AssertionError(f"synthetic queries still found verbatim in the corpus: {bad[:5]}")
    about = {
        "folder": str(folder),
        "corpus": str(source),
        "config": str(config.path),
        "generators": list(names),
        "generator_options": {name: dict(given) for name, given in (options or {}).items()},
        "generator_config": generator_config([*generators, *(fallback if synthetic.fallback else [])]),
        "seed": seed,
        "asked": n,
    }
    write_set(synthetic, folder, about)
    return folder, json.loads((folder / "synthetic.json").read_text())
