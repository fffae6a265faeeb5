"""Faults across processes and machines (issue 32), measured. Two parts (`--parts` picks):

  replicas  Two `plm serve` processes (each its own PLM_DATA_DIR, as on two machines) over one
            Postgres store (the `pgserver` wheel, in a temp folder), bm25s built per replica
            from the stored chunks. (1) Replication: N writes (POST /documents), alternating
            replicas; the delay until the OTHER replica's GET /query finds the write.
            (2) Faults, one at a time, each during a stream of writes round-robin over both
            replicas: SIGKILL of replica A (then restarted), SIGKILL of replica B, and a
            Postgres restart (pg_ctl stop -m fast, then start). The client retries a write
            that failed (connection error or non-2xx) on the other replica until it is
            acknowledged. Afterwards every write must be in the store exactly once (one
            document row, its one chunk) and found exactly once by GET /query on BOTH replicas.
  ray       A Ray cluster of a head (0 CPUs) and two worker nodes (`ray.cluster_utils.Cluster`,
            every node and the driver pinned to 127.0.0.1): an ingest of the sample corpus
            through the Ray executor (the example plugin's `hashed_words` embedder, bm25s +
            dense) must equal the local executor's (document fingerprints, chunks, vector
            bytes, query results); then the worker node hosting the batch actors is removed
            (`cluster.remove_node`) mid-ingest: the ingest completes or fails with one line,
            the store stays consistent, and a rerun gives the exact local result.

Prints one JSON line; exits 1 when any check fails.

  python bench/bench_faults.py --writes 100 --stream 40 --json bench/results/faults.json
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PLM_PROGRESS", "0")
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# ray.init(address="127.0.0.1:PORT") rewrites a loopback address to the machine's own
# (ray._private.services.resolve_ip_for_localhost) unless Ray takes clusters to be off: with
# this set before Ray is imported (the nodes inherit it), every node and the driver stay on
# 127.0.0.1.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "plm_plugins" / "executors" / "support"
SAMPLE_DOCS = ROOT / "examples" / "sample_corpus" / "docs"
SCHEMA = "plm_faults"

SERVE_CONFIG = """
[job]
name = "faults"
[store]
use = "postgres"
dsn = "{dsn}"
schema = "{schema}"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
target_words = 40
min_words = 10
max_words = 60
[query.retrieve]
use = "{retriever}"
{retriever_args}
"""
RETRIEVERS = {"bm25s": 'tokenizer = "bm25s_stem"', "pg_fulltext": 'mode = "or"'}


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 4)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- Postgres
class Postgres:
    """A pgserver Postgres in a short temp folder (the socket path must fit in 107 bytes)."""

    def __init__(self) -> None:
        import pgserver

        self.folder = Path(tempfile.mkdtemp(prefix="plm-pgf-"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server = pgserver.get_server(self.folder, cleanup_mode="stop")

    def new_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.server.get_uri(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return str(self.server.get_uri(name))

    def stop(self) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.folder, user=self.server.system_user)

    def start(self) -> None:
        self.server.ensure_postgres_running()

    def close(self) -> None:
        try:
            self.server.cleanup()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


# --------------------------------------------------------------------------- replicas
class Replica:
    """One `plm serve --create` process on 127.0.0.1 with its own data folder."""

    def __init__(self, name: str, root: Path, config: Path) -> None:
        self.name, self.config, self.port = name, config, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in ("PLM_API_KEY", "PLM_SERVER")}
        self.env = {**env, "PLM_DATA_DIR": str(root / f"data-{name}"), "PLM_PROGRESS": "0"}
        self.log = root / f"serve-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, wait_s: float = 120) -> float:
        """Start and wait for /health; returns the seconds it took."""
        import httpx

        cmd = [sys.executable, "-m", "plm_index.cli", "serve", "--config", str(self.config)]
        cmd += ["--port", str(self.port), "--create"]
        t0 = time.monotonic()
        with self.log.open("a") as log:
            log.write(f"--- start {self.starts}\n")
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        self.starts += 1
        while time.monotonic() - t0 < wait_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"replica {self.name} did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=30)


LETTERS = "bcdfghjkmnpqrtvwxz"  # no vowel or s: the stemmer leaves such a word whole


def token(run: str, i: int) -> str:
    """A word that only write `i` holds."""
    digits = ""
    n = i
    for _ in range(4):
        digits += LETTERS[n % len(LETTERS)]
        n //= len(LETTERS)
    return f"{run}{digits}"


def record(run: str, i: int) -> dict[str, str]:
    return {"id": f"{run}-{i:05d}", "text": f"Write {i} of the stream mentions {token(run, i)} once."}


def hits_for(replica: Replica, word: str, client: Any) -> list[str] | None:
    """doc ids of GET /query?q=word on `replica` (None: not answered with 200)."""
    import httpx

    try:
        response = client.get(replica.url + "/query", params={"q": word, "k": 10}, timeout=10)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return [hit["doc_id"] for hit in response.json()["hits"]]


def wait_found(replica: Replica, word: str, doc_id: str, client: Any, timeout: float) -> float | None:
    """Seconds until GET /query on `replica` finds `doc_id` for `word`; None when it never did."""
    t0 = time.monotonic()
    while True:
        hits = hits_for(replica, word, client)
        if hits is not None and doc_id in hits:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            return None
        time.sleep(0.02)


def post(replica: Replica, rec: dict[str, str], client: Any) -> tuple[bool, str]:
    """(acknowledged with 2xx, what happened)."""
    import httpx

    try:
        response = client.post(replica.url + "/documents", json={"records": [rec]}, timeout=60)
    except httpx.HTTPError as err:
        return False, type(err).__name__
    if 200 <= response.status_code < 300:
        return True, str(response.status_code)
    return False, str(response.status_code)


def replication(replicas: list[Replica], run: str, n: int, client: Any, timeout: float) -> dict[str, Any]:
    delays: list[float] = []
    own: list[float] = []
    missing = 0
    for i in range(n):
        writer, other = replicas[i % 2], replicas[1 - i % 2]
        rec = record(run, i)
        ok, what = post(writer, rec, client)
        if not ok:
            raise RuntimeError(f"write {i} to {writer.name} failed with no fault: {what}")
        t_own = wait_found(writer, token(run, i), rec["id"], client, 2.0)
        t_other = wait_found(other, token(run, i), rec["id"], client, timeout)
        if t_own is not None:
            own.append(t_own)
        if t_other is None:
            missing += 1
        else:
            delays.append(t_other)
    return {
        "writes": n,
        "delay_s": {
            "p50": pct(delays, 0.5),
            "p95": pct(delays, 0.95),
            "max": round(max(delays), 4) if delays else None,
        },
        "own_replica_s": {"p50": pct(own, 0.5), "max": round(max(own), 4) if own else None},
        "own_replica_immediate": sum(1 for t in own if t < 0.05),
        "not_found_within_s": {str(timeout): missing},
        "within_2s": sum(1 for t in delays if t <= 2.0),
    }


class Stream:
    """A client writing records one after another, round-robin over the replicas; a failed
    write (no answer, or 5xx) is retried (alternating replicas, 0.2 s apart) until acknowledged
    or `deadline_s`. A 4xx tells a client not to retry: it is counted as a failed check."""

    def __init__(self, replicas: list[Replica], run: str, n: int, deadline_s: float) -> None:
        self.replicas, self.run, self.n, self.deadline_s = replicas, run, n, deadline_s
        self.acked_first_try: list[int] = []
        self.retried: list[int] = []  # acknowledged after >= 1 failure
        self.given_up: list[int] = []
        self.failures: dict[str, int] = {}  # what a failed attempt was
        self.refused_4xx = 0  # failures that told the client not to retry (the request's fault)
        self.done_writes = 0
        self.progress = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import httpx

        with httpx.Client() as client:
            for i in range(self.n):
                rec, target, failed, t0 = record(self.run, i), i % 2, 0, time.monotonic()
                while True:
                    ok, what = post(self.replicas[target], rec, client)
                    if ok:
                        (self.retried if failed else self.acked_first_try).append(i)
                        break
                    failed += 1
                    if what.startswith("4"):  # a client must not retry a 4xx: counted, retried here to go on
                        self.refused_4xx += 1
                    key = f"{self.replicas[target].name}:{what}"
                    self.failures[key] = self.failures.get(key, 0) + 1
                    if time.monotonic() - t0 > self.deadline_s:
                        self.given_up.append(i)
                        break
                    target = 1 - target
                    time.sleep(0.2)
                self.done_writes = i + 1
                self.progress.set()

    def wait_writes(self, k: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.done_writes < k and time.monotonic() < deadline and self.thread.is_alive():
            time.sleep(0.01)


def store_counts(dsn: str, prefix: str) -> tuple[dict[str, int], dict[str, int]]:
    """(document rows per id, chunk rows per document id) of the ids starting with `prefix`."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        docs = dict(
            db.execute(
                f"SELECT id, count(*) FROM {SCHEMA}.documents WHERE id LIKE %s GROUP BY id", (prefix + "-%",)
            ).fetchall()
        )
        chunks = dict(
            db.execute(
                f"SELECT doc_id, count(*) FROM {SCHEMA}.chunks WHERE doc_id LIKE %s GROUP BY doc_id", (prefix + "-%",)
            ).fetchall()
        )
    return docs, chunks


