"""A watcher's catch-up at a start: only what changed while nothing watched is synced
(plm_index/catch_up.py), with the same result as a whole `ingest(folder, prune=True)`, and
a file saved during the catch-up is synced as a batch of its own, not after it."""

from __future__ import annotations

import os
import random
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import plm_index.catch_up as catch_up_module
from plm_core.settings import Settings
from plm_index.catch_up import folder_changes
from plm_index.job import Job
from plm_serve.watcher import catch_up, job_watcher, listed_files

from .test_watcher import CONFIG, page, wait_until


def make_job(tmp: Path, name: str, config: str = CONFIG) -> Job:
    (tmp / f"{name}.toml").write_text(config)
    settings = Settings(progress=False, data_dir=str(tmp / "data"))
    return Job.from_config(tmp / f"{name}.toml", index_dir=tmp / name, settings=settings)


def direct(job: Job) -> Callable[[Callable[[Job], Any]], Any]:
    return lambda work: work(job)


def state(job: Job) -> tuple[dict[str, str], dict[str, str], int]:
    store = job.open().store
    return store.doc_paths(), store.doc_fingerprints(), len(store.chunks())


def age(docs: Path) -> None:
    """Files written a minute ago: a sync remembers them (one written within 2 s is read again)."""
    for path in docs.rglob("*.md"):
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))


def change_at_random(rng: random.Random, docs: Path, n: int) -> list[str]:
    """A few edits made while nothing watched: edit, touch, delete, add, rename, move."""
    done = []
    for _ in range(n):
        files = sorted(p for p in docs.rglob("*.md"))
        what = rng.choice(["edit", "touch", "delete", "add", "rename", "move", "other"])
        victim = rng.choice(files) if files else None
        if what == "edit" and victim:
            victim.write_text(page(victim.stem.title(), f"now says {rng.random():.6f}"))
        elif what == "touch" and victim:
            st = victim.stat()
            os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns - 10**10))  # same bytes, another mtime
        elif what == "delete" and victim:
            victim.unlink()
        elif what == "rename" and victim:
            victim.rename(victim.with_name(f"r{rng.randrange(10**6)}.md"))
        elif what == "move" and victim:
            (docs / "sub").mkdir(exist_ok=True)
            victim.rename(docs / "sub" / f"m{rng.randrange(10**6)}.md")
        elif what == "other":
            (docs / f"notes{rng.randrange(100)}.txt").write_text("not read by the loader")
        else:
            name = f"new{rng.randrange(10**6)}"
            (docs / f"{name}.md").write_text(page(name.title(), f"adds {rng.random():.6f}"))
        done.append(what)
    return done


def test_catching_up_equals_a_whole_sync_over_random_changes(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "deep" / "er").mkdir(parents=True)
    for i in range(30):
        where = docs if i % 3 else docs / "deep" / ("er" if i % 2 else "")
        (where / f"page{i:02d}.md").write_text(page(f"Page {i}", f"holds the word w{i}"))
    quick, whole = make_job(tmp_path, "quick"), make_job(tmp_path, "whole")
    quick.ingest([docs], prune=True)
    whole.ingest([docs], prune=True)
    rng = random.Random(7)
    took_quick = 0
    for round_ in range(8):
        done = change_at_random(rng, docs, rng.randrange(1, 6))
        aged = round_ % 3 != 2  # else every file was written just now: not remembered ("racy"), read again
        if aged:
            age(docs)
        listed = listed_files(quick.loader, docs)
        changes = folder_changes(quick, str(docs), listed, direct(quick))
        assert changes is not None, f"round {round_} ({done}): the whole sync was asked for"
        took_quick += bool(changes[0] or changes[1])
        report = catch_up(quick, direct(quick), direct(quick), [docs], threading.Event(), listed)
        assert not report.failed, report.failed
        whole.ingest([docs], prune=True)
        assert state(quick) == state(whole), f"round {round_} after {done}: {changes}"
        again = folder_changes(quick, str(docs), listed_files(quick.loader, docs), direct(quick))
        assert (again == ([], [])) if aged else (again is not None and again[1] == []), (round_, aged, again)
    assert took_quick >= 6  # the rounds changed something, and the quick path synced it
    quick.close()
    whole.close()


