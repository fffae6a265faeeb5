"""The Ray executor against the local one, on a real local Ray cluster the module starts.

- Same result: an index built on Ray equals the local one (documents, chunk ids, texts and
  enrichment; vectors within 1e-6) for the POC recipe on the sample corpus.
- A worker process killed mid-ingest (SIGKILL from inside a stage) loses and duplicates
  nothing: Ray restarts it and processes its batch again.
- The driver (`plm ingest --executor ray` in a subprocess) killed mid-ingest leaves a
  consistent store with whole batches, and the next ingest finishes the work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from plm_core.settings import Settings
from plm_index.job import Job
from plm_index.plugins import build_registry

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_DOCS = ROOT / "examples" / "sample_corpus" / "docs"
SUPPORT = Path(__file__).parent / "support"
N_DOCS = len(list(SAMPLE_DOCS.glob("*.md")))

LIGHT = """
[job]
name = "ray-light"
[embedder]
use = "sentence_transformers"
model = "{model}"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
target_words = 120
min_words = 20
max_words = 240
{extra}
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.bm25]
use = "bm25s"
[query.retrieve.retrievers.dense]
use = "dense"
[query.retrieve.fuser]
use = "rrf"
order = ["bm25", "dense"]
"""


@pytest.fixture(scope="module")
def ray_address() -> Any:
    """A local Ray cluster with 2 CPUs for this module; its workers can import the test stage."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # its servers on 127.0.0.1 only
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'plm[ray]')")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SUPPORT), *([old] if old else [])])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(SUPPORT))
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as err:  # noqa: BLE001 - any failure to start is a reason to skip
        pytest.skip(f"a local Ray cluster cannot start here: {err}")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        sys.path.remove(str(SUPPORT))
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def settings(data_dir: Path, batch: int = 8) -> Settings:
    return Settings(data_dir=str(data_dir), progress=False, ingest_batch=batch)


def contents(index_dir: Path, config: Path, registry: Any = None) -> dict[str, Any]:
    """Everything an ingest stored, in comparable form."""
    job = Job.from_config(config, index_dir=index_dir, settings=Settings(cache=False), registry=registry)
    job.open(create=False)
    try:
        ids, matrix, model = job.store.vectors()
        return {
            "documents": job.store.doc_fingerprints(),
            "chunks": sorted((dataclasses.asdict(c) for c in job.store.chunks()), key=lambda c: c["id"]),
            "vectors": dict(zip(ids, matrix, strict=True)),
            "model": model,
        }
    finally:
        job.close()


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    import numpy as np

    assert got["documents"] == want["documents"]
    assert len(got["documents"]) == N_DOCS
    assert [c["id"] for c in got["chunks"]] == [c["id"] for c in want["chunks"]]
    assert got["chunks"] == want["chunks"]  # texts, enrichment, offsets, metadata
    assert got["model"] == want["model"]
    assert sorted(got["vectors"]) == sorted(want["vectors"])
    worst = max(float(np.abs(got["vectors"][i] - want["vectors"][i]).max()) for i in want["vectors"])
    assert worst <= 1e-6, worst


def ingest(config: Path, index_dir: Path, data_dir: Path, overrides: list[str], registry: Any = None) -> Any:
    job = Job.from_config(config, overrides, index_dir=index_dir, settings=settings(data_dir), registry=registry)
    try:
        return job.ingest([SAMPLE_DOCS])
    finally:
        job.close()


def test_ray_ingest_equals_local_for_the_poc_recipe(ray_address: str, tmp_path: Path) -> None:
    config = ROOT / "configs" / "poc_parity.toml"
    local = ingest(config, tmp_path / "local", tmp_path / "data-local", [])
    remote = ingest(config, tmp_path / "ray", tmp_path / "data-ray", ["executor.use=ray"])
    assert local.as_dict()["added"] == remote.as_dict()["added"] == N_DOCS
    # Every stage ran in the workers (nothing came from a cache this process filled).
    assert remote.work["embed"] == local.work["embed"] == {"computed": local.chunks, "cached": 0}
    assert remote.work["keywords"]["computed"] == local.work["keywords"]["computed"] > 0
    assert_same(contents(tmp_path / "ray", config), contents(tmp_path / "local", config))
    # Both answer alike; the Ray-built index is current for the local executor too.
    hits = {}
    for index in ("ray", "local"):
        job = Job.from_config(config, index_dir=tmp_path / index, settings=settings(tmp_path / "data-local"))
        hits[index] = [h.chunk_id for h in job.retrieve("how do I rotate an API key", k=5)]
        assert job.ingest([SAMPLE_DOCS]).skipped
        job.close()
    assert hits["ray"] == hits["local"]


