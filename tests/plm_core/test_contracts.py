"""The contracts a plugin author builds on: typed slots checked by `plm config check`, a bare
retriever as the whole query stage, rerank depth for a third-party Ranking -> Ranking stage
installed with its own file and entry point, abstract methods enforced at class definition."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plm_needs import needs
from plugin_site import plugin_site

from plm_core.component import ComponentConfig
from plm_core.interfaces import Retriever

REPO = Path(__file__).resolve().parents[2]
pytestmark = needs("bm25s", extra="bm25")

BASE = """
[job]
name = "contracts"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.expand]
use = "dictionary"
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "whitespace_lower"
method = "rank_bm25_okapi"  # the POC scoring: zero-score candidates kept
[query.retrieve.fuser]
use = "rrf"
order = ["bm25"]
default = { weights = { bm25 = 1.0 } }
expanded = { weights = { bm25 = 1.0 } }
"""

TOPICS = [
    "backup restore schedule",
    "token rotation policy",
    "pod scheduling on nodes",
    "disk quota per tenant",
    "alerting on replication lag",
    "network policy for ingress",
    "cost report per team",
    "secrets in vault",
]


def plm(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=180,
    )


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, topic in enumerate(TOPICS):
        (folder / f"doc{i}.md").write_text(f"# {topic.title()}\n\nThis page covers {topic}. " * 3)
    return folder


def _config(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BROKEN = {
    "a fuser in the store slot": (
        BASE.replace('[store]\nuse = "sqlite"', '[store]\nuse = "rrf"'),
        "not a store; use one of: postgres, sqlite",
    ),
    "a keyword extractor in the chunker slot": (
        BASE.replace('use = "markdown_semantic"', 'use = "yake"'),
        "put a chunker first",
    ),
    "a dense retriever with no embedder": (
        BASE.replace(
            "[query.retrieve.fuser]", '[query.retrieve.retrievers.dense]\nuse = "dense"\n[query.retrieve.fuser]'
        )
        .replace('order = ["bm25"]', 'order = ["dense", "bm25"]')
        .replace("{ bm25 = 1.0 }", "{ bm25 = 1.0, dense = 1.0 }"),
        "[embedder]",
    ),
    "an index pipeline with no chunker": (BASE.replace('[index.chunk]\nuse = "markdown_semantic"\n', ""), "chunker"),
    "a missing expansion dictionary": (
        BASE.replace('use = "dictionary"', 'use = "dictionary"\ndictionary = "no_such_file.toml"'),
        "dictionary file not found",
    ),
    "a malformed expansion dictionary": (
        BASE.replace('use = "dictionary"', 'use = "dictionary"\ndictionary = "bad_dictionary.toml"'),
        "expected a string",
    ),
    "a retriever in the fuser slot": (
        BASE.replace('[query.retrieve.fuser]\nuse = "rrf"', '[query.retrieve.fuser]\nuse = "dense"'),
        "not a fuser; use one of: linear, rrf",
    ),
    "a query pipeline that ends in no ranking": (
        BASE.split("[query.retrieve]")[0],
        "must produce a ranking",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_config_check_rejects_with_one_paragraph(case: str, tmp_path: Path) -> None:
    text, expected = BROKEN[case]
    (tmp_path / "bad_dictionary.toml").write_text("rpo = 5\n")
    res = plm("config", "check", str(_config(tmp_path, text)))
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert expected in res.stderr, res.stderr


def test_a_bare_retriever_is_the_whole_query_stage(tmp_path: Path, docs: Path) -> None:
    text = BASE.split("[query.retrieve]")[0] + '[query.retrieve]\nuse = "bm25s"\nmethod = "lucene"\n'
    config = _config(tmp_path, text)
    index = tmp_path / "index"
    assert plm("config", "check", str(config)).returncode == 0
    assert plm("ingest", str(docs), "--config", str(config), "--index", str(index)).returncode == 0
    res = plm("query", "token rotation policy pod", "-k", "3", "--json", "--config", str(config), "--index", str(index))
    assert res.returncode == 0, res.stderr
    hits = json.loads(res.stdout)["hits"]
    assert len(hits) == 3 and hits[0]["doc_id"] == "doc1"
    assert set(hits[0]["sources"]) == {"retrieve"}
    ranks = [h["sources"]["retrieve"]["rank"] for h in hits]
    assert ranks == sorted(ranks) and hits[0]["score"] > hits[1]["score"]


PROBE = '''
"""A third-party Ranking -> Ranking stage: asks for `depth` candidates, records how many it got."""
import json
from dataclasses import replace
from pathlib import Path

from plm import ComponentConfig, hookimpl
from plm_core.interfaces import Reranker
from plm_core.records import Ranking


class DepthProbe(Reranker):
    name = "depth_probe"

    class Config(ComponentConfig):
        depth: int = 20
        log: str = ""

    def depth(self, k: int) -> int:
        return max(k, self.config.depth)

    def run(self, data: Ranking) -> Ranking:
        Path(self.config.log).write_text(json.dumps({"received": len(data.hits)}))
        hits = tuple(replace(h, rank=i) for i, h in enumerate(reversed(data.hits), 1))  # renumbered
        return Ranking(query=data.query, hits=hits, fusion=data.fusion)


@hookimpl
def plm_register_components(registry):
    registry.add(DepthProbe)
'''


def test_a_reranker_from_its_own_package_gets_depth_and_the_output_is_cut_to_k(tmp_path: Path, docs: Path) -> None:
    site = plugin_site(tmp_path / "site", "depth_probe", PROBE)
    log = tmp_path / "received.json"
    text = BASE + f'[query.rerank]\nuse = "depth_probe"\ndepth = 6\nlog = "{log.as_posix()}"\n'
    config = _config(tmp_path, text)
    env = {"PYTHONPATH": str(site)}
    index = tmp_path / "index"
    listed = plm("plugins", "--json", env=env)
    assert any(r["name"] == "depth_probe" and r["package"] == "depth-probe" for r in json.loads(listed.stdout))
    assert plm("ingest", str(docs), "--config", str(config), "--index", str(index), env=env).returncode == 0
    res = plm("query", "backup", "-k", "2", "--json", "--config", str(config), "--index", str(index), env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(log.read_text()) == {"received": 6}  # more than k reached the stage
    hits = json.loads(res.stdout)["hits"]
    assert len(hits) == 2  # the final cut to k, once, at the end


def test_a_missing_abstract_method_fails_at_class_definition() -> None:
    # the error shows the method as the base declares it, and the family's contract page
    want = (
        r"Half \('half'\) must implement \(the retrievers contract: docs/contracts/retrievers.md\):\n"
        r"  search\(self, query: ExpandedQuery, n: int, allowed: Any = None\) -> list\[ScoredChunk\] "
        r"\(from Retriever\)$"
    )
    with pytest.raises(TypeError, match=want):

        class Half(Retriever):  # noqa: F841 - defining it is the test
            name = "half"

            class Config(ComponentConfig):
                pass

            def build(self, snapshot, index_dir):  # type: ignore[no-untyped-def]
                pass

            def is_current(self, version, index_dir):  # type: ignore[no-untyped-def]
                return True

            def load(self, snapshot, index_dir):  # type: ignore[no-untyped-def]
                pass


def test_a_missing_property_and_segment_method_show_their_signatures() -> None:
    import plm

    with pytest.raises(TypeError) as err:

        class Vague(plm.Embedder):  # noqa: F841 - defining it is the test
            name = "vague"

    assert "model_name (a property) -> str (from Embedder)" in str(err.value)
    assert "embed(self, texts: Sequence[str], progress: bool = False) -> Any (from Embedder)" in str(err.value)
    assert "docs/contracts/embedders.md" in str(err.value)
    with pytest.raises(TypeError, match=r"segment_settings\(self\) -> dict\[str, Any\] \(from SegmentedIndex\)"):

        class Unsettled(plm.Retriever, plm.SegmentedIndex):  # noqa: F841
            name = "unsettled"


def test_a_chunk_reader_without_a_change_feed_says_so() -> None:
    from plm_core.store_contract import ChunkReader

    class Plain(ChunkReader):  # the abstract reads only: a third-party store of before the feed
        chunk_ids = chunks = chunk_metadata = lambda self: []  # type: ignore[assignment]  # noqa: E731
        get_chunks = filter_mask = lambda self, _: {}  # type: ignore[assignment]  # noqa: E731

    reader = Plain()
    assert reader.feed_position() is None and reader.removed_since(0) is None
    for method in (reader.rows_since, reader.vectors_since):
        with pytest.raises(NotImplementedError, match="Plain keeps no change feed"):
            method(0)


def test_sync_with_known_changes_touches_only_them(tmp_path: Path, docs: Path) -> None:
    from plm_core.settings import Settings
    from plm_index.job import Job

    text = BASE.split("[query.retrieve]")[0] + '[query.retrieve]\nuse = "bm25s"\ntokenizer = "bm25s_stem"\n'
    job = Job.from_config(
        _config(tmp_path, text), index_dir=tmp_path / "index", settings=Settings(progress=False, cache=False)
    )
    job.ingest([docs])
    (docs / "doc3.md").write_text("# Disk Quota\n\nQuotas now also cover object storage buckets. " * 3)
    report = job.sync(changed=[docs / "doc3.md"], deleted=["doc7"])
    assert (report.updated, report.added, report.deleted, report.unchanged) == (["doc3"], [], ["doc7"], 0)
    stored = set(job.store.doc_fingerprints())
    assert stored == {f"doc{i}" for i in range(len(TOPICS)) if i != 7}  # nothing else pruned or touched
    assert job.retrieve("buckets", k=1)[0].doc_id == "doc3"
    assert all(h.doc_id != "doc7" for h in job.retrieve("secrets vault", k=5))


@pytest.mark.parametrize(
    "family", ["Chunker", "ChunkTransform", "QueryExpander", "Retrieval", "RankingStage", "Reranker"]
)
def test_a_stage_without_run_fails_at_class_definition(family: str) -> None:
    # a chunker that writes chunk() instead of run() used to register, pass `plm config check`,
    # and fail mid-ingest with an empty NotImplementedError
    import plm

    with pytest.raises(TypeError, match=r"\('wrong_method'\) must implement .*\n  run\(self, data: "):
        type("WrongMethod", (getattr(plm, family),), {"name": "wrong_method", "chunk": lambda self, data: data})


def test_a_loader_without_load_or_run_fails_at_class_definition() -> None:
    """Issue 47: `class L(plm.Loader): name = "x"` registered and failed at load() with a bare
    NotImplementedError; so did a listing loader without `load_files`."""
    import plm

    with pytest.raises(TypeError, match=r"\('bare'\) must implement .*loaders.md\):\n  load\(self, source: str\)"):
        type("Bare", (plm.Loader,), {"name": "bare"})
    with pytest.raises(TypeError, match=r"\('lister'\) must implement .*\n  load_files\(self, root: str"):
        type("Lister", (plm.Loader,), {"name": "lister", "run": lambda self, s: [], "files": lambda self, f: None})
    type("ByRun", (plm.Loader,), {"name": "by_run", "run": lambda self, source: []})
    type("ByLoad", (plm.Loader,), {"name": "by_load", "load": lambda self, source: ([], [])})


def test_a_config_that_is_not_a_component_config_fails_at_class_definition() -> None:
    # a plain `class Config:` registered, listed "no config keys", then crashed every config
    # check with "TypeError: Config() takes no arguments"
    import plm

    class Plain:
        min_chars: int = 1

    with pytest.raises(TypeError, match=r"Paras.Config must subclass plm.ComponentConfig .*class Config\(plm"):
        type("Paras", (plm.Chunker,), {"name": "paras", "Config": Plain, "run": lambda self, data: []})

    class Fine(plm.ComponentConfig):
        min_chars: int = 1

    type("Paras", (plm.Chunker,), {"name": "paras", "Config": Fine, "run": lambda self, data: []})
    from pydantic import BaseModel

    class Pydantic(BaseModel):  # a plain pydantic model worked before plm.ComponentConfig: it still does
        min_chars: int = 1

    type("Paras", (plm.Chunker,), {"name": "paras", "Config": Pydantic, "run": lambda self, data: []})


CHUNKERS = """
import plm


