"""Writes docs/contracts/: one page per family of stage, made from its base class in
`plm_core/interfaces.py` or `plm/evaluation.py` (and the index and store bases it builds
on): what goes in and out, each method's signature and docstring (what a plugin must
write, what it may override), the TOML slot, a short example and the conformance check,
if there is one.

    python docs/contracts.py          # rewrite the pages
    python docs/contracts.py --check  # exit 1 if a page is not what the code makes

tests/test_contract_pages.py runs the check, so a page never drifts from the code, and
runs every example, so each one is a class its base accepts.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any, get_args, get_origin

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "contracts"

# By base class (a family label may change): the TOML that puts such a stage in a config,
# the one thing the code cannot say.
SLOTS = {
    "Loader": '[index.load]\nuse = "markdown_dir"',
    "Converter": "# not a config slot: the `folder` loader gives each file to the converter of its extension;\n"
    '# settings, by converter name, go in its table\n[index.load]\nuse = "folder"\n'
    'converters = { csv_rows = { delimiter = ";" } }',
    "Chunker": '[index.chunk]\nuse = "markdown_semantic"',
    "ChunkTransform": '[index.keywords]         # any [index.*] table after the chunker, run in order\nuse = "yake"',
    "Embedder": '[embedder]              # shared by indexing and querying\nuse = "sentence_transformers"',
    "Tokenizer": '[query.retrieve]\nuse = "bm25s"\ntokenizer = "snowball"\n# or, with settings, a table:\n'
    '# tokenizer = { use = "snowball", language = "porter" }',
    "QueryExpander": '[query.expand]\nuse = "dictionary"',
    "QueryGenerator": "# not a config slot: chosen on the command line, its settings there too\n"
    "# plm eval -c recipe.toml --synthetic 300 --generators headings,inverse_cloze\n"
    "# plm eval -c recipe.toml --synthetic 300 --generators llm \\\n"
    "#     --generator-option llm.base_url=http://127.0.0.1:11434/v1 --generator-option llm.model=llama3.2",
    "Retriever": '[query.retrieve]        # the whole stage, or one of hybrid\'s:\nuse = "bm25s"            '
    "# [query.retrieve.retrievers.bm25]",
    "Fuser": '[query.retrieve]\nuse = "hybrid"\n[query.retrieve.fuser]\nuse = "rrf"',
    "Retrieval": "[query.retrieve]        # the stage itself (a bare retriever here is wrapped by the core)\n"
    'use = "hybrid"\n'
    '[query.retrieve.retrievers.bm25]\nuse = "bm25s"',
    "RankingStage": '[query.collapse]        # any [query.*] table after [query.retrieve]\nuse = "collapse"',
    "Reranker": '[query.rerank]          # after [query.retrieve]\nuse = "cross_encoder"',
    "Evaluator": '[job]\nevaluator = "ir_metrics"   # or a table: { use = "ir_metrics", one_ranking = true }',
    "Reporter": '[job]\nreporter = "comparison_report"   # what `plm eval` compares configs with',
    "Executor": '[executor]\nuse = "local"',
    "Store": '[store]\nuse = "sqlite"',
}

CHECKS = {
    "Loader": "plm.testing.check_loader(loader, source=None)  # default: a folder of Markdown files",
    "Converter": 'plm.testing.check_converter(converter, data, path="", unusable=None)',
    "Chunker": "plm.testing.check_chunker(chunker, documents=None)",
    "ChunkTransform": "plm.testing.check_chunk_transform(transform, chunks=None)",
    "Embedder": "plm.testing.check_embedder(embedder, texts=None, atol=1e-4)",
    "Tokenizer": "plm.testing.check_tokenizer(tokenizer, different=None)",
    "QueryExpander": "plm.testing.check_expander(expander, texts=None)",
    "QueryGenerator": "plm.testing.check_query_generator(generator, documents=None)",
    "Evaluator": "plm.testing.check_evaluator(evaluator, job=None, qset=None)  # default: the kit's job and queries",
    "Reporter": "plm.testing.check_reporter(reporter, runs=None, folder=None)",
    "Store": "plm.testing.check_store(make_store, reopen=None)  # make_store() opens one location, empty at first",
    "Retriever": "plm.testing.check_retriever(make_retriever, folder, exact=True)\n"
    "plm.testing.check_segmented_index(make_index, folder)  # a plm.SegmentedIndex",
    "Fuser": 'plm.testing.check_fuser(fuser, sources=("dense", "bm25"))',
    "Retrieval": "plm.testing.check_retrieval(stage, chunks=None)  # its parts given: the kit builds its retrievers",
    "RankingStage": "plm.testing.check_ranking_stage(stage, ranking=None)",
    "Reranker": "plm.testing.check_ranking_stage(reranker, ranking=None)  # the rankers' check covers rerankers",
    "Executor": "plm.testing.check_executor(executor, n_batches=6)",
}

# Short examples by base class, each a whole plugin class; the test runs every one.
EXAMPLES = {
    "Loader": """