def test_a_worker_killed_mid_ingest_loses_and_duplicates_nothing(
    ray_address: str, tmp_path: Path, minilm_path: str
) -> None:
    import plm_crash_once

    registry = build_registry(extra_plugins=[plm_crash_once])
    marker = tmp_path / "crashed"
    victim = "deployments-and-rollbacks"  # the 10th of 40 documents: in the third batch of 8
    crash = f'[index.crash]\nuse = "crash_once"\ndoc_id = "{victim}"\nmarker = "{marker}"\n'
    config = tmp_path / "job.toml"
    config.write_text(LIGHT.format(model=minilm_path, extra=crash))

    report = ingest(config, tmp_path / "ray", tmp_path / "data-ray", ["executor.use=ray"], registry)
    assert marker.exists(), "the stage never ran on the victim document: the crash was not tested"
    pid = int(marker.read_text())
    assert pid != os.getpid()  # a Ray worker died, not this process
    assert len(report.added) == N_DOCS and not report.failed

    # The reference: the same config in this process, with the crash already spent.
    ingest(config, tmp_path / "local", tmp_path / "data-local", [], registry)
    want = contents(tmp_path / "local", config, registry)
    assert victim in want["documents"]
    assert_same(contents(tmp_path / "ray", config, registry), want)


def committed_documents(index_dir: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{index_dir / 'plm.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT count(*) FROM documents").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def test_the_driver_killed_mid_ingest_leaves_a_consistent_store(
    ray_address: str, tmp_path: Path, minilm_path: str
) -> None:
    config = tmp_path / "job.toml"
    config.write_text(LIGHT.format(model=minilm_path, extra=""))
    index = tmp_path / "ray"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PLM_PROGRESS": "0",
        "PLM_INGEST_BATCH": "1",  # one document per commit: many commits to land between
        "PLM_CACHE": "0",
        "PLM_DATA_DIR": str(tmp_path / "data"),
    }
    cli = [sys.executable, "-m", "plm_index.cli", "ingest", str(SAMPLE_DOCS), "--config", str(config)]
    cmd = [*cli, "--index", str(index), "--executor", "ray", "--address", ray_address]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while committed_documents(index) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    done = committed_documents(index)
    assert 0 < done < N_DOCS, f"killed after {done} of {N_DOCS} documents; stderr: {stderr[-2000:]}"

    job = Job.from_config(config, index_dir=index, settings=settings(tmp_path / "data"))
    job.open(create=False)
    assert job.store.consistency_problems() == []
    job.close()
    # The next run (on Ray again) skips what was committed and finishes the rest.
    report = ingest(config, index, tmp_path / "data", ["executor.use=ray"])
    assert report.unchanged == done and len(report.added) == N_DOCS - done
    ingest(config, tmp_path / "local", tmp_path / "data-local", [])
    assert_same(contents(index, config), contents(tmp_path / "local", config))


