"""The evaluation families, on the face and out of the kernel: what `plm eval` draws
synthetic queries with (`QueryGenerator`, making `SyntheticQuery` records), scores a query
set with (`Evaluator`, `[job] evaluator`) and compares configs with (`Reporter`, `[job]
reporter`). Contracts only; the implementations are in plm_eval and
plm_plugins.query_generators, the rules of a synthetic query in `plm.synthetic`."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plm import BaseComponent, Document


@dataclass(frozen=True)
class SyntheticQuery:
    """A query made from the corpus itself, judged relevant to one document (`doc_id`).

    `remove`: verbatim spans of the corpus the query was copied from (a heading line, a
    sentence, the sentence holding a link); the evaluation removes them, and the query's own
    text, from every document it indexes, so the query is never found just because it is a
    copy of what is searched. `kind`: the generator's name; `source_doc`: the document the
    text was taken from (the target itself, or a page that links to it)."""

    text: str
    doc_id: str
    kind: str
    remove: tuple[str, ...] = ()
    source_doc: str = ""


class QueryGenerator(BaseComponent[list[Document], list[SyntheticQuery]]):
    """Documents -> synthetic judged queries (`plm eval --synthetic N`): write `generate`,
    every query this generator can make from these documents, each naming the document it
    is relevant to and the spans of text it was copied from (`SyntheticQuery.remove`: the
    evaluation deletes them, and the query itself, from the indexed corpus). Deterministic:
    the runtime draws N of them with its own seed."""

    family = "query_generators"
    input_type = list[Document]
    output_type = list[SyntheticQuery]

    @abstractmethod
    def generate(self, documents: Sequence[Document]) -> list[SyntheticQuery]:
        """Every query these documents give, in a stable order."""

    def run(self, data: list[Document]) -> list[SyntheticQuery]:
        return self.generate(data)


class Evaluator(BaseComponent[object, object]):
    """Scores a job on one judged query set (`[job] evaluator`, what `plm run` and `plm eval`
    run per set): write `evaluate`, a report holding at least `set`, `queries`, `metrics`
    (name -> the mean over the queries) and `per_query` (one row per query, with each metric),
    and `metric_names`, the metrics it reports, in order."""

    family = "evaluators"

    @abstractmethod
    def evaluate(self, job: Any, qset: Any, progress: bool = False) -> dict[str, Any]:
        """Run `qset` (a plm_eval QuerySet: queries and qrels) through `job` (its `search`)."""

    @abstractmethod
    def metric_names(self) -> list[str]:
        """The metrics `evaluate` reports, in its order (checked before any work runs)."""


class Reporter(BaseComponent[object, object]):
    """Compares the evaluation runs of several configs (`plm eval`'s report): write `compare`,
    the runs (label, `plm run` report; the baseline first) -> a JSON-ready comparison, and
    `write`, that comparison as files in a folder. Its Config may take `plm eval`'s options
    (`test`, `correction`, `n_resamples`, `n_bootstrap`, `seed`, `chart`): those it has."""

    family = "reporters"

    @abstractmethod
    def compare(self, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        """(label, run report) per config, baseline first -> the comparison."""

    @abstractmethod
    def write(
        self, comparison: Mapping[str, Any], out_dir: Any, top: int = 10, metric: str | None = None
    ) -> dict[str, Any]:
        """The comparison's files in the folder `out_dir`: name -> path."""