class BareParagraphs(plm.Chunker):
    name = "bare_paragraphs"

    def run(self, data):
        # as the contract page's first example did: no metadata, no title copied
        out = []
        for doc in data:
            lines = doc.text.split("\\n")
            body = "\\n".join(lines[plm.documents.front_matter_lines(lines) :])
            parts = [p for p in body.split("\\n\\n") if p.strip()]
            out += [plm.Chunk(id=f"{doc.id}#{i}", doc_id=doc.id, text=p) for i, p in enumerate(parts)]
        return out


class BadWords(plm.Chunker):
    name = "bad_words"

    def run(self, data):
        return [w for doc in data for w in doc.text.split()]  # strings, not plm.Chunk


@plm.hookimpl
def plm_register_components(registry):
    registry.add(BareParagraphs)
    registry.add(BadWords)
"""


def _site(tmp_path: Path, module: str, source: str, names: list[str]) -> dict[str, str]:
    return {"PYTHONPATH": str(plugin_site(tmp_path / "site", module, source, names))}


def test_a_third_party_chunkers_chunks_carry_the_documents_metadata_and_title(tmp_path: Path) -> None:
    # filters on front matter and the hit's title work whichever chunker made the chunks
    env = _site(tmp_path, "para_chunkers", CHUNKERS, ["bare_paragraphs", "bad_words"])
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "vault.md").write_text("---\nteam: storage\n---\n# Secrets In Vault\n\nRotate vault tokens weekly.\n")
    (folder / "quota.md").write_text("---\nteam: search\n---\n# Disk Quota\n\nVault quotas per tenant.\n")
    config = _config(tmp_path, BASE.replace('use = "markdown_semantic"', 'use = "bare_paragraphs"'))
    index = tmp_path / "index"
    res = plm("ingest", str(folder), "--config", str(config), "--index", str(index), env=env)
    assert res.returncode == 0, res.stderr
    res = plm(
        "query", "vault", "--filter", "team=storage", "--json", "--config", str(config), "--index", str(index), env=env
    )
    assert res.returncode == 0, res.stderr
    hits = json.loads(res.stdout)["hits"]
    assert {h["doc_id"] for h in hits} == {"vault"}
    assert {h["metadata"]["title"] for h in hits} == {"Secrets In Vault"}
    assert {h["metadata"]["team"] for h in hits} == {"storage"}


def test_a_third_party_chunkers_new_release_or_new_default_chunks_again(tmp_path: Path, docs: Path) -> None:
    # plm cannot see a plugin's code change; it sees its version and every setting, given or not
    env = _site(tmp_path, "para_chunkers", CHUNKERS, ["bare_paragraphs", "bad_words"])
    config = _config(tmp_path, BASE.replace('use = "markdown_semantic"', 'use = "bare_paragraphs"'))

    def ingest() -> dict[str, int]:
        args = ("ingest", str(docs), "--config", str(config), "--index", str(tmp_path / "index"), "--json")
        res = plm(*args, env=env)
        assert res.returncode == 0, res.stderr
        return {k: v for k, v in json.loads(res.stdout).items() if k in ("added", "updated", "unchanged")}

    assert ingest() == {"added": 8, "updated": 0, "unchanged": 0}
    assert ingest() == {"added": 0, "updated": 0, "unchanged": 8}
    metadata = tmp_path / "site" / "para_chunkers-0.1.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 0.1", "Version: 0.2"))
    assert ingest() == {"added": 0, "updated": 8, "unchanged": 0}
    assert ingest() == {"added": 0, "updated": 0, "unchanged": 8}
    module = tmp_path / "site" / "para_chunkers.py"  # a setting's default, which the config leaves out
    module.write_text(
        module.read_text().replace(
            '    name = "bare_paragraphs"\n',
            '    name = "bare_paragraphs"\n\n    class Config(plm.ComponentConfig):\n        min_chars: int = 200\n',
        )
    )
    assert ingest() == {"added": 0, "updated": 8, "unchanged": 0}


def test_a_third_party_stages_settings_count_the_same_in_every_process() -> None:
    # a set's order follows the hash seed, a callable's repr its address: neither may re-chunk an index
    code = (
        "import json; from plm_index.job import canonical; "
        "print(json.dumps(canonical({'stop': {'a', 'the', 'of', 'and'}, 'f': frozenset({3, 1}), 'fn': lambda: 0})))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert seen == {'{"stop": ["a", "and", "of", "the"], "f": [1, 3], "fn": "<function>"}\n'}


def test_a_chunker_returning_the_wrong_type_stops_the_ingest_in_one_line(tmp_path: Path, docs: Path) -> None:
    env = _site(tmp_path, "para_chunkers", CHUNKERS, ["bare_paragraphs", "bad_words"])
    config = _config(tmp_path, BASE.replace('use = "markdown_semantic"', 'use = "bad_words"'))
    res = plm("ingest", str(docs), "--config", str(config), "--index", str(tmp_path / "index"), env=env)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "'bad_words' (chunkers) returned a list holding a str at 0, not the list[Chunk] it must return" in res.stderr
