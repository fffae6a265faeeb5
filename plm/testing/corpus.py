"""What the checks run stages on: a small corpus of chunks (ties, metadata for filters, an
empty text), its bag-of-words vectors, Markdown documents, and in-memory stand-ins for what
the runtime hands a stage: a `plm.Snapshot` with a change feed and a `plm.Corpus`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plm_core.records import Chunk, CorpusVersion, Document, EmbeddedQuery, Hit, ScoredChunk

VOCAB = "pod node memory pending ready deployment replica service traffic cpu autoscaler limits".split()
TEXTS = [
    "the pod is pending because the node has no memory",
    "the node is ready and the pod runs",
    "a deployment manages replica sets of the pod",
    "the service routes traffic to the pod on the node",
    "pod memory limits",
    "pod memory limits",  # the same text as the row before: a tie
    "configure the autoscaler for cpu",
    "",
]
META: list[dict[str, Any]] = [
    {"team": "a", "n": 1, "tags": ["x", "y"]},
    {"team": "b", "n": 2},
    {"team": "a", "n": 3, "when": "2024-05-01"},
    {"team": "b", "n": 4, "tags": ["y"]},
    {"team": "a", "n": 5},
    {"team": "b", "n": 6},
    {"n": 7},
    {"team": "a"},
]
CHUNKS = [
    Chunk(id=f"c{i}", doc_id=f"d{i // 2}", text=t, start_char=0, end_char=len(t), metadata=META[i])
    for i, t in enumerate(TEXTS)
]
QUERIES = ["pod memory", "node", "deployment replica", "nothing matches this"]
MODEL = "plm-testing-bag-of-words"


def embed(texts: Sequence[str]) -> Any:
    """Bag-of-words vectors over the checks' vocabulary, L2-normalised (float32): equal texts
    give equal vectors, texts sharing words give close ones."""
    rows = np.array([[t.lower().split().count(w) for w in VOCAB] for t in texts], dtype=np.float32) + 1e-3
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def query(text: str, k: int = 10) -> EmbeddedQuery:
    """A query with its text and its vector, so lexical and dense retrievers both read it."""
    return EmbeddedQuery(text=text, original=text, k=k, vector=embed([text])[0], model=MODEL)


class MemorySnapshot:
    """One state of a corpus held in memory, with a change feed (`plm.Snapshot`): rows are
    (seq, order key, chunk, vector); `removed` is (position removed at, seq)."""

    def __init__(self, rows: Sequence[tuple[int, int, Chunk, Any]], removed: Sequence[tuple[int, int]], position: int):
        self._rows = sorted(rows, key=lambda r: r[1])  # index order
        self._removed = list(removed)
        self.position = position
        self.version = CorpusVersion("plm-testing", position, f"n{position}")
        self.chunks = [r[2] for r in self._rows]
        self.chunk_ids: Sequence[str] = [c.id for c in self.chunks]
        self.index_texts = [c.index_text for c in self.chunks]
        self.metadata = [dict(c.metadata) for c in self.chunks]
        self.n_chunks = len(self.chunks)
        dim = len(VOCAB)
        self.vectors = np.array([r[3] for r in self._rows], dtype=np.float32).reshape(-1, dim)
        self.vectors_model: str | None = MODEL
        self.model: str | None = None
        self.location = "(memory)"

    @property
    def empty(self) -> bool:
        return self.n_chunks == 0

    def _since(self, position: int) -> list[tuple[int, int, Chunk, Any]]:
        return sorted((r for r in self._rows if r[0] > position), key=lambda r: r[0])

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        rows = self._since(position)
        return [r[0] for r in rows], [r[2].id for r in rows], [r[1] for r in rows], [r[2].index_text for r in rows]

    def removed_since(self, position: int) -> list[int] | None:
        return sorted(seq for at, seq in self._removed if at > position and seq <= position)

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        rows = self._since(position)
        return [r[0] for r in rows], np.array([r[3] for r in rows], np.float32).reshape(-1, len(VOCAB)), MODEL


class Feed:
    """A corpus changing over time, as a store's change feed records it."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[int, int, Chunk, Any]] = {}
        self.removed: list[tuple[int, int]] = []
        self.position = 0

    def add(self, chunk: Chunk, order: int) -> None:
        self.remove(chunk.id)
        self.position += 1
        self.rows[chunk.id] = (self.position, order, chunk, embed([chunk.index_text])[0])

    def remove(self, chunk_id: str) -> None:
        if chunk_id in self.rows:
            self.position += 1
            self.removed.append((self.position, self.rows.pop(chunk_id)[0]))

    def snapshot(self) -> MemorySnapshot:
        return MemorySnapshot(list(self.rows.values()), self.removed, self.position)