class TextFiles(plm.Loader):
    name = "text_files"

    def run(self, data: str) -> list[plm.Document]:
        if not Path(data).is_dir():  # an unusable source stops the ingest before anything changes
            raise plm.PlmUserError(f"{data}: no such folder; give a folder of .txt files")
        files = sorted(Path(data).glob("*.txt"))
        return [plm.Document(id=f.stem, text=f.read_text(), path=str(f)) for f in files]
""",
    "Converter": """
class CsvRows(plm.Converter):
    name = "csv_rows"
    extensions = (".csv",)

    class Config(plm.ComponentConfig):
        delimiter: str = ","

    def convert(self, data: bytes, path: str) -> plm.Converted:
        rows = [line.split(self.config.delimiter) for line in data.decode("utf-8").splitlines()]
        if not rows:
            raise plm.PlmUserError("no rows; add a header line or move the file out of the folder")
        return plm.Converted(text="\\n".join(" | ".join(row) for row in rows), title=rows[0][0])
""",
    "Chunker": """
class Paragraphs(plm.Chunker):
    name = "paragraphs"

    def run(self, data: list[plm.Document]) -> list[plm.Chunk]:
        out = []
        for doc in data:
            lines = doc.text.split("\\n")  # markdown_dir keeps a file's front matter in its text
            body = "\\n".join(lines[plm.documents.front_matter_lines(lines) :])
            parts = [p for p in body.split("\\n\\n") if p.strip()]
            out += [plm.Chunk(id=f"{doc.id}#{i}", doc_id=doc.id, text=p) for i, p in enumerate(parts)]
        return out  # the runtime adds each document's metadata and title to its chunks
""",
    "ChunkTransform": """
class CapitalWords(plm.ChunkTransform):
    name = "capital_words"
    cache_fields = ("keywords",)  # cached by content: only new texts reach run()

    def run(self, data: list[plm.Chunk]) -> list[plm.Chunk]:
        return [replace(c, keywords=tuple(w for w in c.text.split() if w.istitle())) for c in data]
""",
    "Embedder": """
class Shape(plm.Embedder):
    name = "shape"

    @property
    def model_name(self) -> str:
        return "shape-v1"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        import numpy as np

        rows = np.array([[len(t), len(t.split()), 1.0] for t in texts], dtype=np.float32).reshape(-1, 3)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)  # no texts: a (0, 3) matrix
""",
    "Tokenizer": """
class Words(plm.Tokenizer):
    name = "words"

    class Config(plm.ComponentConfig):
        lower: bool = True

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [(t.lower() if self.config.lower else t).split() for t in texts]
""",
    "QueryGenerator": """
class LastParagraphs(plm.QueryGenerator):
    name = "last_paragraphs"

    def generate(self, documents: Sequence[plm.Document]) -> list[plm.SyntheticQuery]:
        out = []
        for doc in documents:
            rest, _, last = doc.text.strip().rpartition("\\n\\n")
            if rest and 5 <= len(last.split()) <= 40:  # the query; cut from what is searched
                out.append(plm.SyntheticQuery(last, doc.id, self.name, remove=(last,), source_doc=doc.id))
        return out
""",
    "Evaluator": """
class FirstHit(plm.Evaluator):
    name = "first_hit"

    def metric_names(self) -> list[str]:
        return ["Hit@1"]

    def evaluate(self, job: Any, qset: Any, progress: bool = False) -> dict[str, Any]:
        rows = []
        for qid, text in qset.queries.items():
            ranking, _ = job.search(plm.Query(text=text, k=1, id=qid))
            hit = float(bool(ranking.hits) and ranking.hits[0].doc_id in qset.qrels.get(qid, {}))
            rows.append({"query_id": qid, "query": text, "Hit@1": hit})
        mean = sum(r["Hit@1"] for r in rows) / len(rows) if rows else 0.0
        return {"set": qset.name, "queries": len(rows), "metrics": {"Hit@1": mean}, "per_query": rows}