def test_a_catch_up_defers_to_a_whole_sync_when_it_cannot_tell(tmp_path: Path, monkeypatch: Any) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(4):
        (docs / f"p{i}.md").write_text(page(f"P{i}", f"word{i}"))
    age(docs)
    job = make_job(tmp_path, "index")
    listed = listed_files(job.loader, docs)
    assert folder_changes(job, str(docs), listed, direct(job)) is None  # never ingested
    job.ingest([docs], prune=True)
    assert folder_changes(job, str(docs), listed, direct(job)) == ([], [])
    # The store lost a document its record vouches for (a store restored from a backup): read again.
    job.open().store.delete_documents(["p3"])
    assert folder_changes(job, str(docs), listed, direct(job)) == ([str(docs / "p3.md")], [])
    job.ingest([docs], prune=True)
    other = tmp_path / "other"
    shutil.copytree(docs, other)
    assert folder_changes(job, str(other), listed_files(job.loader, other), direct(job)) is None  # unknown root
    # Another chunking: every document is chunked again by the whole sync.
    rechunk = make_job(tmp_path, "index", CONFIG.replace("target_words = 40", "target_words = 41"))
    assert folder_changes(rechunk, str(docs), listed, direct(rechunk)) is None
    rechunk.close()
    # A file no longer read (the pattern changed) but still there: the whole sync notes it.
    narrow = make_job(tmp_path, "index", CONFIG.replace('pattern = "**/*.md"', 'pattern = "p[012].md"'))
    assert folder_changes(narrow, str(docs), listed_files(narrow.loader, docs), direct(narrow)) is None
    narrow.close()
    # More changes than a batch should carry.
    monkeypatch.setattr(catch_up_module, "MAX_CHANGES", 2)
    for i in range(3):
        (docs / f"p{i}.md").write_text(page(f"P{i}", f"changed{i}"))
    assert folder_changes(job, str(docs), listed, direct(job)) is None
    monkeypatch.setattr(catch_up_module, "MAX_CHANGES", 3)
    assert folder_changes(job, str(docs), listed, direct(job)) == ([str(docs / f"p{i}.md") for i in range(3)], [])
    job.close()


def test_a_file_saved_during_the_catch_up_is_synced_before_it_ends(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"p{i}.md").write_text(page(f"P{i}", f"word{i}"))
    job = make_job(tmp_path, "index")
    job.ingest([docs], prune=True)
    lock, entered, release = threading.Lock(), threading.Event(), threading.Event()

    def locked(work: Callable[[Job], Any]) -> Any:
        with lock:
            return work(job)

    def read(work: Callable[[Job], Any]) -> Any:  # the catch-up's store read, held back
        entered.set()
        release.wait(30)
        return locked(work)

    watcher = job_watcher(job, [docs], locked=locked, read=read, debounce_ms=50, settle_ms=100, log=lambda _: None)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    reader = make_job(tmp_path, "index")
    try:
        wait_until(entered.is_set, "the catch-up reads the store")
        (docs / "saved.md").write_text(page("Saved", "written during the catch-up"))
        wait_until(lambda: "saved" in reader.open().store.doc_paths(), "the save is synced")
        assert not watcher.state()["caught_up"]  # the catch-up is still waiting
        release.set()
        wait_until(lambda: watcher.state()["caught_up"], "the catch-up is done")
        assert sorted(reader.open().store.doc_paths()) == ["p0", "p1", "p2", "saved"]
    finally:
        release.set()
        stop.set()
        thread.join(20)
        reader.close()
        job.close()


@pytest.mark.parametrize("gone", ["file", "folder"])
def test_a_catch_up_removes_what_went_while_nothing_watched(tmp_path: Path, gone: str) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for i in range(3):
        (docs / "sub" / f"s{i}.md").write_text(page(f"S{i}", f"sub{i}"))
        (docs / f"p{i}.md").write_text(page(f"P{i}", f"word{i}"))
    job = make_job(tmp_path, "index")
    job.ingest([docs], prune=True)
    if gone == "file":
        (docs / "p1.md").unlink()
    else:
        shutil.rmtree(docs / "sub")
    listed = listed_files(job.loader, docs)
    report = catch_up(job, direct(job), direct(job), [docs], threading.Event(), listed)
    want = ["p0", "p2", "sub/s0", "sub/s1", "sub/s2"] if gone == "file" else ["p0", "p1", "p2"]
    assert sorted(job.open().store.doc_paths()) == want
    assert len(report.deleted) == (1 if gone == "file" else 3) and "find changes" in report.timings
    job.close()
