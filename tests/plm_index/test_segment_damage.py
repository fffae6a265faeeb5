"""Damage to a segmented index's files is named with its real cause: in the log of the query
that meets it, in `plm index stats` (exit 1, with the repair command) and in a server's
`/status`; queries meanwhile answer from the store, and `plm index rebuild` repairs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # seconds each: the full suite and CI run them

pytest.importorskip("bm25s")

REPO = Path(__file__).resolve().parents[2]
CONFIG = """
[job]
name = "dmg"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
tokenizer = "bm25s_stem"
"""
FIRST = {
    "alpha": "Nightly backups of the alpha volume run at two.",
    "beta": "Beta tokens expire after one hour.",
    "delta": "Delta caches warm up slowly.",
    "epsilon": "Epsilon queues drain at night.",
}
SECOND = {"gamma": "Gamma mirrors replicate the archive weekly.", "beta": "Beta tokens expire after two hours."}


def plm(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(data), "COLUMNS": "400"}
    env.pop("PLM_SERVER", None)
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=180, input="")


def write_docs(folder: Path, docs: dict[str, str]) -> None:
    for name, text in docs.items():
        (folder / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n")


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of two syncs: two segments, the first with a deleted row (beta changed)."""
    root = tmp_path_factory.mktemp("synced")
    (root / "docs").mkdir()
    (root / "job.toml").write_text(CONFIG)
    for docs in (FIRST, SECOND):
        write_docs(root / "docs", docs)
        res = plm("ingest", str(root / "docs"), "--config", str(root / "job.toml"), data=root / "data")
        assert res.returncode == 0, res.stderr
    return root


def stage(root: Path) -> Path:
    (base,) = (root / "data" / "dmg").glob("bm25s-*")
    return base


def manifests(base: Path) -> list[Path]:
    return sorted((base / "manifests").glob("v*.json"))


def newest(base: Path) -> Path:
    return manifests(base)[-1]


def named(base: Path, i: int) -> dict[str, str]:
    return dict(json.loads(newest(base).read_text())["segments"][i])


def truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def flip_in_place(path: Path) -> None:
    """Change bytes without changing the file's size (bit rot)."""
    raw = bytearray(path.read_bytes())
    raw[-4:] = bytes(b ^ 0xFF for b in raw[-4:])
    path.write_bytes(bytes(raw))