""",
    "Reporter": """
class MeanTable(plm.Reporter):
    name = "mean_table"

    def compare(self, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        return {label: {s["set"]: s["metrics"] for s in run["sets"]} for label, run in runs}

    def write(self, comparison: Mapping[str, Any], out_dir: Any, top: int = 10, metric: str | None = None) -> dict:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "means.json"
        path.write_text(json.dumps(comparison, indent=1))
        return {"means": path}
""",
    "QueryExpander": """
class Synonyms(plm.QueryExpander):
    name = "synonyms"

    class Config(plm.ComponentConfig):
        words: dict[str, str] = {"k8s": "kubernetes"}

    def run(self, data: plm.Query) -> plm.ExpandedQuery:
        more = [self.config.words[w] for w in data.text.split() if w in self.config.words]
        query = plm.ExpandedQuery.of(data)
        return replace(query, text=" ".join([query.text, *more]), fired=tuple(more))
""",
    "Retriever": """
class WordOverlap(plm.Retriever, plm.SavedIndex):
    name = "word_overlap"

    def index(self, snapshot: plm.Snapshot) -> None:
        self.ids = list(snapshot.chunk_ids)
        self.words = [set(t.lower().split()) for t in snapshot.index_texts]

    def save(self, folder: Path) -> None:
        (folder / "words.json").write_text(json.dumps([self.ids, [sorted(w) for w in self.words]]))

    def open_saved(self, folder: Path, snapshot: plm.Snapshot) -> None:
        ids, words = json.loads((folder / "words.json").read_text())
        self.ids, self.words = ids, [set(w) for w in words]

    def search(self, query: plm.ExpandedQuery, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
        import numpy as np

        wanted = set(query.text.lower().split())
        scores = np.array([len(wanted & w) for w in self.words], dtype=np.float64)
        return plm.top_n(scores, n, self.ids, self.label, allowed, drop_zero=True)
""",
    "Fuser": """
class SumOfReciprocalRanks(plm.Fuser):
    name = "sum_rr"

    def settings_for(self, query: plm.ExpandedQuery, n_chunks: int) -> plm.FusionConfig:
        return plm.FusionConfig(candidates=min(n_chunks, 10 * query.depth))

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        scores: dict[str, float] = {}
        for hits in rankings.values():
            for hit in hits:
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (60 + hit.rank)
        best = sorted(scores.items(), key=lambda item: item[1], reverse=True)
        return [plm.ScoredChunk(c, s, "fused", rank) for rank, (c, s) in enumerate(best)]
""",
    "Retrieval": """
class BestOfEach(plm.Retrieval):
    \"\"\"Each retriever's best hits in turn (a parts table names the retrievers, as hybrid's).\"\"\"

    name = "best_of_each"
    needs = ("corpus",)  # the runtime sets `corpus`: filter masks, and hits from chunk ids
    parts = {"retrievers": plm.Retriever}
    corpus: plm.Corpus
    retrievers: dict[str, plm.Retriever]

    class Config(plm.ComponentConfig):
        retrievers: dict[str, dict] = {}  # the runtime builds each table into `retrievers`

    def run(self, data: plm.ExpandedQuery) -> plm.Ranking:
        allowed, n_rows = self.corpus.allowed(data.filters)
        rankings = {label: r.search(data, min(data.depth, n_rows), allowed) for label, r in self.retrievers.items()}
        seen: dict[str, plm.ScoredChunk] = {}
        for hits in zip(*rankings.values()):
            for hit in hits:
                seen.setdefault(hit.chunk_id, replace(hit, rank=len(seen)))
        found = list(seen.values())[: data.depth]
        return plm.Ranking(query=data, hits=self.corpus.hits(found, rankings))
""",
    "RankingStage": """
class MinScore(plm.RankingStage):
    name = "min_score"

    class Config(plm.ComponentConfig):
        at_least: float = 0.0

    def run(self, data: plm.Ranking) -> plm.Ranking:
        kept = [h for h in data.hits if h.score >= self.config.at_least]
        return replace(data, hits=tuple(replace(h, rank=i + 1) for i, h in enumerate(kept)))
""",
    "Reranker": """
class ShortFirst(plm.Reranker):
    name = "short_first"

    def depth(self, k: int) -> int:
        return max(k, 20)  # rescore the top 20, whatever k is

    def run(self, data: plm.Ranking) -> plm.Ranking:
        return plm.rescore(data, [h.score - 0.001 * len(h.text) for h in data.hits], self.label)
""",
    "Executor": """
class InOrder(plm.Executor):
    name = "in_order"

    def process(self, batches, local, recipe, read_cache):  # type: ignore[no-untyped-def]
        for batch in batches:
            yield local.process(batch, read_cache)
""",
    "Store": """
# A store writes every method above (21): see DictStore in tests/support/dict_store.py (a
# store in a few dicts, change feed included, in about 180 lines) and plm_plugins/stores/sqlite.py.
# Prove it in the package's own tests:
def test_my_store_keeps_the_store_contract(tmp_path):
    def make_store():  # each call opens the same folder: the kit closes the store and reopens it
        store = MyStore()
        store.open(str(tmp_path / "store"))
        return store

    plm.testing.check_store(make_store)
""",
}
GENERATED = "<!-- made by docs/contracts.py from the family bases: edit the code, then rerun it -->"
EXAMPLE_IMPORTS = "import json\nfrom collections.abc import Mapping, Sequence\nfrom dataclasses import replace\n"
EXAMPLE_IMPORTS += "from pathlib import Path\nfrom typing import Any\n\nimport plm\nimport plm.testing\n"


def _imports_of(example: str) -> str:
    """The lines of EXAMPLE_IMPORTS an example uses (`import plm` always), as its page shows
    them: the example can be copied as it stands."""
    used = []
    for line in EXAMPLE_IMPORTS.splitlines():
        names = line.split(" import ")[-1].replace("import ", "").split(", ")
        if line and (line == "import plm" or any(re.search(rf"\b{re.escape(n)}\b", example) for n in names)):
            used.append(line)
    stdlib = [line for line in used if not line.startswith("import plm")]
    return (
        "\n".join(stdlib)
        + ("\n\n" if stdlib else "")
        + "\n".join(line for line in used if line not in stdlib)
        + "\n\n\n"
    )


def families() -> list[tuple[type, list[type]]]:
    """Each family's base (`plm.<Base>`) with the bases it is written against."""
    import plm
    from plm_core import store_contract

    parts = [store_contract.DocumentStore, store_contract.ChunkReader, store_contract.VectorStore]
    return [
        (plm.Loader, []),
        (plm.Converter, []),
        (plm.Chunker, []),
        (plm.ChunkTransform, []),
        (plm.Embedder, []),
        (plm.Tokenizer, []),
        (plm.QueryExpander, []),
        (plm.QueryGenerator, []),
        (plm.Evaluator, []),
        (plm.Reporter, []),
        (plm.Retriever, [plm.Index, plm.SavedIndex, plm.SegmentedIndex]),
        (plm.Fuser, []),
        (plm.Retrieval, []),
        (plm.RankingStage, []),
        (plm.Reranker, []),
        (plm.Executor, []),
        (plm.Store, [*parts, store_contract.StoreDiagnostics]),
    ]


def _in_out(base: type) -> tuple[str, str] | None:
    from plm_core.component import BaseComponent, type_name

    for cls in base.__mro__:
        for orig in getattr(cls, "__orig_bases__", ()):
            if get_origin(orig) is BaseComponent:
                a, b = get_args(orig)
                return type_name(a), type_name(b)
    return None


def _members(cls: type) -> list[tuple[str, Any]]:
    """The methods and properties a class declares, and those it inherits from a family it
    nests in (`Reranker`'s `run` and `depth` are `RankingStage`'s), not BaseComponent's."""
    from plm_core.component import BaseComponent

    found: dict[str, Any] = {}
    families = [k for k in cls.__mro__ if issubclass(k, BaseComponent) and k is not BaseComponent]
    for klass in families if issubclass(cls, BaseComponent) else [cls]:
        for name, value in vars(klass).items():
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)):
                found.setdefault(name, value)
    return list(found.items())