def test_address_needs_the_ray_executor(tmp_path: Path, minilm_path: str) -> None:
    config = tmp_path / "job.toml"
    config.write_text(LIGHT.format(model=minilm_path, extra=""))
    cli = [sys.executable, "-m", "plm_index.cli", "ingest", str(SAMPLE_DOCS), "--config", str(config)]
    res = subprocess.run([*cli, "--address", "auto"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert "--address needs --executor ray" in res.stderr


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1", "silent", "http"])
def test_an_address_where_no_cluster_answers_fails_fast(tmp_path: Path, address: str) -> None:
    import socket
    import threading

    pytest.importorskip("ray", reason="Ray is not installed (pip install 'plm[ray]')")
    listener = socket.socket()  # "silent": accepts and never answers; "http": answers as HTTP/1.1 does
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    kind, address = address, address if ":" in address else f"127.0.0.1:{listener.getsockname()[1]}"

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                if kind == "http":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    config = tmp_path / "job.toml"
    config.write_text(
        '[job]\nname = "ray-nowhere"\n[index.load]\nuse = "markdown_dir"\n[index.chunk]\n'
        'use = "markdown_semantic"\n[query.retrieve]\nuse = "bm25s"\n'
    )
    cli = [sys.executable, "-m", "plm_index.cli", "ingest", str(SAMPLE_DOCS), "--config", str(config)]
    env = {**os.environ, "PLM_DATA_DIR": str(tmp_path / "data"), "PLM_PROGRESS": "0"}
    env.pop("RAY_ADDRESS", None)
    start = time.monotonic()
    res = subprocess.run(
        [*cli, "--executor", "ray", "--address", address], capture_output=True, text=True, timeout=90, env=env
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert f"cannot reach the Ray cluster at {address!r}" in res.stderr
    assert time.monotonic() - start < 60  # Ray's own client retries for minutes
    listener.close()


BM25_ONLY = (
    '[job]\nname = "ray-bm25"\n[index.load]\nuse = "markdown_dir"\n[index.chunk]\n'
    'use = "markdown_semantic"\n[query.retrieve]\nuse = "bm25s"\n'
)


def test_a_cluster_without_cpus_is_said_at_once(tmp_path: Path) -> None:
    """Issue 45 D11: an ingest on a Ray cluster with no CPUs hung with no word (150 s)."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'plm[ray]')")
    (tmp_path / "job.toml").write_text(BM25_ONLY)
    probe = f"""
import ray
ray.init(num_cpus=0, include_dashboard=False, log_to_driver=False)
from plm_core.errors import PlmUserError
from plm_core.settings import Settings
from plm_index.job import Job
job = Job.from_config({str(tmp_path / "job.toml")!r}, ["executor.use=ray"], index_dir={str(tmp_path / "index")!r},
                      settings=Settings(cache=False, progress=False))
try:
    job.ingest([{str(SAMPLE_DOCS)!r}])
except PlmUserError as err:
    print("error:", err)
"""
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("RAY_ADDRESS", None)
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=150, env=env)
    assert "error: the local Ray cluster has 0 CPUs" in res.stdout, res.stdout + res.stderr[-2000:]
    assert "cpus_per_worker" in res.stdout and time.monotonic() - start < 120


def test_the_local_cluster_of_an_ingest_listens_on_127_0_0_1_only(tmp_path: Path) -> None:
    """Issue 45 D13: the local Ray that `plm ingest --executor ray` starts listened on every
    interface (GCS, raylets, driver, workers) and one agent on the machine's address."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'plm[ray]')")
    psutil = pytest.importorskip("psutil")
    (tmp_path / "job.toml").write_text(BM25_ONLY)
    cli = [sys.executable, "-m", "plm_index.cli", "ingest", str(SAMPLE_DOCS), "--config", str(tmp_path / "job.toml")]
    env = {**os.environ, "PLM_DATA_DIR": str(tmp_path / "data"), "PLM_PROGRESS": "0"}
    for name in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):  # plm must pin it itself
        env.pop(name, None)
    ingest = subprocess.Popen([*cli, "--executor", "ray"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    listening: set[tuple[str, str, int]] = set()
    deadline = time.monotonic() + 180
    while ingest.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            tree = {ingest.pid, *(p.pid for p in psutil.Process(ingest.pid).children(recursive=True))}
            for conn in psutil.net_connections(kind="inet"):
                if conn.pid in tree and conn.status == psutil.CONN_LISTEN:
                    with contextlib.suppress(psutil.Error):
                        listening.add((psutil.Process(conn.pid).name(), conn.laddr.ip, conn.laddr.port))
        time.sleep(0.2)
    out, err = ingest.communicate(timeout=60)
    assert ingest.returncode == 0, err.decode()[-2000:]
    assert listening, "no Ray server was seen listening: the check did not run"
    loopback = ("127.0.0.1", "::1", "::ffff:127.0.0.1")
    assert not [entry for entry in listening if entry[1] not in loopback], sorted(listening)
