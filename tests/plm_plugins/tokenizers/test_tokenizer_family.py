"""The `tokenizers` family: listed by `plm plugins`, chosen in TOML by name or by table,
validated by `plm config check`, and part of the BM25 index's identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plm_needs import needs

from plm_core.errors import StaleIndexError
from plm_core.records import Chunk, CorpusVersion
from plm_core.settings import Settings
from plm_index.corpus import CorpusSnapshot
from plm_index.job import Job

pytestmark = needs("bm25s", "Stemmer", extra="bm25")
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
BUILTINS = {"whitespace_lower", "bm25s_stem", "snowball", "identifiers", "multilingual"}

CONFIG = """
[job]
name = "tokenizers"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
method = "lucene"
"""


def plm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLM_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def test_plm_plugins_lists_the_tokenizers() -> None:
    res = plm("plugins", "--json")
    rows = {r["name"]: r for r in json.loads(res.stdout) if r["family"] == "tokenizers"}
    assert BUILTINS <= set(rows)
    assert {rows[name]["package"] for name in BUILTINS} == {"plm"}


def test_plm_plugins_show_snowball_lists_its_keys() -> None:
    res = plm("plugins", "show", "snowball")
    assert res.returncode == 0, res.stderr
    assert "snowball (tokenizers)" in res.stdout
    keys = {line.split()[0] for line in res.stdout.splitlines()[3:] if line.strip()}
    assert {"language", "stopwords"} <= keys
    assert "'german'" in res.stdout and "'yiddish'" in res.stdout


@pytest.mark.parametrize(
    ("tokenizer", "shown"),
    [
        ('tokenizer = "bm25s_stem"\n', "tokenizer: bm25s_stem (tokenizers)"),
        ("", "'tokenizer': 'bm25s_stem'"),  # the default (the recommended recipe's, issue 23)
        ('[query.retrieve.tokenizer]\nuse = "snowball"\nlanguage = "german"\n', "tokenizer: snowball (tokenizers)"),
    ],
    ids=["name", "default", "table"],
)
def test_config_check_accepts_a_name_or_a_table(tmp_path: Path, tokenizer: str, shown: str) -> None:
    config = tmp_path / "job.toml"
    config.write_text(CONFIG + tokenizer)
    res = plm("config", "check", str(config))
    assert res.returncode == 0, res.stderr
    assert shown in res.stdout


@pytest.mark.parametrize(
    ("tokenizer", "error"),
    [
        ('tokenizer = "snowbal"\n', "Did you mean 'snowball'?"),
        ('tokenizer = "rrf"\n', "'rrf' is a fusers component, not a tokenizer; use one of: bm25s_stem, "),
        ('[query.retrieve.tokenizer]\nuse = "snowball"\nlang = "german"\n', "unknown key 'lang'"),
        ('[query.retrieve.tokenizer]\nuse = "snowball"\nlanguage = "klingon"\n', "key 'language' = 'klingon'"),
        ('[query.retrieve.tokenizer]\nlanguage = "german"\n', "missing 'use' (the registered tokenizers name)"),
        ("tokenizer = {}\n", "missing 'use'"),
    ],
    ids=["unknown", "wrong-family", "unknown-key", "bad-value", "no-use", "empty-table"],
)
def test_config_check_rejects_a_bad_tokenizer(tmp_path: Path, tokenizer: str, error: str) -> None:
    config = tmp_path / "job.toml"
    config.write_text(CONFIG + tokenizer)
    res = plm("config", "check", str(config))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "[query.retrieve.tokenizer]" in res.stderr and error in " ".join(res.stderr.split())


def test_config_check_rejects_tables_inside_a_tokenizer_table(tmp_path: Path) -> None:
    """Not `KeyError: 'use'` at query time: a table of tables is no tokenizer."""
    config = tmp_path / "job.toml"
    config.write_text(CONFIG + '[query.retrieve.tokenizer]\nstem = {use = "snowball"}\n')
    res = plm("config", "check", str(config))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "[query.retrieve]: key 'tokenizer'" in res.stderr and 'a tokenizer table needs use = "' in res.stderr


def _snap() -> CorpusSnapshot:
    chunks = [Chunk(id=f"c{i}", doc_id="d", text=t) for i, t in enumerate(["Die Häuser", "the pods", "x"])]
    return CorpusSnapshot.of(chunks, version=CorpusVersion("s", 1))


def test_a_changed_tokenizer_is_another_index(tmp_path: Path) -> None:
    german = BM25Retriever(tokenizer={"use": "snowball", "language": "german"})
    german.build(_snap(), tmp_path)
    assert german.is_current(CorpusVersion("s", 1), tmp_path)
    for other in ("snowball", "bm25s_stem", {"use": "snowball", "language": "german", "stopwords": False}):
        changed = BM25Retriever(tokenizer=other)
        assert not changed.is_current(CorpusVersion("s", 1), tmp_path)
        assert changed.index_base(tmp_path) != german.index_base(tmp_path)
        with pytest.raises(StaleIndexError):  # never reads tokens made by another tokenizer
            changed.load(_snap(), tmp_path)
    # the same tokenizer written by name or by table (defaults included) is the same index
    by_table = BM25Retriever(tokenizer={"use": "snowball", "language": "english", "stopwords": True})
    assert by_table.index_base(tmp_path) == BM25Retriever(tokenizer="snowball").index_base(tmp_path)


def test_a_job_rebuilds_its_bm25_index_when_the_tokenizer_changes(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Speicher\n\nDer Cluster hat zu wenig Speicherplätze für neue Volumes.\n")
    (docs / "b.md").write_text("# Knoten\n\nWie die Knoten und die Pods verbunden werden.\n")
    config = tmp_path / "job.toml"
    config.write_text(CONFIG + 'tokenizer = "bm25s_stem"\n')
    settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
    index = tmp_path / "index"

    def job(*overrides: str) -> Job:
        return Job.from_config(config, list(overrides), index_dir=index, settings=settings)

    first = job()
    first.ingest([docs])
    assert first.search("Speicherplatz", k=2)[0].hits == ()  # English stemming: no match
    first.close()
    before = {p.name for p in index.rglob("bm25s-*")}
    german = job('query.retrieve.tokenizer={use = "snowball", language = "german"}')
    report = german.ingest([docs])
    assert report.skipped and "index:retrieve" in report.timings  # documents unchanged, BM25 rebuilt
    after = {p.name for p in index.rglob("bm25s-*")}
    assert len(after - before) == 1  # a new build folder for the new tokenizer
    assert [h.doc_id for h in german.search("Speicherplatz", k=2)[0].hits] == ["a"]
    german.close()


# Each built-in, and where it has settings, the same with settings that change its tokens.
CONTRACT_CASES = [
    ("whitespace_lower", {}, None),
    ("bm25s_stem", {}, None),
    ("snowball", {}, {"language": "german"}),
    ("snowball", {"stopwords": False}, {"stopwords": ["pod"]}),
    ("identifiers", {}, {"keep_whole": False}),
    ("identifiers", {"stem": True, "stopwords": True}, {"stem": True, "stopwords": True, "min_length": 4}),
]


@pytest.mark.parametrize(("name", "config", "different"), CONTRACT_CASES)
def test_the_builtin_tokenizers_keep_the_tokenizer_contract(
    name: str, config: dict[str, object], different: dict[str, object] | None
) -> None:
    import plm.testing
    from plm_index.plugins import build_registry

    cls = build_registry(autoload=False).get(name, "tokenizers").cls
    plm.testing.check_tokenizer(cls(**config), different=None if different is None else cls(**different))