def _doc(value: Any) -> str:
    func = value.fget if isinstance(value, property) else value
    return inspect.cleandoc(func.__doc__ or "").replace("\n", " ")


def _section(cls: type, heading: str, with_doc: bool) -> list[str]:
    from plm_core.component import signature

    lines = [f"## {heading}", ""]
    if cls.__doc__ and with_doc:
        lines += [inspect.cleandoc(cls.__doc__), ""]
    attrs = [
        f"`{k} = {v!r}`"
        for k, v in vars(cls).items()
        if not k.startswith("_") and k not in ("input_type", "output_type") and isinstance(v, str | bool | tuple)
    ]
    if attrs:
        lines += ["Class attributes: " + ", ".join(attrs) + ".", ""]
    for kind, abstract in (("Must write", True), ("Provided (override to change it)", False)):
        found = [(n, v) for n, v in _members(cls) if bool(getattr(v, "__isabstractmethod__", False)) == abstract]
        if found:
            lines += [f"**{kind}:**", ""]
            for name, value in found:
                sig = signature(cls, name).rsplit(" (from ", 1)[0]
                lines.append(f"- `{sig}`" + (f": {_doc(value)}" if _doc(value) else ""))
            lines.append("")
    return lines


def page(base: type, also: list[type]) -> str:
    family = str(base.family)  # type: ignore[attr-defined]
    lines = [f"# {family}: `plm.{base.__name__}`", "", inspect.cleandoc(base.__doc__ or ""), ""]
    lines += [GENERATED, ""]
    io = _in_out(base)
    if io is not None and io != ("object", "object"):
        lines += [f"**In:** `{io[0]}` &nbsp; **Out:** `{io[1]}` (a stage's `run(data)`)", ""]
    lines += ["**In a config:**", "", "```toml", SLOTS[base.__name__], "```", ""]
    lines += _section(base, f"`plm.{base.__name__}`", with_doc=False)
    for part in also:
        # the store's parts are not names a plugin imports: `plm.Store` holds them all
        title = (
            f"`plm.{base.__name__}`: {part.__name__}"
            if part.__module__ == "plm_core.store_contract"
            else f"`plm.{part.__name__}`"
        )
        lines += _section(part, title, with_doc=True)
    example = EXAMPLES[base.__name__].strip()
    lines += ["## Example", "", "```python", _imports_of(example) + example, "```", ""]
    lines += ["## Prove it", ""]
    if base.__name__ in CHECKS:
        lines += ["In the plugin's own tests (`import plm.testing`; `help(plm.testing)` lists every check):", ""]
        lines += ["```python", CHECKS[base.__name__], "```", ""]
    else:
        lines += ["No check of its own: `plm.testing.check_stage(stage, inputs)` checks any stage.", ""]
    lines += ["A missing method fails when the class is defined, with its signature and this page.", ""]
    return "\n".join(lines)


