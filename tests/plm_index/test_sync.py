"""`plm ingest` as an incremental sync: skip, update, add, prune, delete, failures, order,
migration of old stores, and the CLI around it.

Most tests use a BM25-only config (no model, well under a second each); the vector
counters are checked with MiniLM in one slow test. Every test runs on both stores (SQLite
and Postgres, through the `store_table` fixture) except those marked `sqlite_only`, which
edit the SQLite file itself.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plm_core.errors import PipelineError, StoreError
from plm_core.settings import Settings
from plm_index.job import Job
from plm_index.plugins import build_registry

REPO = Path(__file__).resolve().parents[2]

QUERY = """
[query.retrieve]
use = "hybrid"

[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "whitespace_lower"
method = "rank_bm25_okapi"
drop_zero_scores = true  # a hit means the chunk holds a query word

[query.retrieve.fuser]
use = "rrf"
order = ["bm25"]

[query.retrieve.fuser.default]
weights = { bm25 = 1.0 }

[query.retrieve.fuser.expanded]
weights = { bm25 = 1.0 }
"""

# Small chunks, so each `## ` section of the corpus below is one chunk.
FAST = (
    """
[job]
name = "sync_fast"

[store]
use = "sqlite"

[index.load]
use = "markdown_dir"

[index.chunk]
use = "markdown_semantic"
target_words = 40
min_words = 10
max_words = 60
overlap_sentences = 1
max_heading_level = 4
"""
    + QUERY
)

MINILM = (
    FAST.replace('name = "sync_fast"', 'name = "sync_minilm"')
    + """
[embedder]
use = "sentence_transformers"
model = "all-MiniLM-L6-v2"
batch_size = 32
normalize = true

[query.retrieve.retrievers.dense]
use = "dense"
"""
).replace(
    """order = ["bm25"]

[query.retrieve.fuser.default]
weights = { bm25 = 1.0 }

[query.retrieve.fuser.expanded]
weights = { bm25 = 1.0 }""",
    """order = ["dense", "bm25"]

[query.retrieve.fuser.default]
weights = { dense = 1.0, bm25 = 1.0 }

[query.retrieve.fuser.expanded]
weights = { dense = 1.0, bm25 = 1.0 }""",
)

YAKE = ['index.keywords.use="yake"']


def section(title: str, topic: str, n: int = 3) -> str:
    body = " ".join(f"The {topic} {title.lower()} step {i} is described here in plain words." for i in range(n))
    return f"## {title}\n\n{body}\n\n"


CORPUS = {
    "alpha": "# Alpha\n\n" + section("Install", "alpha") + section("Configure", "alpha") + section("Backup", "alpha"),
    "beta": "# Beta\n\n" + section("Tokens", "beta") + section("Expiry", "beta"),
    "gamma": "# Gamma\n\n" + section("Mirrors", "gamma"),
}
OLD_SENTENCE = "The alpha configure step 1 is described here in plain words."
NEW_SENTENCE = "The alpha configure step 1 now needs a zeppelin hangar."


def write_corpus(folder: Path, docs: dict[str, str] = CORPUS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for doc_id, text in docs.items():
        (folder / f"{doc_id}.md").write_text(text)
    return folder


STORE = {"table": '[store]\nuse = "sqlite"\n'}


@pytest.fixture(autouse=True)
def _each_store(store_table: str, request: pytest.FixtureRequest) -> None:
    """Run the test once per store: the same sync guarantees hold for both."""
    table = store_table
    if "postgres" in table and request.node.get_closest_marker("sqlite_only"):
        pytest.skip("SQLite-specific: edits the SQLite file directly")
    STORE["table"] = table


def config(tmp_path: Path, text: str = FAST, name: str = "job.toml") -> Path:
    """The config file, with the [store] table of the store this test runs on."""
    path = tmp_path / name
    path.write_text(text.replace('[store]\nuse = "sqlite"\n', STORE["table"]))
    return path


def make_job(cfg: Path, index: Path, overrides: Sequence[str] = (), data_dir: Path | None = None) -> Job:
    """A job over `index`; the content cache lives in `data_dir` (default: next to the index),
    so no other test's cached work is seen."""
    data = data_dir or index.parent / "data"
    return Job.from_config(cfg, list(overrides), index_dir=index, settings=Settings(progress=False, data_dir=str(data)))


def hit_docs(job: Job, text: str, k: int = 20) -> list[str]:
    return [h.doc_id for h in job.retrieve(text, k=k)]


def stored_ids(job: Job) -> list[str]:
    return list(job.open().store.doc_fingerprints())


def bm25_files(index: Path) -> dict[str, int]:
    """Every path under the BM25 build folder with its mtime."""
    (base,) = index.glob("bm25s-*")  # the bm25s stage's build folder
    return {p.relative_to(base).as_posix(): p.stat().st_mtime_ns for p in [base, *base.rglob("*")]}


def plm(*args: str, data_dir: Path, columns: str | None = "1000") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(data_dir)}
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


# ---------------------------------------------------------------------------- skip


