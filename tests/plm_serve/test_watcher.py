"""`FolderWatcher` and `plm watch` on real folders: create, edit, rename, move, delete files
and folders, editor scratch files, slow writes, a 1,000-file burst, bad files, a failing
apply, and `plm watch` as a process stopped by SIGTERM.

A BM25-only config (no model) keeps each sync well under a second. Every test waits for
the index to reach the expected state (polling, with a timeout), never for a fixed time.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from plm_core.settings import Settings
from plm_index.job import Job
from plm_index.sync import IngestReport
from plm_serve.folder_watcher import FolderWatcher
from plm_serve.syncing import sync_paths
from plm_serve.watch_filters import glob_filter, loader_filter_for, scratch
from plm_serve.watcher import job_watcher

REPO = Path(__file__).resolve().parents[2]

CONFIG = """
[job]
name = "watch_fast"

[store]
use = "sqlite"

[index.load]
use = "markdown_dir"
pattern = "**/*.md"

[index.chunk]
use = "markdown_semantic"
target_words = 40
min_words = 10
max_words = 60
overlap_sentences = 1
max_heading_level = 4

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


def page(title: str, words: str) -> str:
    return f"# {title}\n\n## Notes\n\nThe {title.lower()} page says {words} in plain words.\n"


CORPUS = {
    "alpha": page("Alpha", "install the alpha agent"),
    "beta": page("Beta", "rotate the beta tokens"),
    "gamma": page("Gamma", "mirror the gamma buckets"),
    "delta": page("Delta", "scale the delta workers"),
}


def wait_until(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting until {what}")
        time.sleep(0.05)


class Watching:
    """A FolderWatcher over `docs` in a thread, its apply calls and log lines, and a second
    Job (as another process would have) to look at the index."""

    def __init__(self, tmp: Path, docs: Path, apply: Callable[..., IngestReport] | None = None, **options) -> None:
        (tmp / "job.toml").write_text(CONFIG)
        settings = Settings(progress=False, data_dir=str(tmp / "data"))
        self.job = Job.from_config(tmp / "job.toml", index_dir=tmp / "index", settings=settings)
        self.reader = Job.from_config(tmp / "job.toml", index_dir=tmp / "index", settings=settings)
        self.calls: list[tuple[list[Path], list[Path]]] = []
        self.lines: list[str] = []
        self.apply = apply or (lambda c, r: sync_paths(self.job, c, r))
        self.turns = threading.Lock()  # the catch-up runs beside the batches: one sync at a time
        options = {"debounce_ms": 50, "settle_ms": 300, **options}
        self.watcher = FolderWatcher(
            [docs],
            self._apply,
            catch_up=self._catch_up,
            loader_filter=loader_filter_for(self.job.loader, [docs]),
            log=self.lines.append,
            **options,
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watcher.run, args=(self.stop,), daemon=True)
        self.thread.start()
        wait_until(lambda: self.watcher.state()["caught_up"], "the catch-up sync is done")

    def _catch_up(self, dirs: list[Path], stop: threading.Event, _listed: object) -> IngestReport:
        with self.turns:
            return self.job.ingest(dirs, prune=True, stop=stop)

    def _apply(self, changed: list[Path], removed: list[Path]) -> IngestReport:
        self.calls.append((changed, removed))
        with self.turns:
            return self.apply(changed, removed)

    def paths(self) -> dict[str, str]:
        return self.reader.open().store.doc_paths()

    def hits(self, text: str) -> list[str]:
        return [h.doc_id for h in self.reader.retrieve(text, k=10)]

    def texts(self, doc_id: str) -> str:
        return " ".join(c.text for c in self.reader.open().store.chunks() if c.doc_id == doc_id)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(20)
        assert not self.thread.is_alive(), "the watcher did not stop"
        self.job.close()
        self.reader.close()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for doc_id, text in CORPUS.items():
        (folder / f"{doc_id}.md").write_text(text)
    return folder


@pytest.fixture
def watching(tmp_path: Path, docs: Path) -> Iterator[Watching]:
    w = Watching(tmp_path, docs)
    yield w
    w.close()


def changed_files(w: Watching) -> list[Path]:
    return [p for changed, _ in w.calls for p in changed]


# ---------------------------------------------------------------------------- units


def test_scratch_names() -> None:
    for name in [
        ".#alpha.md",
        "alpha.md~",
        "#alpha.md#",
        ".alpha.md.swp",
        "x.swx",
        "a.TMP",
        "4913",
        ".DS_Store",
        ".git",
    ]:
        assert scratch(name), name
    for name in ["alpha.md", "notes.markdown", "4914", "a#b.md"]:
        assert not scratch(name), name


def test_glob_filter_follows_the_loader_pattern(tmp_path: Path) -> None:
    top = glob_filter("*.md", [tmp_path])
    deep = glob_filter("**/*.md", [tmp_path])
    assert top(tmp_path / "a.md") and not top(tmp_path / "sub" / "a.md") and not top(tmp_path / "a.txt")
    assert deep(tmp_path / "a.md") and deep(tmp_path / "sub" / "x" / "a.md") and not deep(tmp_path / "a.mdx")
    assert not deep(tmp_path.parent / "elsewhere.md")
    assert glob_filter("api/*.md", [tmp_path])(tmp_path / "api" / "a.md")


# ---------------------------------------------------------------------------- FolderWatcher


def test_catch_up_picks_up_what_changed_while_not_watching(tmp_path: Path, docs: Path) -> None:
    (tmp_path / "job.toml").write_text(CONFIG)
    settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
    before = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings)
    before.ingest([docs])
    before.close()
    (docs / "gamma.md").unlink()
    (docs / "epsilon.md").write_text(page("Epsilon", "defragment the epsilon disks"))
    w = Watching(tmp_path, docs)
    try:
        assert sorted(w.paths()) == ["alpha", "beta", "delta", "epsilon"]
        assert w.calls == []  # the catch-up is not a batch
        assert any(line.startswith(f"catch-up {docs}; added 1, updated 0, unchanged 3, deleted 1") for line in w.lines)
    finally:
        w.close()


