"""A build damaged in place (bit rot, a bad disk: same size, mtime and inode) is noticed by
content before it is used: `plm query` (also `--json`), `plm mcp` and `plm index stats`
say so in one line, and `plm index rebuild` replaces it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plm_needs import needs

pytestmark = needs("bm25s", extra="bm25")

REPO = Path(__file__).resolve().parents[2]
BM25 = """
[job]
name = "damaged"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
target_words = 40
min_words = 10
max_words = 60
[query.retrieve]
use = "bm25s"
tokenizer = "bm25s_stem"
"""
DENSE = (
    BM25.replace('use = "bm25s"\ntokenizer = "bm25s_stem"', 'use = "dense"')
    + """
[embedder]
use = "sentence_transformers"
model = "all-MiniLM-L6-v2"
"""
)
DOCS = {
    "alpha": "# Alpha\n\n## Backup\n\nNightly backups of the alpha volume run at two in the morning.\n",
    "beta": "# Beta\n\n## Tokens\n\nBeta tokens expire after one hour of use and rotate.\n",
    "gamma": "# Gamma\n\n## Mirrors\n\nGamma mirrors replicate the archive every week.\n",
}


def plm(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(data), "COLUMNS": "200"}
    env.pop("PLM_SERVER", None)
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=180, input="")


def ingested(tmp_path: Path, config: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / f"{name}.md").write_text(text)
    cfg = tmp_path / "job.toml"
    cfg.write_text(config)
    res = plm("ingest", str(docs), "--config", str(cfg), data=tmp_path / "data")
    assert res.returncode == 0, res.stderr
    return cfg


def damage_in_place(path: Path, at: int, data: bytes) -> None:
    """Overwrite bytes without changing the file's size, mtime or inode."""
    before = path.stat()
    with path.open("r+b") as fh:
        fh.seek(at)
        fh.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


def build_files(data: Path, kind: str) -> list[Path]:
    (base,) = (data / "damaged").glob(f"{kind}-*")
    (segment,) = (base / "segments").iterdir()  # one segment: one ingest
    return sorted((p for p in segment.iterdir() if p.suffix == ".npy"), key=lambda p: -p.stat().st_size)


def assert_one_line_error(res: subprocess.CompletedProcess[str], rc: int = 2) -> None:
    assert res.returncode == rc, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "corrupt" in res.stderr and "plm index rebuild" in res.stderr


@pytest.mark.slow
def test_a_bm25_build_damaged_in_place_is_noticed_and_rebuilt(tmp_path: Path) -> None:
    cfg, data = ingested(tmp_path, BM25), tmp_path / "data"
    assert plm("query", "alpha backups", "--config", str(cfg), data=data).returncode == 0  # opened once: trusted
    for file in build_files(data, "bm25s"):
        size = file.stat().st_size
        damage_in_place(file, size - 16, b"\xff" * 16)  # the array's last values: indexes out of range
    for args in (("query", "alpha backups"), ("query", "alpha backups", "--json")):
        res = plm(*args, "--config", str(cfg), data=data)
        assert_one_line_error(res)
        assert res.stdout == ""
    # `plm mcp` starts (each search is then a tool error saying the same) and ends with its stdin.
    res = plm("mcp", "--config", str(cfg), data=data)
    assert res.returncode == 0 and "Traceback" not in res.stderr and res.stdout == "", res.stderr
    stats = plm("index", "stats", "--config", str(cfg), data=data)
    assert stats.returncode == 1 and "fails its checksum" in stats.stdout, stats.stdout + stats.stderr
    rebuilt = plm("index", "rebuild", "--config", str(cfg), data=data)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert plm("index", "stats", "--config", str(cfg), data=data).returncode == 0
    res = plm("query", "alpha backups", "--config", str(cfg), "--json", data=data)
    assert res.returncode == 0 and json.loads(res.stdout)["hits"][0]["doc_id"] == "alpha"


@pytest.mark.slow
def test_nan_written_into_saved_vectors_never_reaches_a_ranking(tmp_path: Path, minilm_path: str) -> None:
    cfg, data = ingested(tmp_path, DENSE), tmp_path / "data"
    (vectors,) = [p for p in build_files(data, "vectors") if "vectors" in p.name] or build_files(data, "vectors")[:1]
    damage_in_place(vectors, vectors.stat().st_size - 64, b"\x00\x00\xc0\x7f" * 16)  # float32 NaN
    res = plm("query", "alpha backups", "--config", str(cfg), "--json", data=data)
    assert_one_line_error(res)
    assert plm("index", "rebuild", "--config", str(cfg), data=data).returncode == 0
    res = plm("query", "alpha backups", "--config", str(cfg), "--json", data=data)
    assert res.returncode == 0, res.stderr
    hits = json.loads(res.stdout)["hits"]  # strict JSON: NaN would not parse as a number here
    assert hits and all(math.isfinite(h["score"]) for h in hits)