def snapshot_of(chunks: Sequence[Chunk]) -> MemorySnapshot:
    feed = Feed()
    for i, chunk in enumerate(chunks):
        feed.add(chunk, i)
    return feed.snapshot()


class MemoryCorpus:
    """The chunk rows a retrieval stage searches (`plm.Corpus`), held in memory: filter
    masks by `plm.compile_filters`, hits looked up by chunk id (ranks from 1)."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = list(chunks)
        self.by_id = {c.id: c for c in self.chunks}

    def allowed(self, filters: Mapping[str, Any] | None) -> tuple[Any, int]:
        from plm_index.filters import compile_filters

        keep = compile_filters(filters) if filters else None
        if keep is None:
            return None, len(self.chunks)
        mask = np.array([bool(keep(c.metadata)) for c in self.chunks], dtype=bool)
        return mask, int(mask.sum())

    def hits(self, ranked: Sequence[ScoredChunk], sources: Mapping[str, Sequence[ScoredChunk]]) -> tuple[Hit, ...]:
        from plm_core.records import SourceScore

        found = {label: {s.chunk_id: s for s in hits} for label, hits in sources.items()}
        out = []
        for rank, scored in enumerate(ranked):
            chunk = self.by_id[scored.chunk_id]
            out.append(
                Hit(
                    chunk_id=chunk.id,
                    doc_id=chunk.doc_id,
                    score=scored.score,
                    rank=rank + 1,
                    text=chunk.text,
                    metadata=chunk.metadata,
                    sources={
                        label: SourceScore(rank=by[chunk.id].rank + 1, score=by[chunk.id].score)
                        for label, by in found.items()
                        if chunk.id in by
                    },
                )
            )
        return tuple(out)


# A small Markdown corpus for query generators, chunkers and loaders: titles, headings at
# several levels, prose with sentences long enough to be queries, links between the pages
# (site paths and relative ones), a heading two pages share, front matter and a code block.
MARKDOWN_DOCS = (
    Document(
        id="concepts_pods",
        title="Pods",
        text="---\ntitle: Pods\n---\n# Pods\n\nA pod is the smallest deployable unit of computing that you can "
        "create and manage in the cluster. Pods hold one or more containers that share storage and network "
        "resources. Each pod is scheduled onto a node by the scheduler, which weighs resource requests.\n\n"
        "## Pod lifecycle and restart policy\n\nA pod moves through pending, running and succeeded phases "
        "while its containers start and stop. You can read about [how services expose pods](/docs/concepts/"
        "services/) to clients outside the cluster when they need a stable address.\n\n## Overview\n\n"
        "```\nkubectl get pods --all-namespaces\n```\n",
    ),
    Document(
        id="concepts_services",
        title="Services and stable network addresses",
        text="# Services and stable network addresses\n\nA service gives a set of pods one stable virtual "
        "address and a DNS name, and balances connections across them. Clients talk to the service, not to "
        "pods, which come and go as deployments roll out new versions. Selectors decide which pods a "
        "service sends traffic to.\n\n## Overview\n\nEvery workload in the [pod documentation](../pods/) "
        "can be reached through a service once labels match its selector in the namespace.\n",
    ),
    Document(
        id="concepts_storage",
        title="Volumes keep data across container restarts",
        text="# Volumes keep data across container restarts\n\nOn-disk files in a container are lost when "
        "the container crashes or is stopped by the kubelet. A volume outlives the containers of a pod, and "
        "persistent volumes outlive the pod itself. Storage classes describe the kinds of storage a cluster "
        "offers to claims made by workloads.\n\n### Mounting a volume read only\n\nMount a volume read "
        "only when the containers in the [pod](/docs/concepts/pods/) should never change its files.\n",
    ),
)