def test_create_and_edit(watching: Watching, docs: Path) -> None:
    new = docs / "epsilon.md"
    new.write_text(page("Epsilon", "defragment the epsilon disks"))
    wait_until(lambda: "epsilon" in watching.hits("defragment"), "a new file is searchable")
    assert watching.calls == [([new], [])]  # only the file that changed, never a rescan

    (docs / "alpha.md").write_text(page("Alpha", "reticulate the alpha splines"))
    wait_until(lambda: watching.hits("reticulate") == ["alpha"], "the edit is searchable")
    assert watching.hits("install agent") == []  # the old text is gone
    # the batch is recorded once its sync returns, a moment after its commit is searchable
    wait_until(lambda: (watching.watcher.state()["last_batch"] or {}).get("updated") == 1, "batch 2 is recorded")
    state = watching.watcher.state()
    assert state["running"] and state["batches"] == 2 and state["pending"] == 0
    assert state["last_batch"]["changed"] == 1 and state["last_batch"]["updated"] == 1
    assert any(line.startswith("batch 2: 1 changed, 0 removed; added 0, updated 1") for line in watching.lines)


def test_rename_and_move_to_another_folder(watching: Watching, docs: Path) -> None:
    (docs / "alpha.md").rename(docs / "omega.md")
    wait_until(lambda: "alpha" not in watching.paths() and "omega" in watching.paths(), "the rename is applied")
    assert watching.hits("agent") == ["omega"]

    # Moved to another folder: a document is its path, so it is stored under its new id.
    (docs / "sub").mkdir()
    (docs / "beta.md").rename(docs / "sub" / "beta.md")
    where = (docs / "sub" / "beta.md").as_posix()
    wait_until(
        lambda: watching.paths().get("sub/beta") == where and "beta" not in watching.paths(),
        "the moved file is stored from its new path",
    )
    assert watching.hits("tokens") == ["sub/beta"]


def test_delete_files_and_folders(watching: Watching, docs: Path, tmp_path: Path) -> None:
    (docs / "fleeting.md").write_text(page("Fleeting", "gone before it was read"))
    (docs / "fleeting.md").unlink()  # never synced, so nothing to delete either
    (docs / "alpha.md").unlink()
    wait_until(lambda: "alpha" not in watching.paths(), "a deleted file's document is deleted")

    for name in ("sub", "moved"):
        (docs / name / "deeper").mkdir(parents=True)
        (docs / name / "deeper" / f"{name}-page.md").write_text(page(name.title(), f"carry the {name} crates"))
    new = {"sub/deeper/sub-page", "moved/deeper/moved-page"}
    wait_until(lambda: new <= set(watching.paths()), "files in new folders are stored")
    shutil.rmtree(docs / "sub")
    (docs / "moved").rename(tmp_path / "moved")  # one event for the folder, none for its files
    wait_until(lambda: not new & set(watching.paths()), "removed folders' documents go")
    assert sorted(watching.paths()) == ["beta", "delta", "gamma"]
    assert not [line for line in watching.lines if line.startswith("error")]