def index(pages: dict[str, str]) -> str:
    lines = [
        "# Contracts",
        "",
        "One page per family of stage: the base class a plugin subclasses (all from `import plm`),",
        "what goes in and out, each method to write or override, the TOML slot, an example and",
        "the conformance check. Generated from the family base classes by `docs/contracts.py`;",
        "[Writing a plugin](../plugins.md) walks through one.",
        "",
        "| family | base | what it does |",
        "|---|---|---|",
    ]
    for base, _ in families():
        first = inspect.cleandoc(base.__doc__ or "").replace("\n", " ").split(". ")[0].split(": ")[0]
        lines.append(f"| [{base.family}]({base.family}.md) | `plm.{base.__name__}` | {first.rstrip('.')} |")  # type: ignore[attr-defined]
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    made = {f"{base.family}.md": page(base, also) for base, also in families()}  # type: ignore[attr-defined]
    return {"index.md": index(made), **made}


def main(argv: list[str]) -> int:
    made = pages()
    if "--check" in argv:
        stale = [n for n, text in made.items() if not (OUT / n).is_file() or (OUT / n).read_text() != text]
        extra = [p.name for p in OUT.glob("*.md") if p.name not in made]
        if stale or extra:
            print(f"docs/contracts/ is out of date ({stale + extra}): run python docs/contracts.py")
            return 1
        return 0
    OUT.mkdir(exist_ok=True)
    for p in OUT.glob("*.md"):
        if p.name not in made:
            p.unlink()
    for name, text in made.items():
        (OUT / name).write_text(text)
    print(f"wrote {len(made)} pages under {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