def test_unchanged_rerun_skips_every_stage_and_keeps_the_bm25_build(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path)
    first = make_job(cfg, index, YAKE).ingest([docs])
    assert first.added == ["alpha", "beta", "gamma"] and first.work["keywords"]["computed"] == first.chunks
    before = bm25_files(index)
    assert len([name for name in before if name.startswith("manifests/v")]) == 1

    job = make_job(cfg, index, YAKE)  # a new process, as `plm ingest` run again
    version = job.open().store.version()
    again = job.ingest([docs])
    assert again.skipped and again.unchanged == 3 and again.documents == 3
    assert (again.added, again.updated, again.deleted, again.failed) == ([], [], [], [])
    # No chunking, keywords or index build; the parts add up to the total.
    assert again.work == {} and set(again.timings) <= {"read", "other"}
    assert sum(again.timings.values()) == pytest.approx(again.seconds, abs=1e-3)
    assert again.chunks == first.chunks
    assert job.store.version() == version  # nothing written
    assert bm25_files(index) == before
    assert "alpha" in hit_docs(job, "alpha backup")  # a query loads the build, does not rebuild it
    assert bm25_files(index) == before
    assert job.ingest([docs]).skipped  # and the same job again


# ---------------------------------------------------------------------------- update


def test_editing_one_sentence_updates_that_document_and_recomputes_only_its_changed_chunks(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path)
    make_job(cfg, index, YAKE).ingest([docs])
    reader = make_job(cfg, index, YAKE)  # queried before the change, still open after it
    assert hit_docs(reader, "zeppelin") == []
    before = {c.id: c for c in reader.store.chunks()}

    path = docs / "alpha.md"
    path.write_text(path.read_text().replace(OLD_SENTENCE, NEW_SENTENCE))
    job = make_job(cfg, index, YAKE)
    report = job.ingest([docs])
    assert report.updated == ["alpha"] and report.added == [] and report.unchanged == 2
    after = job.store.chunks()
    alpha = [c for c in after if c.doc_id == "alpha"]
    changed = {c.text for c in alpha} - {c.text for c in before.values()}
    assert 0 < len(changed) < len(alpha)
    assert report.work["keywords"] == {"computed": len(changed), "cached": len(alpha) - len(changed)}
    assert [(c.id, c.text, c.keywords) for c in after if c.doc_id != "alpha"] == [
        (c.id, c.text, c.keywords) for c in before.values() if c.doc_id != "alpha"
    ]

    (hit,) = reader.retrieve("zeppelin hangar", k=5)
    assert hit.doc_id == "alpha" and NEW_SENTENCE in hit.text and hit.text in changed
    assert OLD_SENTENCE not in " ".join(c.text for c in after)
    assert make_job(cfg, index, YAKE).ingest([docs]).skipped


@pytest.mark.slow
def test_vectors_follow_an_edit_and_a_prune(tmp_path: Path, minilm_path: str) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path, MINILM)
    job = make_job(cfg, index)
    first = job.ingest([docs])
    assert first.work["embed"] == {"computed": first.chunks, "cached": 0}
    assert "embedded" in first.summary()
    vectors_before = dict(zip(*job.store.vectors()[:2], strict=True))
    texts_before = {c.text for c in job.store.chunks()}

    path = docs / "alpha.md"
    path.write_text(path.read_text().replace(OLD_SENTENCE, NEW_SENTENCE))
    report = job.ingest([docs])
    assert report.updated == ["alpha"] and report.unchanged == 2
    chunks = job.store.chunks()
    alpha = [c for c in chunks if c.doc_id == "alpha"]
    changed = [c for c in alpha if c.text not in texts_before]
    assert 0 < len(changed) < len(alpha)
    assert report.work["embed"] == {"computed": len(changed), "cached": len(alpha) - len(changed)}
    ids, matrix, model = job.store.vectors()
    assert ids == job.store.chunk_ids() and model == job.embedder.model_name
    assert job.store.consistency_problems() == []
    rows = dict(zip(ids, matrix, strict=True))
    for c in chunks:
        if c.id in {x.id for x in changed}:  # the new text's own vector, in the row of its chunk
            np.testing.assert_allclose(rows[c.id], job.embedder.embed([c.index_text])[0], atol=1e-5)
        else:
            np.testing.assert_array_equal(rows[c.id], vectors_before[c.id])
    top = job.retrieve("zeppelin hangar", k=3)[0]
    assert top.doc_id == "alpha" and NEW_SENTENCE in top.text and top.sources["dense"]["rank"] == 1

    (docs / "gamma.md").unlink()
    pruned = job.ingest([docs], prune=True)
    assert pruned.deleted == ["gamma"] and pruned.work == {}
    ids = job.store.vectors()[0]
    assert ids == job.store.chunk_ids() and not any(i.startswith("gamma") for i in ids)
    assert job.store.stats()["vectors"] == pruned.chunks and job.store.consistency_problems() == []
    assert "gamma" not in hit_docs(job, "gamma mirrors")
    assert make_job(cfg, index).ingest([docs]).skipped


# ---------------------------------------------------------------------------- prune, delete