def test_new_subfolders_are_followed(watching: Watching, docs: Path, tmp_path: Path) -> None:
    (docs / "a" / "b").mkdir(parents=True)
    (docs / "a" / "b" / "nested.md").write_text(page("Nested", "polish the nested gears"))
    wait_until(lambda: "a/b/nested" in watching.hits("gears"), "a file in a new subfolder is searchable")
    outside = tmp_path / "bundle"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "bundled.md").write_text(page("Bundled", "unpack the bundled crates"))
    outside.rename(docs / "bundle")  # moved in whole: one event for the folder
    wait_until(lambda: "bundle/inner/bundled" in watching.hits("crates"), "a folder moved in is read")


def test_editor_scratch_files_are_never_stored(watching: Watching, docs: Path) -> None:
    (docs / ".git").mkdir()
    scratch_files = [".#alpha.md", "alpha.md~", "#alpha.md#", ".alpha.md.swp", ".alpha.md.swx", "alpha.md.tmp"]
    for name in [*scratch_files, "4913", ".DS_Store", ".git/notes.md", "readme.txt"]:
        (docs / name).write_text(page("Scratch", "zanzibar scratch text"))
    (docs / "sentinel.md").write_text(page("Sentinel", "the sentinel arrives"))
    wait_until(lambda: "sentinel" in watching.paths(), "the real file is stored")
    assert sorted(watching.paths()) == ["alpha", "beta", "delta", "gamma", "sentinel"]
    assert changed_files(watching) == [docs / "sentinel.md"]
    assert watching.hits("zanzibar") == []


def test_a_file_written_slowly_is_stored_only_in_its_final_form(tmp_path: Path, docs: Path) -> None:
    w = Watching(tmp_path, docs, settle_ms=1200)
    try:
        slow = docs / "slow.md"
        with slow.open("w") as fh:
            fh.write(page("Slow", "the first half about quokkas"))
            fh.flush()
            time.sleep(0.3)  # longer than the debounce, shorter than the settle time
            fh.write("\n## More\n\nThe second half about wombats.\n")
        wait_until(lambda: "slow" in w.paths(), "the slow file is stored")
        assert changed_files(w) == [slow]  # read once, after it stopped changing
        assert "quokkas" in w.texts("slow") and "wombats" in w.texts("slow")
    finally:
        w.close()


def test_a_burst_of_1000_files_is_a_few_batches(watching: Watching, docs: Path) -> None:
    burst = docs / "burst"
    burst.mkdir()
    for i in range(1000):
        (burst / f"note-{i:04}.md").write_text(f"# Note {i}\n\nBurst note number {i} mentions token{i} once.\n")

    def synced() -> bool:  # every file went to a sync, and every sync has logged its line
        return sum(len(c) for c, _ in watching.calls) >= 1000 and len(watching.lines) == 1 + len(watching.calls)

    wait_until(synced, "every burst file is synced", timeout=60)
    assert len(watching.paths()) == 1004
    assert len(watching.calls) <= 10, f"{len(watching.calls)} syncs for one burst"
    assert max(len(changed) for changed, _ in watching.calls) <= 500
    assert watching.hits("token737") == ["burst/note-0737"]


def test_bad_files_are_logged_and_the_watcher_goes_on(watching: Watching, docs: Path) -> None:
    (docs / "binary.md").write_bytes(b"\x00\x01\x02 not text")
    (docs / "empty.md").write_text("")
    (docs / "good.md").write_text(page("Good", "the good file lands"))
    wait_until(lambda: "good" in watching.paths(), "the good file is stored")
    wait_until(lambda: watching.watcher.state()["failed_files"] == 2, "both bad files are reported")
    failed = sorted(line for line in watching.lines if line.startswith("failed: "))
    assert failed[0].startswith(f"failed: {docs / 'binary.md'}: binary, not text")
    assert failed[1].startswith(f"failed: {docs / 'empty.md'}: empty")
    (docs / "later.md").write_text(page("Later", "still watching afterwards"))
    wait_until(lambda: "later" in watching.paths(), "a later file is still stored")
    assert watching.watcher.state()["running"]