def wait_ready(replicas: list[Replica], client: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    for replica in replicas:
        while True:
            try:
                if client.get(replica.url + "/ready", timeout=5).status_code == 200:
                    break
            except Exception:  # noqa: BLE001 - not answering yet
                pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
    return True


def fault_phase(
    name: str, replicas: list[Replica], pg: Postgres, dsn: str, run: str, n: int, client: Any, at: int, down_s: float
) -> dict[str, Any]:
    """Stream `n` writes; after `at` of them, inject fault `name`; then check every write."""
    stream = Stream(replicas, run, n, deadline_s=120)
    stream.thread.start()
    stream.wait_writes(at, timeout=120)
    t_fault = time.monotonic()
    in_flight_at_fault = stream.done_writes
    recovery: dict[str, Any] = {}
    if name.startswith("kill"):
        victim = replicas[0] if name.endswith("A") else replicas[1]
        victim.kill()
        time.sleep(down_s)
        recovery["restart_s"] = round(victim.start(), 2)
    else:
        pg.stop()
        time.sleep(down_s)
        pg.start()
        recovery["pg_down_s"] = round(time.monotonic() - t_fault, 2)
    stream.thread.join(timeout=300)
    recovery["stream_alive_after_join"] = stream.thread.is_alive()
    recovery["ready_again"] = wait_ready(replicas, client, 120)
    recovery["fault_to_ready_s"] = round(time.monotonic() - t_fault, 2)

    docs, chunks = store_counts(dsn, run)
    acked = sorted(stream.acked_first_try + stream.retried)
    lost_store = [i for i in acked if docs.get(record(run, i)["id"], 0) == 0]
    dup_store = [i for i in acked if docs.get(record(run, i)["id"], 0) > 1 or chunks.get(record(run, i)["id"], 0) > 1]
    no_chunk = [i for i in acked if chunks.get(record(run, i)["id"], 0) == 0]
    extra = sorted(set(docs) - {record(run, i)["id"] for i in acked})
    unsearchable: dict[str, list[int]] = {}
    dup_hits: dict[str, list[int]] = {}
    for replica in replicas:
        for i in acked:
            rec = record(run, i)
            if wait_found(replica, token(run, i), rec["id"], client, 10.0) is None:
                unsearchable.setdefault(replica.name, []).append(i)
            elif (hits_for(replica, token(run, i), client) or []).count(rec["id"]) != 1:
                dup_hits.setdefault(replica.name, []).append(i)
    lost = sorted(set(lost_store) | set(no_chunk) | {i for v in unsearchable.values() for i in v})
    duplicated = sorted(set(dup_store) | {i for v in dup_hits.values() for i in v})
    return {
        "fault": name,
        "writes": n,
        "fault_after_writes": in_flight_at_fault,
        "acknowledged_first_try": len(stream.acked_first_try),
        "failed_attempts": sum(stream.failures.values()),
        "failures": stream.failures,
        "retried_then_acknowledged": len(stream.retried),
        "given_up": len(stream.given_up),
        "refused_4xx": stream.refused_4xx,
        "lost": len(lost),
        "duplicated": len(duplicated),
        "lost_ids": lost[:10],
        "duplicated_ids": duplicated[:10],
        "unsearchable": {k: len(v) for k, v in unsearchable.items()},
        "stored_but_never_acknowledged": len(extra),
        **recovery,
    }


def run_replicas(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {"retriever": args.retriever}
    pg = Postgres()
    root = Path(tempfile.mkdtemp(prefix="plm-faults-"))
    replicas: list[Replica] = []
    try:
        dsn = pg.new_database("faults")
        config = root / "serve.toml"
        config.write_text(
            SERVE_CONFIG.format(
                dsn=dsn, schema=SCHEMA, retriever=args.retriever, retriever_args=RETRIEVERS[args.retriever]
            )
        )
        replicas = [Replica("A", root, config), Replica("B", root, config)]
        out["start_s"] = {r.name: round(r.start(), 2) for r in replicas}
        with httpx.Client() as client:
            out["replication"] = replication(replicas, "rep", args.writes, client, args.replication_timeout)
            out["faults"] = []
            for n, name in enumerate(args.faults.split(",")):
                phase = fault_phase(
                    name, replicas, pg, dsn, f"f{n}", args.stream, client, at=args.stream // 3, down_s=args.down_s
                )
                out["faults"].append(phase)
        out["stop_rc"] = {r.name: r.stop() for r in replicas}
        tracebacks = {r.name: r.log.read_text().count("Traceback") for r in replicas}
        out["tracebacks_in_logs"] = tracebacks
        if any(tracebacks.values()) and args.keep_logs:
            for r in replicas:
                shutil.copy(r.log, Path(args.keep_logs) / r.log.name)
    finally:
        for r in replicas:
            r.stop()
        pg.close()
        if not args.keep_logs:
            shutil.rmtree(root, ignore_errors=True)
        else:
            out["logs"] = str(root)
    return out


def replica_checks(out: dict[str, Any]) -> list[str]:
    failed = []
    rep = out["replication"]
    if rep["within_2s"] != rep["writes"]:
        failed.append(f"replication: {rep['writes'] - rep['within_2s']} of {rep['writes']} writes took over 2 s")
    for phase in out["faults"]:
        for key in ("lost", "duplicated", "given_up", "refused_4xx", "stored_but_never_acknowledged"):
            if phase[key]:
                failed.append(f"{phase['fault']}: {key} = {phase[key]}")
        if not phase["ready_again"]:
            failed.append(f"{phase['fault']}: a replica never became ready again")
    return failed


# --------------------------------------------------------------------------- Ray
RAY_CONFIG = """
[job]
name = "faults-ray"
[embedder]
use = "hashed_words"
dim = 64
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
target_words = 120
min_words = 20
max_words = 240
[index.slow]
use = "slow_pass"
seconds = {slow}
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
QUERIES = ["how do I rotate an API key", "deployments and rollbacks", "backup restore", "on-call escalation"]


def ray_registry() -> Any:
    import plm_slow

    from plm_index.plugins import build_registry

    return build_registry(extra_plugins=[plm_slow])


def make_job(config: Path, index: Path, data: Path, overrides: list[str], batch: int) -> Any:
    from plm_core.settings import Settings
    from plm_index.job import Job

    settings = Settings(data_dir=str(data), progress=False, ingest_batch=batch, cache=False)
    return Job.from_config(config, overrides, index_dir=index, settings=settings, registry=ray_registry())


def fingerprint(config: Path, index: Path, data: Path) -> dict[str, Any]:
    """What an ingest stored (document fingerprints, chunks, vector bytes) and what queries
    answer, as sha256 digests and counts."""
    import dataclasses

    import numpy as np

    job = make_job(config, index, data, [], 8)
    job.open(create=False)
    try:
        docs = job.store.doc_fingerprints()
        chunks = sorted((dataclasses.asdict(c) for c in job.store.chunks()), key=lambda c: c["id"])
        ids, matrix, model = job.store.vectors()
        order = np.argsort(np.array(ids))
        vec = hashlib.sha256()
        for k in order:
            vec.update(ids[k].encode() + b"\0" + np.ascontiguousarray(matrix[k], dtype=np.float32).tobytes())
        answers = [[(h.chunk_id, round(float(h.score), 6)) for h in job.retrieve(q, k=5)] for q in QUERIES]
        problems = [str(p) for p in job.store.consistency_problems()]
    finally:
        job.close()

    def digest(value: Any) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]

    return {
        "documents": len(docs),
        "chunks": len(chunks),
        "vectors": len(ids),
        "model": model,
        "documents_sha": digest(docs),
        "chunks_sha": digest(chunks),
        "vectors_sha": vec.hexdigest()[:16],
        "queries_sha": digest(answers),
        "consistency_problems": problems,
    }


def committed(index: Path) -> int:
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{index / 'plm.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT count(*) FROM documents").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def actor_nodes(cluster: Any) -> dict[int, int]:
    """raylet pid -> batch actors (`_BatchWorker` processes) it started."""
    import psutil

    raylets = {n.all_processes["raylet"][0].process.pid for n in cluster.worker_nodes}
    found: dict[int, int] = {}
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        try:
            line = " ".join(proc.info["cmdline"] or [])
        except (psutil.Error, TypeError):
            continue
        if "_BatchWorker" in line and proc.info["ppid"] in raylets:
            found[proc.info["ppid"]] = found.get(proc.info["ppid"], 0) + 1
    return found


def ingest_in_thread(job: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def work() -> None:
        t0 = time.monotonic()
        try:
            report = job.ingest([SAMPLE_DOCS])
            box["report"] = {"added": len(report.added), "unchanged": report.unchanged, "failed": len(report.failed)}
        except BaseException as err:  # noqa: BLE001 - the outcome is the measurement
            from plm_core.errors import PlmUserError

            box["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
            box["user_error"] = isinstance(err, PlmUserError)
        finally:
            box["seconds"] = round(time.monotonic() - t0, 2)
            job.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, box


def run_ray(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SUPPORT), *([old] if old else [])])  # the nodes import plm_slow
    sys.path.insert(0, str(SUPPORT))
    root = Path(tempfile.mkdtemp(prefix="plm-faults-ray-"))
    out: dict[str, Any] = {"batch": args.ray_batch, "slow_s": args.ray_slow}
    config = root / "job.toml"
    config.write_text(RAY_CONFIG.format(slow=args.ray_slow))
    n_docs = len(list(SAMPLE_DOCS.glob("*.md")))
    node = {"node_ip_address": "127.0.0.1", "object_store_memory": 100 * 2**20}
    cluster = None
    try:
        t0 = time.monotonic()
        job = make_job(config, root / "local", root / "data", [], args.ray_batch)
        job.ingest([SAMPLE_DOCS])
        job.close()
        out["local_s"] = round(time.monotonic() - t0, 2)
        want = fingerprint(config, root / "local", root / "data")
        out["local"] = want

        t0 = time.monotonic()
        cluster = Cluster(initialize_head=True, head_node_args={**node, "num_cpus": 0, "include_dashboard": False})
        for _ in range(2):
            cluster.add_node(**node, num_cpus=args.ray_node_cpus)
        cluster.wait_for_nodes()
        address = "127.0.0.1:" + cluster.address.rpartition(":")[2]
        ray.init(address=address, _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="WARNING")
        out["cluster_start_s"] = round(time.monotonic() - t0, 2)
        overrides = ["executor.use=ray", f"executor.workers={args.ray_workers}"]

        # 1. A whole ingest on the cluster equals the local one.
        t0 = time.monotonic()
        job = make_job(config, root / "ray", root / "data", overrides, args.ray_batch)
        report = job.ingest([SAMPLE_DOCS])
        job.close()
        got = fingerprint(config, root / "ray", root / "data")
        out["clean"] = {
            "seconds": round(time.monotonic() - t0, 2),
            "added": len(report.added),
            "equal_local": got == want,
        }
        if got != want:
            out["clean"]["got"] = got

        # 2. The node hosting the batch actors removed mid-ingest.
        index = root / "ray-removed"
        job = make_job(config, index, root / "data", overrides, args.ray_batch)
        thread, box = ingest_in_thread(job)
        deadline = time.monotonic() + 120
        hosts: dict[int, int] = {}
        while time.monotonic() < deadline and thread.is_alive():
            hosts = actor_nodes(cluster)
            if hosts and committed(index) >= max(1, n_docs // 4):
                break
            time.sleep(0.05)
        removed = {"committed_before": committed(index), "actors_per_node": sorted(hosts.values())}
        if hosts and thread.is_alive():
            victim_pid = max(hosts, key=lambda pid: hosts[pid])
            (victim,) = [n for n in cluster.worker_nodes if n.all_processes["raylet"][0].process.pid == victim_pid]
            removed["actors_on_removed_node"] = hosts[victim_pid]
            t_fault = time.monotonic()
            cluster.remove_node(victim)
            thread.join(timeout=args.ray_timeout)
            removed["hung"] = thread.is_alive()
            removed["after_removal_s"] = round(time.monotonic() - t_fault, 2)
        else:
            removed["not_removed"] = "the ingest ended before a node could be removed"
            thread.join(timeout=args.ray_timeout)
        removed.update({k: v for k, v in box.items()})
        if removed.get("hung"):
            out["node_removed"] = removed
            return out
        removed["committed_after"] = committed(index)
        removed["consistency_problems"] = fingerprint(config, index, root / "data")["consistency_problems"]
        if "report" in box:
            removed["equal_local"] = fingerprint(config, index, root / "data") == want

        # 3. A rerun completes with the exact local result.
        t0 = time.monotonic()
        job = make_job(config, index, root / "data", overrides, args.ray_batch)
        report = job.ingest([SAMPLE_DOCS])
        job.close()
        got = fingerprint(config, index, root / "data")
        removed["rerun"] = {
            "seconds": round(time.monotonic() - t0, 2),
            "added": len(report.added),
            "unchanged": report.unchanged,
            "equal_local": got == want,
        }
        out["node_removed"] = removed
        if args.ray_remove_all:
            out["all_nodes_removed"] = remove_every_node(args, cluster, config, root, overrides, n_docs, want)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        sys.path.remove(str(SUPPORT))
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
        shutil.rmtree(root, ignore_errors=True)
    return out


def remove_every_node(
    args: argparse.Namespace, cluster: Any, config: Path, root: Path, overrides: list[str], n_docs: int, want: Any
) -> dict[str, Any]:
    """Every worker node removed mid-ingest (no CPU left for the batch actors): whether the
    ingest ends by itself within `--ray-starve-s`, then whether it resumes once a node joins."""
    index = root / "ray-starved"
    job = make_job(config, index, root / "data", overrides, args.ray_batch)
    thread, box = ingest_in_thread(job)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and thread.is_alive() and committed(index) < max(1, n_docs // 4):
        time.sleep(0.05)
    starved: dict[str, Any] = {"committed_before": committed(index)}
    for node in list(cluster.worker_nodes):
        cluster.remove_node(node)
    thread.join(timeout=args.ray_starve_s)
    starved["ended_without_nodes"] = not thread.is_alive()
    starved["committed_without_nodes"] = committed(index)
    t0 = time.monotonic()
    cluster.add_node(node_ip_address="127.0.0.1", object_store_memory=100 * 2**20, num_cpus=args.ray_node_cpus)
    thread.join(timeout=args.ray_timeout)
    starved["hung_after_a_node_joined"] = thread.is_alive()
    starved["node_joined_to_end_s"] = round(time.monotonic() - t0, 2)
    starved.update(box)
    if thread.is_alive():
        return starved
    starved["consistency_problems"] = fingerprint(config, index, root / "data")["consistency_problems"]
    job = make_job(config, index, root / "data", overrides, args.ray_batch)
    report = job.ingest([SAMPLE_DOCS])
    job.close()
    starved["rerun"] = {
        "added": len(report.added),
        "unchanged": report.unchanged,
        "equal_local": fingerprint(config, index, root / "data") == want,
    }
    return starved


def ray_checks(out: dict[str, Any]) -> list[str]:
    failed = []
    if not out.get("clean", {}).get("equal_local"):
        failed.append("ray: a clean ingest on the cluster differs from the local one")
    removed = out.get("node_removed", {})
    if removed.get("hung"):
        failed.append(f"ray: the ingest hung for {removed.get('after_removal_s')} s after the node was removed")
    if "not_removed" in removed:
        failed.append("ray: no node was removed mid-ingest (raise --ray-slow)")
    if "error" in removed and (not removed.get("user_error") or "\n" in removed["error"]):
        failed.append(f"ray: the ingest failed without one clear line: {removed['error']}")
    if removed.get("consistency_problems"):
        failed.append(f"ray: store inconsistent after the removal: {removed['consistency_problems']}")
    if "report" in removed and not removed.get("equal_local"):
        failed.append("ray: the ingest that survived the removal differs from the local one")
    if not removed.get("rerun", {}).get("equal_local"):
        failed.append("ray: the rerun after the removal differs from the local one")
    starved = out.get("all_nodes_removed")
    if starved is not None:
        if starved.get("hung_after_a_node_joined"):
            failed.append("ray: with every node removed the ingest hung even after a node joined again")
        if starved.get("consistency_problems"):
            failed.append(f"ray: store inconsistent after every node was removed: {starved['consistency_problems']}")
        if "rerun" in starved and not starved["rerun"]["equal_local"]:
            failed.append("ray: the rerun after every node was removed differs from the local one")
    return failed


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="replicas,ray")
    ap.add_argument("--writes", type=int, default=100, help="replication: writes measured")
    ap.add_argument("--replication-timeout", type=float, default=10.0)
    ap.add_argument("--stream", type=int, default=40, help="writes per fault phase")
    ap.add_argument("--faults", default="kill A,kill B,pg restart")
    ap.add_argument("--down-s", type=float, default=1.0, help="seconds a killed replica / Postgres stays down")
    ap.add_argument("--retriever", choices=sorted(RETRIEVERS), default="bm25s")
    ap.add_argument("--ray-batch", type=int, default=2, help="documents per batch (PLM_INGEST_BATCH)")
    ap.add_argument("--ray-slow", type=float, default=0.3, help="seconds each batch sleeps in a stage")
    ap.add_argument("--ray-workers", type=int, default=2)
    ap.add_argument("--ray-node-cpus", type=int, default=2)
    ap.add_argument("--ray-timeout", type=float, default=180.0, help="seconds the ingest may take after the removal")
    ap.add_argument("--ray-remove-all", action="store_true", help="also remove EVERY worker node mid-ingest")
    ap.add_argument("--ray-starve-s", type=float, default=30.0, help="then wait this long before a node joins")
    ap.add_argument("--keep-logs", default="", help="keep the replicas' logs in this folder")
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    result: dict[str, Any] = {
        "uptime_before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    }
    failed: list[str] = []
    if "replicas" in args.parts:
        result["replicas"] = run_replicas(args)
        failed += replica_checks(result["replicas"])
    if "ray" in args.parts:
        result["ray"] = run_ray(args)
        failed += ray_checks(result["ray"])
    result["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    result["seconds"] = round(time.monotonic() - t0, 1)
    result["failed"] = failed
    result["ok"] = not failed
    line = json.dumps(result)
    print(line, flush=True)
    if args.json:
        args.json.write_text(line + "\n")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