# case -> (damage, what the log and stats must say)
CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "newest manifest truncated": (lambda b: truncate(newest(b), 40), "is not valid JSON"),
    "newest manifest random bytes": (lambda b: newest(b).write_bytes(os.urandom(300)), "is not text"),
    "newest manifest {}": (lambda b: newest(b).write_text("{}"), "lacks valid fields format"),
    "newest manifest names a bad segment": (
        lambda b: newest(b).write_text(json.dumps({**json.loads(newest(b).read_text()), "segments": [{"name": 3}]})),
        "names a segment wrongly",
    ),
    "newest manifest is an older one copied over it": (
        lambda b: newest(b).write_text(manifests(b)[0].read_text()),
        "not the one its file name says",
    ),
    "segment folder missing": (
        lambda b: shutil.rmtree(b / "segments" / named(b, 1)["name"]),
        "is missing, yet manifest",
    ),
    "deletion file missing": (
        lambda b: (b / "deletes" / named(b, 0)["deleted"]).unlink(),
        "is missing, yet manifest",
    ),
    "older manifest garbled": (lambda b: manifests(b)[0].write_text("garbage"), "is not valid JSON"),
    "newest manifest replaced by a folder": (
        lambda b: (lambda m: (m.unlink(), m.mkdir()))(newest(b)),
        "cannot be read (Is a directory)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_damage_is_named_reported_and_repaired(synced: Path, tmp_path: Path, case: str) -> None:
    root = tmp_path / "copy"
    shutil.copytree(synced, root)
    cfg, data, base = root / "job.toml", root / "data", stage(root)
    damage, cause = CASES[case]
    if "deletion" in case:
        assert named(base, 0)["deleted"], "the first segment has a deleted row (beta changed)"
    damage(base)

    res = plm("query", "gamma mirrors", "--config", str(cfg), "--json", data=data)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["hits"][0]["doc_id"] == "gamma"
    if "older" not in case:  # an older version's manifest is not on a query's path
        assert cause in res.stderr and "plm index rebuild" in res.stderr, res.stderr
        assert "merge replaced" not in res.stderr

    stats = plm("index", "stats", "--config", str(cfg), data=data)
    assert stats.returncode == 1, stats.stdout + stats.stderr
    assert cause in stats.stdout and "problems: none" not in stats.stdout
    assert f"plm index rebuild --config {cfg}" in stats.stdout + stats.stderr

    rebuilt = plm("index", "rebuild", "--config", str(cfg), data=data)
    assert rebuilt.returncode == 0, rebuilt.stderr
    stats = plm("index", "stats", "--config", str(cfg), data=data)
    assert stats.returncode == 0 and "problems: none" in stats.stdout, stats.stdout + stats.stderr
    res = plm("query", "gamma mirrors", "--config", str(cfg), "--json", data=data)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert json.loads(res.stdout)["hits"][0]["doc_id"] == "gamma"


@pytest.mark.parametrize(
    ("case", "cause"),
    [
        ("truncated", "were written (truncated?)"),
        ("checksum", "fails its checksum"),
        ("deletions garbled", "are corrupt (not an array of row numbers)"),
    ],
)
def test_a_damaged_segment_file_is_reported_and_repaired(synced: Path, tmp_path: Path, case: str, cause: str) -> None:
    """A segment's data damaged: the query refuses it in one line (as any damaged build);
    stats names it, rebuild repairs it."""
    root = tmp_path / "copy"
    shutil.copytree(synced, root)
    cfg, data, base = root / "job.toml", root / "data", stage(root)
    tf = base / "segments" / named(base, 1)["name"] / "tf.npy"
    if case == "truncated":
        truncate(tf, tf.stat().st_size - 8)
    elif case == "checksum":
        flip_in_place(tf)
    else:
        (base / "deletes" / named(base, 0)["deleted"]).write_bytes(os.urandom(200))
    res = plm("query", "gamma mirrors", "--config", str(cfg), data=data)
    assert res.returncode == 2 and cause in res.stderr and "Traceback" not in res.stderr, res.stderr
    stats = plm("index", "stats", "--config", str(cfg), data=data)
    assert stats.returncode == 1 and cause in stats.stdout, stats.stdout + stats.stderr
    assert plm("index", "rebuild", "--config", str(cfg), data=data).returncode == 0
    assert plm("index", "stats", "--config", str(cfg), data=data).returncode == 0
    res = plm("query", "gamma mirrors", "--config", str(cfg), "--json", data=data)
    assert res.returncode == 0 and json.loads(res.stdout)["hits"][0]["doc_id"] == "gamma"


def test_status_lists_the_damage_with_the_repair(synced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fastapi")
    from plm_index.job import Job
    from plm_serve.service import Service

    root = tmp_path / "copy"
    shutil.copytree(synced, root)
    monkeypatch.setenv("PLM_DATA_DIR", str(root / "data"))
    base = stage(root)
    job = Job.from_config(root / "job.toml").open(create=False)
    service = Service(job)
    try:
        assert service.status()["problems"] == [] and service.status()["repair"] is None
        (base / "deletes" / named(base, 0)["deleted"]).unlink()
        newest(base).write_text("{}")
        status = service.status()
        assert len(status["problems"]) == 1 and "lacks valid fields" in status["problems"][0]
        assert status["repair"] == f"plm index rebuild --config {root / 'job.toml'}"
        manifests(base)[0].write_text(json.dumps({**json.loads(manifests(base)[0].read_text()), "position": "x"}))
        assert len(service.status()["problems"]) == 2
    finally:
        job.close()


def test_two_segment_folders_swapped_are_damage_not_other_answers(tmp_path: Path) -> None:
    """Two segments of as many rows, their folders swapped: each folder is whole, but it is not
    the segment its manifest entry names, so its deletions would apply to another segment's
    rows (a deleted text found again, a live one lost). A query refuses it in one line, stats
    names it, rebuild repairs it."""
    root, cfg, data = tmp_path, tmp_path / "job.toml", tmp_path / "data"
    (root / "docs").mkdir()
    cfg.write_text(CONFIG)
    first_docs = {k: FIRST[k] for k in ("alpha", "beta", "delta")}
    for docs in (first_docs, {**SECOND, "epsilon": FIRST["epsilon"]}):  # 3 rows, then 3 more
        write_docs(root / "docs", docs)
        assert plm("ingest", str(root / "docs"), "--config", str(cfg), data=data).returncode == 0
    base = stage(root)
    first, second = (base / "segments" / named(base, i)["name"] for i in (0, 1))
    assert named(base, 0)["rows"] == named(base, 1)["rows"] == 3 and named(base, 0)["deleted"]
    first.rename(base / "segments" / "swap")
    second.rename(first)
    (base / "segments" / "swap").rename(second)

    res = plm("query", "beta tokens one hour", "--config", str(cfg), "--json", data=data)
    assert res.returncode == 2 and "plm index rebuild" in res.stderr and "Traceback" not in res.stderr, (
        res.stdout + res.stderr
    )
    assert str(first) in res.stderr or str(second) in res.stderr, res.stderr
    stats = plm("index", "stats", "--config", str(cfg), data=data)
    assert stats.returncode == 1 and "problems: none" not in stats.stdout, stats.stdout + stats.stderr
    assert str(first) in stats.stdout and str(second) in stats.stdout, stats.stdout

    assert plm("index", "rebuild", "--config", str(cfg), data=data).returncode == 0
    assert plm("index", "stats", "--config", str(cfg), data=data).returncode == 0
    res = plm("query", "beta tokens hours", "--config", str(cfg), "--json", data=data)
    hits = json.loads(res.stdout)["hits"]
    assert [h["doc_id"] for h in hits if "beta" in h["doc_id"]] == ["beta"]
    assert all("one hour" not in h["text"] for h in hits), hits