def test_a_symlink_out_of_the_watched_folder_is_never_read(tmp_path: Path, docs: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.md").write_text(page("Secret", "the outside secret zanzibar"))
    (outside / "deep" / "hidden.md").write_text(page("Hidden", "the outside hidden quokka"))
    (docs / "early.md").symlink_to(outside / "secret.md")  # there at the catch-up (the loader's walk)
    (docs / "inner.md").symlink_to(docs / "alpha.md")  # inside, to a file read anyway: not read twice
    w = Watching(tmp_path, docs)
    try:
        assert "early" not in w.paths() and "inner" not in w.paths() and "alpha" in w.paths()
        (docs / "host.md").symlink_to(outside / "secret.md")  # made while watching
        (docs / "linked").symlink_to(outside / "deep", target_is_directory=True)
        (docs / "marker.md").write_text(page("Marker", "the batch is done"))
        wait_until(lambda: "marker" in w.paths(), "the batch with the links is synced")
        wait_until(lambda: w.watcher.state()["failed_files"] >= 2, "the links are reported")
        assert not {"early", "host", "hidden"} & set(w.paths())
        assert w.hits("zanzibar") == [] and w.hits("quokka") == []
        assert any(line.startswith(f"failed: {docs / 'host.md'}: ") and "outside" in line for line in w.lines)
    finally:
        w.close()


def test_the_root_folder_deleted_and_made_again_is_watched_again(watching: Watching, docs: Path) -> None:
    shutil.rmtree(docs)
    wait_until(lambda: not watching.paths(), "the deleted folder's documents are deleted")
    docs.mkdir()
    for doc_id, text in CORPUS.items():
        (docs / f"{doc_id}.md").write_text(text)
    (docs / "reborn.md").write_text(page("Reborn", "the folder came back with a phoenix"))
    wait_until(lambda: "reborn" in watching.paths(), "a file in the folder made again is stored")
    (docs / "later.md").write_text(page("Later", "and later edits are seen too"))
    wait_until(lambda: "later" in watching.paths(), "a later file is stored")
    assert sorted(watching.paths()) == sorted([*CORPUS, "later", "reborn"])
    assert watching.hits("phoenix") == ["reborn"] and watching.watcher.state()["running"]
    # what is logged depends on whether a tick fell between the rmtree and the mkdir
    assert {f"{docs} was deleted: waiting for it to come back", f"{docs} was replaced: watching it again"} & set(
        watching.lines
    )


def test_the_root_folder_made_again_with_its_old_inode_is_watched_again(watching: Watching, docs: Path) -> None:
    """Linux often gives a folder made at once in a deleted one's place its inode: the watcher
    must not take it for the old folder, whose watch died with it."""
    for attempt in range(8):  # until the inode is reused (a new one is the test above's case)
        inode, calls = os.stat(docs).st_ino, len(watching.calls)
        with watching.turns:  # the watcher waits in the removals' sync, before it looks at the folder
            shutil.rmtree(docs)
            docs.mkdir()
            reused = os.stat(docs).st_ino == inode
            wait_until(lambda: any(removed for _, removed in watching.calls[calls:]), "the removals reach apply")
            (docs / f"reborn{attempt}.md").write_text(page("Reborn", "the folder came back with a phoenix"))
        wait_until(lambda: f"reborn{attempt}" in watching.paths(), "a file in the folder made again is stored")
        if reused:
            break
    else:
        pytest.skip("this filesystem gave the new folder a new inode each time: the test above covers that case")
    (docs / "later.md").write_text(page("Later", "and later edits are seen too"))
    wait_until(lambda: "later" in watching.paths(), "a later file is stored")
    assert sorted(watching.paths()) == ["later", f"reborn{attempt}"]
    assert f"{docs} was replaced: watching it again" in watching.lines


def test_an_exception_from_apply_is_logged_and_the_watcher_goes_on(tmp_path: Path, docs: Path) -> None:
    holder: list[Watching] = []

    def flaky(changed: list[Path], removed: list[Path]) -> IngestReport:
        if len(holder[0].calls) == 1:
            raise RuntimeError("disk on fire")
        return sync_paths(holder[0].job, changed, removed)

    w = Watching(tmp_path, docs, apply=flaky)
    holder.append(w)
    try:
        (docs / "first.md").write_text(page("First", "lost in the fire"))
        wait_until(lambda: w.watcher.state()["last_error"], "the error is recorded")
        assert any(
            line.startswith("error: batch 1: 1 changed, 0 removed: RuntimeError: disk on fire") for line in w.lines
        )
        (docs / "second.md").write_text(page("Second", "after the fire"))
        wait_until(lambda: "second" in w.paths(), "the next batch is applied")
        assert w.watcher.state()["running"]
    finally:
        w.close()


def test_job_watcher_runs_every_sync_through_locked(tmp_path: Path, docs: Path) -> None:
    """What `plm serve --watch` uses: each sync (the catch-up included) under the caller's lock."""
    (tmp_path / "job.toml").write_text(CONFIG)
    settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
    job = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings)
    lock, held = threading.Lock(), []

    def locked(work: Callable[[Job], IngestReport]) -> IngestReport:
        with lock:
            held.append(work)
            return work(job)

    watcher = job_watcher(job, [docs], locked=locked, debounce_ms=50, log=lambda line: None)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: watcher.state()["caught_up"], "the catch-up is done")
        (docs / "notes.txt").write_text("not markdown")  # the loader would not read it
        (docs / "epsilon.md").write_text(page("Epsilon", "defragment the epsilon disks"))
        wait_until(lambda: (watcher.state()["last_batch"] or {}).get("added") == 1, "the new file is synced")
        assert len(held) == 2  # the catch-up and one batch; the .txt file was never synced
        assert sorted(job.open().store.doc_paths()) == ["alpha", "beta", "delta", "epsilon", "gamma"]
    finally:
        stop.set()
        thread.join(20)
        job.close()