def test_prune_deletes_documents_whose_file_is_gone_and_only_with_prune(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path)
    job = make_job(cfg, index)
    total = job.ingest([docs]).chunks
    gamma_chunks = [c.id for c in job.store.chunks() if c.doc_id == "gamma"]
    assert gamma_chunks and "gamma" in hit_docs(job, "gamma mirrors")

    (docs / "gamma.md").unlink()
    kept = job.ingest([docs])
    assert kept.skipped and kept.deleted == [] and kept.unchanged == 2
    assert "gamma" in stored_ids(job) and "gamma" in hit_docs(job, "gamma mirrors")

    pruned = make_job(cfg, index).ingest([docs], prune=True)
    assert pruned.deleted == ["gamma"] and not pruned.skipped and pruned.unchanged == 2
    assert pruned.chunks == total - len(gamma_chunks)
    assert stored_ids(job) == ["alpha", "beta"]
    assert job.store.get_chunks(gamma_chunks) == {}
    assert hit_docs(job, "gamma mirrors") == [] and hit_docs(job, "beta expiry")[0] == "beta"
    assert make_job(cfg, index).ingest([docs], prune=True).skipped


def test_delete_removes_documents_and_the_cli_reports_unknown_ids(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path)
    job = make_job(cfg, index)
    job.ingest([docs])
    assert "beta" in hit_docs(job, "beta tokens")

    version = job.store.version()
    nothing = job.delete(["nope"])
    assert nothing.deleted == [] and job.store.version() == version
    report = job.delete(["beta"])
    assert report.deleted == ["beta"] and stored_ids(job) == ["alpha", "gamma"]
    assert report.chunks == len(job.store.chunk_ids())
    assert not any(c.doc_id == "beta" for c in job.store.chunks())
    assert "beta" not in hit_docs(job, "beta tokens")
    # Not pruned from the sources: the next sync adds it back.
    assert make_job(cfg, index).ingest([docs]).added == ["beta"]

    res = plm("delete", "alpha", "nope", "--config", str(cfg), "--index", str(index), data_dir=tmp_path / "data")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "not found: nope" in res.stderr and "deleted 1 document in" in res.stdout
    assert "Traceback" not in res.stderr
    fresh = make_job(cfg, index)
    assert stored_ids(fresh) == ["gamma", "beta"] and "alpha" not in hit_docs(fresh, "alpha install")
    ok = plm("delete", "gamma", "--config", str(cfg), "--index", str(index), data_dir=tmp_path / "data")
    assert ok.returncode == 0, ok.stderr
    assert stored_ids(make_job(cfg, index)) == ["beta"]


# ---------------------------------------------------------------------------- failures