# ---------------------------------------------------------------------------- plm watch


def test_plm_watch_syncs_edits_and_exits_cleanly_on_sigterm(tmp_path: Path, docs: Path) -> None:
    (tmp_path / "job.toml").write_text(CONFIG)
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(tmp_path / "data")}
    log = tmp_path / "watch.log"
    args = ["watch", str(docs), "--config", str(tmp_path / "job.toml"), "--index", str(tmp_path / "index")]
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "plm_index.cli", *args, "--debounce-ms", "100"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
        )
    try:
        wait_until(lambda: "catch-up" in log.read_text(), "plm watch has caught up", timeout=60)
        (docs / "gamma.md").write_text(page("Gamma", "calibrate the gamma telescopes"))
        settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
        reader = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings)
        wait_until(lambda: [h.doc_id for h in reader.retrieve("telescopes")] == ["gamma"], "the edit is searchable")
        reader.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "batch 1: 1 changed, 0 removed; added 0, updated 1" in text
    assert text.rstrip().endswith("SIGTERM: stopped after the batch in progress")


def test_a_saved_pdf_or_word_file_is_searchable_and_an_image_is_never_read(tmp_path: Path, docs: Path) -> None:
    from documents import write_docx, write_pdf

    folder_config = CONFIG.replace('use = "markdown_dir"\npattern = "**/*.md"', 'use = "folder"')
    assert folder_config != CONFIG
    (tmp_path / "job.toml").write_text(folder_config)
    settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
    job = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings)
    lines: list[str] = []
    watcher = FolderWatcher(
        [docs],
        lambda changed, removed: sync_paths(job, changed, removed),
        catch_up=lambda d, stop, _listed: job.ingest(d, prune=True, stop=stop),
        loader_filter=loader_filter_for(job.loader, [docs]),
        log=lines.append,
        debounce_ms=50,
        settle_ms=300,
    )
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    reader = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index", settings=settings)
    try:
        wait_until(lambda: watcher.state()["caught_up"], "the catch-up sync is done")
        write_pdf(docs / "paper.pdf", [["The heron migrates south in winter."]])
        write_docx(docs / "report.docx", [("Heading 1", "Budget"), ("", "The ibis budget doubled.")])
        (docs / "logo.png").write_bytes(b"\x89PNG not text")
        hits = lambda text: [h.doc_id for h in reader.retrieve(text, k=5)]  # noqa: E731
        wait_until(lambda: hits("heron") == ["paper.pdf"], "a saved PDF is searchable")
        wait_until(lambda: hits("ibis") == ["report.docx"], "a saved Word file is searchable")
        write_pdf(docs / "paper.pdf", [["The egret stays all year."]])
        wait_until(lambda: hits("egret") == ["paper.pdf"] and hits("heron") == [], "an edited PDF is read again")
        assert "logo" not in " ".join(lines) and "logo.png" not in reader.open().store.doc_paths()
    finally:
        stop.set()
        thread.join(20)
        job.close()
        reader.close()