def test_bad_files_fail_one_by_one_and_stored_versions_are_kept_even_with_prune(tmp_path: Path) -> None:
    docs, index, cfg = tmp_path / "docs", tmp_path / "index", config(tmp_path)
    limit = ["index.load.max_file_mb=0.002"]  # about 2 KB
    write_corpus(docs, {**CORPUS, "delta": "# Delta\n\n" + section("Quotas", "delta")})
    first = make_job(cfg, index, limit).ingest([docs])
    assert first.added == ["alpha", "beta", "delta", "gamma"] and first.failed == []

    (docs / "alpha.md").write_text(CORPUS["alpha"] * 10)  # too large
    (docs / "beta.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")  # binary
    (docs / "gamma.md").write_bytes("# Gamma caf\xe9\n".encode("latin-1"))  # not UTF-8
    (docs / "delta.md").unlink()
    (docs / "delta.md").symlink_to(tmp_path / "nowhere.md")  # broken symlink
    (docs / "epsilon.md").write_text("# Epsilon\n\n" + section("Shards", "epsilon"))
    (docs / "zeta.md").write_text("")
    (docs / "eta.md").write_bytes(b"\0\0binary")

    job = make_job(cfg, index, limit)
    report = job.ingest([docs], prune=True)
    failed = {Path(f.path).name: (f.doc_id, f.error) for f in report.failed}
    assert set(failed) == {"alpha.md", "beta.md", "gamma.md", "delta.md", "zeta.md", "eta.md"}
    assert all(doc_id == name[:-3] for name, (doc_id, _) in failed.items())
    assert failed["alpha.md"][1].startswith("too large")
    assert failed["beta.md"][1].startswith("binary") and failed["eta.md"][1].startswith("binary")
    assert failed["gamma.md"][1].startswith("not valid UTF-8")
    assert failed["delta.md"][1].startswith("broken symlink")
    assert failed["zeta.md"][1].startswith("empty")
    assert report.added == ["epsilon"] and report.updated == [] and report.deleted == []
    assert report.unchanged == 0 and report.notes == []
    assert sorted(stored_ids(job)) == ["alpha", "beta", "delta", "epsilon", "gamma"]
    for doc_id, words in [("alpha", "alpha backup"), ("beta", "beta tokens"), ("gamma", "gamma mirrors")]:
        assert hit_docs(job, words)[0] == doc_id  # the old version, still searchable
    assert hit_docs(job, "delta quotas")[0] == "delta" and hit_docs(job, "epsilon shards")[0] == "epsilon"
    stored_beta = job.store.get_chunks([f"beta_mdsem_{i}" for i in range(2)])
    assert all("beta tokens" in c.text or "beta expiry" in c.text for c in stored_beta.values())

    # The CLI: the same sync, a summary, one `failed:` line per file, exit 1.
    sets = ["--set", limit[0]]
    res = plm(
        "ingest", str(docs), "--config", str(cfg), "--index", str(index), *sets, "--prune", data_dir=tmp_path / "data"
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert "added 0, updated 0, unchanged 1, deleted 0, failed 6" in res.stdout
    lines = [line for line in res.stderr.splitlines() if line.startswith("failed: ")]
    assert len(lines) == 6
    for name, (_, error) in failed.items():
        assert f"failed: {(docs / name).as_posix()}: {error}" in lines
    assert "Traceback" not in res.stderr

    (docs / "beta.md").write_text(CORPUS["beta"].replace("Expiry", "Renewal"))  # fixed
    fixed = make_job(cfg, index, limit).ingest([docs], prune=True)
    assert fixed.updated == ["beta"] and len(fixed.failed) == 5 and fixed.deleted == []


def test_an_emptied_file_fails_and_its_stored_version_is_removed(tmp_path: Path) -> None:
    """A failing file's stored version is kept, except when the file was emptied: its old
    text must not stay searchable. By a folder's sync and by a one-file (watcher's) sync."""
    docs, index, cfg = tmp_path / "docs", tmp_path / "index", config(tmp_path)
    write_corpus(docs, CORPUS)
    make_job(cfg, index).ingest([docs])
    (docs / "alpha.md").write_text("")
    (docs / "beta.md").write_text(" \n\t\n")
    job = make_job(cfg, index)
    report = job.ingest([docs])
    failed = {Path(f.path).name: (f.doc_id, f.error) for f in report.failed}
    removed = " (its stored version was removed)"
    assert failed == {
        "alpha.md": ("alpha", "empty (0 bytes); add text or move it out of the folder" + removed),
        "beta.md": ("beta", "empty (only whitespace); add text or move it out of the folder" + removed),
    }
    assert report.deleted == ["alpha", "beta"] and report.unchanged == 1
    assert stored_ids(job) == ["gamma"] and "alpha" not in hit_docs(job, "alpha install")
    assert job.store.stats()["documents"] == 1

    (docs / "alpha.md").write_text(CORPUS["alpha"])
    assert make_job(cfg, index).ingest([docs / "alpha.md"]).added == ["alpha"]
    (docs / "alpha.md").write_text("")
    one = make_job(cfg, index).ingest([docs / "alpha.md"])
    assert one.deleted == ["alpha"] and [f.error.endswith(removed) for f in one.failed] == [True]
    again = make_job(cfg, index).ingest([docs / "alpha.md"])  # nothing stored any more: only the failure
    assert again.deleted == [] and [f.error.endswith(removed) for f in again.failed] == [False]
    assert "alpha" not in stored_ids(make_job(cfg, index))


def test_cli_failed_lines_are_one_line_each_without_a_terminal(tmp_path: Path) -> None:
    docs, cfg = write_corpus(tmp_path / "docs"), config(tmp_path)
    (docs / "a_file_with_a_long_enough_name_to_pass_eighty_columns_in_the_message.md").write_bytes(b"\0")
    res = plm(
        "ingest", str(docs), "--config", str(cfg), "--index", str(tmp_path / "i"), data_dir=tmp_path, columns=None
    )
    assert res.returncode == 1
    (line,) = [line for line in res.stderr.splitlines() if "binary" in line]
    assert line.startswith("failed: ") and line.endswith("move it out of the folder")


RECORDS_FAST = FAST.replace('use = "markdown_dir"', 'use = "json_records"')


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _record(doc_id: str, topic: str) -> str:
    return json.dumps({"id": doc_id, "title": doc_id, "text": f"# {doc_id}\n\n" + section("Notes", topic)})


def test_prune_is_refused_while_a_failure_has_no_document_id(tmp_path: Path) -> None:
    cfg, index = config(tmp_path, RECORDS_FAST), tmp_path / "index"
    src = _jsonl(tmp_path / "records.jsonl", [_record("r1", "red"), _record("r2", "green"), _record("r3", "blue")])
    assert make_job(cfg, index).ingest([src]).added == ["r1", "r2", "r3"]

    # r3 is gone, and line 2 cannot be read: it might have been r3, so nothing is pruned.
    _jsonl(src, [_record("r1", "red"), '{"id": "r2", "text": broken', _record("r4", "violet")])
    job = make_job(cfg, index)
    report = job.ingest([src], prune=True)
    (failure,) = report.failed
    assert failure.path.endswith("records.jsonl:2") and failure.doc_id == ""
    assert report.deleted == [] and report.added == ["r4"] and report.unchanged == 1
    (note,) = report.notes
    assert note.startswith("--prune skipped: 1 failure(s) without a known document id")
    assert sorted(stored_ids(job)) == ["r1", "r2", "r3", "r4"]
    assert hit_docs(job, "blue notes")[0] == "r3"

    # A record with a known id that fails is kept, the rest is pruned.
    _jsonl(src, [_record("r1", "red"), '{"id": "r2", "text": 42}', _record("r4", "violet")])
    report = make_job(cfg, index).ingest([src], prune=True)
    assert [f.doc_id for f in report.failed] == ["r2"] and report.notes == []
    assert report.deleted == ["r3"] and sorted(stored_ids(job)) == ["r1", "r2", "r4"]


def test_duplicate_ids_across_sources_fail_and_the_first_is_stored(tmp_path: Path) -> None:
    cfg, index = config(tmp_path), tmp_path / "index"
    one = write_corpus(tmp_path / "one", {"alpha": CORPUS["alpha"], "beta": CORPUS["beta"]})
    two = write_corpus(tmp_path / "two", {"alpha": "# Other alpha\n\n" + section("Elsewhere", "other")})
    job = make_job(cfg, index)
    report = job.ingest([one, two], prune=True)
    assert report.added == ["alpha", "beta"] and report.documents == 2
    (failure,) = report.failed
    assert failure.path == (two / "alpha.md").as_posix() and failure.doc_id == "alpha"
    assert "duplicate document id 'alpha'" in failure.error and (one / "alpha.md").as_posix() in failure.error
    assert job.store.get_chunks(["alpha_mdsem_0"])["alpha_mdsem_0"].metadata["path"] == (one / "alpha.md").as_posix()
    assert "alpha" in hit_docs(job, "alpha install") and hit_docs(job, "other elsewhere") == []
    again = make_job(cfg, index).ingest([one, two], prune=True)
    assert again.skipped and again.unchanged == 2 and len(again.failed) == 1


def test_a_failing_first_file_keeps_its_id_across_sources(tmp_path: Path) -> None:
    cfg, index = config(tmp_path), tmp_path / "index"
    one = write_corpus(tmp_path / "one", {"alpha": CORPUS["alpha"], "beta": CORPUS["beta"]})
    two = write_corpus(tmp_path / "two", {"alpha": "# Other alpha\n\n" + section("Elsewhere", "other")})
    make_job(cfg, index).ingest([one, two])
    (one / "alpha.md").write_bytes(b"\0binary")  # the owner of "alpha" breaks
    job = make_job(cfg, index)
    report = job.ingest([one, two])
    # Within one folder the first file in sorted order owns its id even when it fails, and a
    # failing file's stored document is kept; across sources the other file silently replaces it.
    assert report.updated == []
    assert "alpha" in hit_docs(job, "alpha install")


# ---------------------------------------------------------------------------- force, config


def test_force_and_index_config_changes_reprocess_everything_query_changes_do_not(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path)
    everything = ["alpha", "beta", "gamma"]
    first = make_job(cfg, index, YAKE).ingest([docs])
    chunks = first.chunks

    forced = make_job(cfg, index, YAKE).ingest([docs], force=True)
    assert forced.updated == everything and forced.unchanged == 0 and forced.added == []
    assert forced.work["keywords"] == {"computed": chunks, "cached": 0}  # the cache is not read

    smaller = [*YAKE, "index.chunk.target_words=12", "index.chunk.max_words=20"]
    changed = make_job(cfg, index, smaller).ingest([docs])
    assert changed.updated == everything and changed.unchanged == 0
    assert changed.chunks != chunks  # really re-chunked with the new settings
    assert make_job(cfg, index, smaller).ingest([docs]).skipped

    # [query] settings do not touch the stored documents, nor the BM25 segments: k1 is
    # applied at query time.
    query_only = make_job(cfg, index, [*smaller, "query.retrieve.retrievers.bm25.k1=1.2"])
    report = query_only.ingest([docs])
    assert report.skipped and report.unchanged == 3 and report.work == {}
    assert set(report.timings) <= {"read", "other"}
    assert "alpha" in hit_docs(query_only, "alpha backup")


# ---------------------------------------------------------------------------- order


def test_updating_a_middle_document_keeps_the_order_of_a_fresh_ingest(tmp_path: Path) -> None:
    docs, cfg = write_corpus(tmp_path / "docs"), config(tmp_path)
    synced = make_job(cfg, tmp_path / "synced")
    synced.ingest([docs])
    before = synced.store.chunk_ids()
    # beta (in the middle) grows by a section: more chunks than before
    (docs / "beta.md").write_text(CORPUS["beta"] + section("Rotation", "beta") + section("Audit", "beta"))
    assert synced.ingest([docs]).updated == ["beta"]

    fresh = make_job(cfg, tmp_path / "fresh")
    fresh.ingest([docs])
    order = synced.store.chunk_ids()
    assert order == fresh.store.chunk_ids() and len(order) == len(before) + 2
    assert [c.doc_id for c in synced.store.chunks()] == sorted(c.doc_id for c in synced.store.chunks())
    for query in ("beta rotation audit", "alpha configure", "step described"):
        a, b = synced.retrieve(query, k=10), fresh.retrieve(query, k=10)
        assert [(h.chunk_id, h.score) for h in a] == [(h.chunk_id, h.score) for h in b]


# ---------------------------------------------------------------------------- migration

# The store layout before incremental sync: no `documents.fingerprint` column.
OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, title TEXT, path TEXT,
    text TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE TABLE chunks (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, stable_id TEXT, doc_id TEXT NOT NULL
        REFERENCES documents(id) ON DELETE CASCADE,
    text TEXT NOT NULL, enriched TEXT, heading_path TEXT NOT NULL, start_char INTEGER,
    end_char INTEGER, keywords TEXT NOT NULL, entities TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE INDEX chunks_doc ON chunks(doc_id);
CREATE TABLE vectors (
    chunk_id TEXT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL);
"""


@pytest.mark.sqlite_only
def test_a_store_without_fingerprints_is_migrated_and_reprocessed_once(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path)
    index.mkdir()
    db = sqlite3.connect(index / "plm.sqlite")
    db.executescript(OLD_SCHEMA)
    db.execute(
        "INSERT INTO documents(id, title, path, text, metadata) VALUES(?,?,?,?,?)",
        ("alpha", "Alpha", (docs / "alpha.md").as_posix(), CORPUS["alpha"], "{}"),
    )
    db.execute(
        "INSERT INTO chunks(id, stable_id, doc_id, text, heading_path, start_char, end_char, keywords, entities, "
        "metadata) VALUES('alpha_old_0', 'x', 'alpha', 'stale obsolete words', '[]', 0, 10, '[]', '{}', '{}')"
    )
    db.commit()
    db.close()

    job = make_job(cfg, index)
    report = job.ingest([docs])
    assert report.updated == ["alpha"] and report.added == ["beta", "gamma"] and report.unchanged == 0
    columns = {r[1] for r in job.store.db.execute("PRAGMA table_info(documents)")}
    assert "fingerprint" in columns
    assert all(job.store.doc_fingerprints().values())
    assert "alpha_old_0" not in job.store.chunk_ids() and stored_ids(job) == ["alpha", "beta", "gamma"]
    assert hit_docs(job, "stale obsolete") == [] and hit_docs(job, "alpha backup")[0] == "alpha"
    job.close()

    again = make_job(cfg, index).ingest([docs])
    assert again.skipped and again.unchanged == 3


# ---------------------------------------------------------------------------- CLI --json


def test_cli_ingest_json_has_the_counters(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path)
    args = ("ingest", str(docs), "--config", str(cfg), "--index", str(index), "--json")
    res = plm(*args, data_dir=tmp_path / "data")
    assert res.returncode == 0, res.stderr
    first = json.loads(res.stdout)
    assert first["added"] == 3 and first["updated"] == first["unchanged"] == first["deleted"] == 0
    assert first["documents"] == 3 and first["failed"] == [] and first["notes"] == []
    assert first["skipped"] is False and first["chunks"] == 6 and first["model"] is None
    assert first["index_dir"] == str(index) and "read" in first["timings_s"]

    (docs / "gamma.md").unlink()
    (docs / "beta.md").write_bytes(b"\0")
    res = plm(*args, "--prune", data_dir=tmp_path / "data")
    assert res.returncode == 1, res.stderr
    second = json.loads(res.stdout)  # stdout is only the JSON, failures included
    assert second["skipped"] is False and second["deleted"] == 1 and second["unchanged"] == 1
    assert [(f["path"], f["doc_id"]) for f in second["failed"]] == [((docs / "beta.md").as_posix(), "beta")]
    assert second["chunks"] == 5 and second["work"] == {}


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_index_rebuild_repairs_damaged_vectors_and_bm25_files(tmp_path: Path) -> None:
    cfg = config(tmp_path, MINILM)
    index = tmp_path / "index"
    job = make_job(cfg, index)
    job.ingest([write_corpus(tmp_path / "docs")])
    expected = [(h.chunk_id, round(h.score, 5)) for h in job.retrieve("alpha backup step", k=5)]
    ids, matrix, _ = job.store.vectors()
    db = job.store.db
    db.execute("UPDATE vectors SET vector = substr(vector, 1, 100) WHERE chunk_id = ?", (ids[0],))
    db.execute("DELETE FROM vectors WHERE chunk_id = ?", (ids[1],))
    (folder,) = (job.query_stages[-1].retrievers["bm25"].stage_base(index) / "segments").iterdir()
    victim = max(folder.iterdir(), key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[:-8])
    job.close()
    fresh = make_job(cfg, index)
    with pytest.raises(StoreError, match=r"plm index rebuild"):  # never used damaged
        fresh.retrieve("alpha backup step", k=5)
    res = plm("index", "rebuild", "--config", str(cfg), "--index", str(index), data_dir=tmp_path / "data")
    assert res.returncode == 0, res.stderr
    assert "re-embedded 2 stored chunks" in res.stdout
    repaired = make_job(cfg, index).open()
    assert repaired.store.consistency_problems() == []
    ids2, matrix2, _ = repaired.store.vectors()
    assert ids2 == ids and np.allclose(matrix2, matrix, atol=1e-6)
    assert [(h.chunk_id, round(h.score, 5)) for h in repaired.retrieve("alpha backup step", k=5)] == expected


# ---------------------------------------------------------------------------- review follow-ups


def test_prune_only_touches_documents_under_the_given_paths(tmp_path: Path) -> None:
    one = write_corpus(tmp_path / "one", {"alpha": CORPUS["alpha"], "beta": CORPUS["beta"]})
    two = write_corpus(tmp_path / "two", {"gamma": CORPUS["gamma"]})
    job = make_job(config(tmp_path), tmp_path / "index")
    job.ingest([one])
    job.ingest([two])
    (one / "beta.md").unlink()
    report = job.ingest([one], prune=True)
    assert report.deleted == ["beta"] and stored_ids(job) == ["alpha", "gamma"]  # gamma is another folder's


def test_a_file_ingest_scans_no_other_vectors_and_a_folder_ingest_does(tmp_path: Path, monkeypatch: Any) -> None:
    """`plm ingest FILE` wrote its own chunks' vectors: the store-wide scan for missing or
    stale ones (0.2-0.9 s at 100,000 documents) is a folder's ingest's, as before."""
    pytest.importorskip("plm_example_plugin", reason="the example plugin (hashed_words) is not installed")
    toy = MINILM.replace(
        'use = "sentence_transformers"\nmodel = "all-MiniLM-L6-v2"\nbatch_size = 32\nnormalize = true',
        'use = "hashed_words"\ndim = 16',
    )
    job = make_job(config(tmp_path, toy), tmp_path / "index")
    docs = write_corpus(tmp_path / "docs")
    job.ingest([docs])
    store_type = type(job.open().store)
    scans: list[str] = []
    for method in ("chunks_needing_vectors", "consistency_problems"):
        original = getattr(store_type, method)

        def spy(self: Any, *args: Any, _original: Any = original, _name: str = method) -> Any:
            scans.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(store_type, method, spy)
    (docs / "alpha.md").write_text(CORPUS["alpha"].replace(OLD_SENTENCE, NEW_SENTENCE))
    report = job.ingest([docs / "alpha.md"])
    assert report.updated == ["alpha"] and scans == []
    assert hit_docs(job, "zeppelin hangar", k=1) == ["alpha"]
    (docs / "beta.md").write_text(CORPUS["beta"] + "\nA new line about a zeppelin.\n")
    report = job.ingest([docs])
    assert report.updated == ["beta"] and scans == ["chunks_needing_vectors", "consistency_problems"]


@pytest.mark.slow
def test_a_model_change_re_embeds_documents_the_sync_does_not_yield(tmp_path: Path) -> None:
    one = write_corpus(tmp_path / "one", {"alpha": CORPUS["alpha"]})
    two = write_corpus(tmp_path / "two", {"beta": CORPUS["beta"]})
    cfg, index = config(tmp_path, MINILM), tmp_path / "index"
    job = make_job(cfg, index)
    job.ingest([one])
    job.ingest([two])
    # As if everything had been embedded by another model with another dimension.
    ids = job.store.chunk_ids()
    job.store.write_vectors(ids, np.ones((len(ids), 8), dtype=np.float32), "old-model")
    assert job.store.get_meta("model") == "old-model" and job.store.stats()["dimension"] == 8
    report = make_job(cfg, index).ingest([one])  # beta's folder is not part of this sync
    assert report.updated == ["alpha"]
    assert any("re-embedded" in n for n in report.notes), report.notes
    fresh = make_job(cfg, index).open()
    assert fresh.store.consistency_problems() == [] and fresh.store.stats()["dimension"] == 384
    assert fresh.retrieve("beta tokens expiry", k=1)[0].doc_id == "beta"


@pytest.mark.slow
def test_deleting_every_document_leaves_a_valid_empty_index(tmp_path: Path) -> None:
    docs, index, cfg = write_corpus(tmp_path / "docs"), tmp_path / "index", config(tmp_path, MINILM)
    job = make_job(cfg, index)
    job.ingest([docs])
    report = job.delete(["alpha", "beta", "gamma"])
    assert sorted(report.deleted) == ["alpha", "beta", "gamma"] and report.chunks == 0
    with pytest.raises(StoreError, match="empty"):
        make_job(cfg, index).retrieve("alpha", k=1)
    with pytest.raises(StoreError, match="empty"):  # the same, warm job too
        job.retrieve("alpha", k=1)
    assert make_job(cfg, index).ingest([docs]).added == ["alpha", "beta", "gamma"]


def test_a_stage_failing_on_one_document_fails_only_that_document(tmp_path: Path) -> None:
    from plm_core.component import ComponentConfig
    from plm_core.interfaces import ChunkTransform
    from plm_core.records import Chunk

    class Exploder(ChunkTransform):
        """Stands in for a stage with a bug that only some inputs trigger."""

        name = "exploder"

        class Config(ComponentConfig):
            pass

        def run(self, data: list[Chunk]) -> list[Chunk]:
            if any("zeppelin" in c.text for c in data):
                raise IndexError("list index out of range")
            return data

    registry = build_registry()  # a fresh one: the shared default stays as it was
    registry.add(Exploder)
    cfg = config(tmp_path, FAST + '\n[index.boom]\nuse = "exploder"\n')  # runs after the chunker
    docs = write_corpus(tmp_path / "docs")
    (docs / "alpha.md").write_text(CORPUS["alpha"].replace(OLD_SENTENCE, NEW_SENTENCE))
    settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
    job = Job.from_config(cfg, index_dir=tmp_path / "index", settings=settings, registry=registry)
    report = job.ingest([docs])
    assert sorted(report.added) == ["beta", "gamma"] and [f.doc_id for f in report.failed] == ["alpha"]
    assert "IndexError" in report.failed[0].error or "list index" in report.failed[0].error
    # every document hitting the same bug is a broken stage: the ingest stops with it
    for name in ("beta", "gamma"):
        (docs / f"{name}.md").write_text(CORPUS[name] + "\nzeppelin\n")
    with pytest.raises(PipelineError, match="list index out of range"):
        Job.from_config(cfg, index_dir=tmp_path / "index", settings=settings, registry=registry).ingest([docs])
    # in batches of one document, each is only a failure: never an abort decided by batch size
    one = settings.model_copy(update={"ingest_batch": 1})
    report = Job.from_config(cfg, index_dir=tmp_path / "index", settings=one, registry=registry).ingest([docs])
    assert sorted(f.doc_id for f in report.failed) == ["alpha", "beta", "gamma"]


def test_a_permanently_bad_document_does_not_churn_the_index(tmp_path: Path) -> None:
    docs = write_corpus(tmp_path / "docs")
    (docs / "bad.md").write_bytes(b"\x00binary")
    job = make_job(config(tmp_path), tmp_path / "index")
    job.ingest([docs])
    version = job.store.version()
    again = job.ingest([docs])
    assert again.skipped and [f.doc_id for f in again.failed] == ["bad"]
    assert job.store.version() == version  # no empty commit, no index rebuild


def test_prune_scope_does_not_depend_on_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    write_corpus(root / "docs", {"alpha": CORPUS["alpha"]})
    write_corpus(root / "other", {"beta": CORPUS["beta"]})
    job = make_job(config(tmp_path), tmp_path / "index")
    monkeypatch.chdir(root)
    job.ingest([Path("docs")])
    job.ingest([Path("other")])
    monkeypatch.chdir(root / "docs")
    report = job.ingest([Path(".")], prune=True)
    assert report.deleted == [] and report.unchanged == 1 and stored_ids(job) == ["alpha", "beta"]


@pytest.mark.slow
def test_a_bm25_only_config_over_an_index_with_vectors_keeps_working(tmp_path: Path) -> None:
    one = write_corpus(tmp_path / "one", {"alpha": CORPUS["alpha"], "beta": CORPUS["beta"]})
    two = write_corpus(tmp_path / "two", {"gamma": CORPUS["gamma"]})
    index = tmp_path / "index"
    hybrid = make_job(config(tmp_path, MINILM), index)
    hybrid.ingest([one])
    hybrid.ingest([two])
    (one / "beta.md").write_text(CORPUS["beta"] + "\nA new line about zeppelins here\n")
    job = make_job(config(tmp_path, FAST, "fast.toml"), index)
    # folder one is re-processed (another index config) and loses its vectors; gamma keeps its
    assert job.ingest([one]).updated == ["alpha", "beta"]
    assert hit_docs(job, "zeppelins") == ["beta"] and "gamma" in hit_docs(job, "gamma mirrors")


def test_a_nul_character_fails_its_record_alone_on_every_store(tmp_path: Path) -> None:
    # Postgres cannot store NUL in text or jsonb: one such record aborted the whole batch.
    cfg, index = config(tmp_path, RECORDS_FAST), tmp_path / "index"
    lines = [
        _record("r1", "red"),
        json.dumps({"id": "r2", "text": "a\u0000b"}),
        json.dumps({"id": "r3", "text": "fine text", "team": "x\u0000y"}),
        json.dumps({"id": "r4", "text": "fine text", "title": "T\u0000"}),
        _record("r5", "green"),
    ]
    src = _jsonl(tmp_path / "records.jsonl", lines)
    report = make_job(cfg, index).ingest([src])
    assert report.added == ["r1", "r5"]
    assert [f.doc_id for f in report.failed] == ["r2", "r3", "r4"]
    assert all("NUL" in f.error for f in report.failed)
    assert sorted(stored_ids(make_job(cfg, index))) == ["r1", "r5"]


def test_the_same_folder_or_file_given_twice_is_read_once(tmp_path: Path) -> None:
    cfg, index = config(tmp_path), tmp_path / "index"
    docs = write_corpus(tmp_path / "docs")
    report = make_job(cfg, index).ingest([docs, docs, tmp_path / "docs" / "alpha.md", f"{docs}/../docs/"])
    assert report.failed == [] and sorted(report.added) == ["alpha", "beta", "gamma"]
    # Two different files with one id are still a duplicate.
    other = write_corpus(tmp_path / "other", {"alpha": "# Other alpha\n\n" + section("Elsewhere", "other")})
    again = make_job(cfg, index).ingest([docs, docs, other])
    assert [f.doc_id for f in again.failed] == ["alpha"] and again.unchanged == 3


def test_a_sync_makes_no_full_collection_and_puts_the_setting_back() -> None:
    """`few_full_collections`: the oldest generation's threshold is raised while any sync
    runs (nested, in threads) and put back by the last one, also when it fails."""
    import gc
    import threading

    from plm_index.collector import few_full_collections

    before = gc.get_threshold()
    inside: list[tuple[int, int, int]] = []
    started, release = threading.Event(), threading.Event()

    def other_sync() -> None:
        with few_full_collections():
            started.set()
            release.wait(10)

    thread = threading.Thread(target=other_sync)
    thread.start()
    started.wait(10)
    with pytest.raises(RuntimeError), few_full_collections():
        inside.append(gc.get_threshold())
        raise RuntimeError("a failing sync")
    inside.append(gc.get_threshold())  # the other sync still runs
    release.set()
    thread.join(10)
    assert inside[0][:2] == before[:2] and inside[0][2] >= 1_000_000
    assert inside[1] == inside[0]
    assert gc.get_threshold() == before


def test_document_fingerprints_stay_what_earlier_releases_stored() -> None:
    """A fingerprint is stored with each document: if its recipe changed, every document of
    every index would be read and stored again at the next sync. These are the values plm
    computed before the fingerprint was made faster (one hash update, a reused encoder)."""
    import hashlib

    from plm_core.records import Document
    from plm_index.sync import doc_fingerprint

    rich = Document(id="ü", text="text\n", title="T", path="/p/a.md", metadata={"b": 1, "a": [1, "z"]})
    plain = Document(id="a", text="x")
    assert doc_fingerprint("fp", rich) == "8ff43831ee350963beb4a2b5cc67c4e55b2353d47819e7e32c88b85c99f556d2"
    assert doc_fingerprint(hashlib.sha256(b"fp"), plain) == (
        "46162c8d14c875d25359c34eeefac886023d128fc2fb53ce9b6de3c8cd4345a7"
    )
