"""The postgres store and its retrievers against the SQLite store (issue 13), on SciFact and
on a synthetic 100k-chunk corpus. Four parts, all in one run (`--parts` picks some):

  ingest   `Job.ingest` of SciFact (5,183 documents, MiniLM vectors from the warm content
           cache, so the store is what is measured) into a fresh Postgres schema / a fresh
           SQLite folder each repeat, alternating which goes first; ratio pg / sqlite.
  latency  p50/p95 of `Job.search` (k=10) over the 300 SciFact test queries for dense
           (SQLite), pgvector exact and HNSW, bm25s over either store, pg_fulltext, plm's
           hybrid RRF over SQLite and pg_hybrid. Query vectors are PRE-EMBEDDED (the
           embedder's recent-query memory is filled before timing, so the embed stage is a
           dict lookup); the MiniLM query-embedding latency is reported once beside them.
  qps      1, 4 and 8 client PROCESSES (spawned, each its own Job, queries pre-embedded,
           no model loaded) for `--qps-seconds` each against one Postgres (pgvector HNSW,
           pg_fulltext, pg_hybrid) and against one SQLite index (dense, hybrid RRF).
  scale    synthetic chunks (60 words each from a 5,000-word vocabulary, random unit
           vectors of dim 384) written through `store.replace_documents` in batches, the
           HNSW index built afterwards with the store's own DDL, then pgvector exact vs
           HNSW latency and HNSW recall@10 (200 queries: a stored vector plus noise),
           pg_fulltext latency, and the same corpus in the SQLite store (dense, bm25s).

Every SciFact system reads the same stored chunks and vectors: one Postgres schema and one
SQLite folder, ingested with the same index-side config (configs/postgres/dense.toml's
loader, chunker and embedder, checked against configs/scifact/dense_minilm.toml at start).

  export PLM_DATABASE_URL=$(plm pg start --data /tmp/plm-bench-pg | tail -1) PLM_DATA_DIR=/tmp/plm-bench-data
  python bench/bench_postgres.py --repeats 3 --qps-seconds 15 --json bench/results/postgres.json
  # the scale part with a larger maintenance_work_mem for the HNSW build and several ef_search
  python bench/bench_postgres.py --parts scale --scale-ef 40,100,400 --scale-maintenance-work-mem 1GB \\
      --scale-passes 1 --json bench/results/postgres_scale_tuned.json
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PLM_PROGRESS", "0")
# One BLAS / numba thread, as bench_bm25.py: a 2-core machine shared with other jobs makes a
# BLAS thread pool's wake-ups the noise of a sub-millisecond dense query. torch (the query
# embedding reported for context) keeps its own threads.
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import OrderedDict  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import tomllib  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MINILM = "all-MiniLM-L6-v2"

# --------------------------------------------------------------------------- configs
# The index side shared by every SciFact system (the same as configs/postgres/dense.toml and
# configs/scifact/dense_minilm.toml; `check_index_side` asserts it).
EMBEDDER = f"""
[embedder]
use = "sentence_transformers"
model = "{MINILM}"
batch_size = 32
normalize = true
"""
INDEX = """
[index.load]
use = "beir_corpus"
include_title = true

[index.chunk]
use = "markdown_semantic"
target_words = 400
min_words = 50
max_words = 800
overlap_sentences = 1
max_heading_level = 4
"""
EMBED = '\n[query.embed]\nuse = "embed_query"\n'
SQLITE = '\n[store]\nuse = "sqlite"\n'
BM25 = 'use = "bm25s"\ntokenizer = "bm25s_stem"\nmethod = "lucene"\n'
# plm's hybrid over SQLite, fused like pg_hybrid: 1-based ranks (rank_base = 1), k = 60,
# weights 1/1, 10 x k = 100 candidates per retriever (pg_hybrid's candidates = 100).
RRF = f"""
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.dense]
use = "dense"
[query.retrieve.retrievers.bm25]
{BM25}
[query.retrieve.fuser]
use = "rrf"
order = ["dense", "bm25"]
rank_base = 1
[query.retrieve.fuser.default]
k = 60
weights = {{ dense = 1.0, bm25 = 1.0 }}
candidates_factor = 10
"""


def pg_store(schema: str) -> str:
    return f'\n[store]\nuse = "postgres"\nschema = "{schema}"\n'


def systems(schema: str) -> dict[str, dict[str, Any]]:
    """name -> store kind, config text. The first of each store is the one that ingests."""
    pg, dense = pg_store(schema), EMBEDDER + INDEX + EMBED
    return {
        "dense (SQLite)": {"store": "sqlite", "toml": SQLITE + dense + '[query.retrieve]\nuse = "dense"\n'},
        "pgvector exact": {
            "store": "pg",
            "toml": pg + dense + '[query.retrieve]\nuse = "pgvector"\nexact = true\n',
        },
        "pgvector HNSW": {
            "store": "pg",
            "toml": pg + dense + '[query.retrieve]\nuse = "pgvector"\nexact = false\nef_search = 100\n',
        },
        "bm25s (SQLite)": {"store": "sqlite", "toml": SQLITE + INDEX + "[query.retrieve]\n" + BM25},
        "bm25s (Postgres)": {"store": "pg", "toml": pg + INDEX + "[query.retrieve]\n" + BM25},
        "pg_fulltext": {"store": "pg", "toml": pg + INDEX + '[query.retrieve]\nuse = "pg_fulltext"\nmode = "or"\n'},
        "hybrid RRF (SQLite)": {"store": "sqlite", "toml": SQLITE + dense + RRF},
        "pg_hybrid": {
            "store": "pg",
            "toml": pg + dense + '[query.retrieve]\nuse = "pg_hybrid"\ncandidates = 100\nk = 60\n'
            "weights = { dense = 1.0, keyword = 1.0 }\n",
        },
    }


def index_dir(work: Path, spec: dict[str, Any]) -> Path:
    """The SciFact index folder of a system: one per store (BM25 builds live there)."""
    return work / f"scifact_{spec['store']}"


def check_index_side() -> None:
    mine = tomllib.loads(EMBEDDER + INDEX)
    for path in ("configs/postgres/dense.toml", "configs/scifact/dense_minilm.toml"):
        theirs = tomllib.loads((ROOT / path).read_text())
        theirs["embedder"].pop("backend", None)  # torch or ONNX: the same vectors (BENCHMARKS 12)
        for key in ("embedder", "index"):
            if theirs[key] != mine[key]:
                raise SystemExit(f"{path} [{key}] differs from this script's: {theirs[key]} != {mine[key]}")


# --------------------------------------------------------------------------- helpers
def settings() -> Any:
    from plm_core.settings import load_settings

    return load_settings(progress=False)


def make_job(work: Path, name: str, toml: str, index_dir: Path, overrides: tuple[str, ...] = ()) -> Any:
    from plm_index.job import Job

    slug = "".join(ch if ch.isalnum() else "_" for ch in name.lower()).strip("_")
    path = work / "configs" / f"{slug}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f'[job]\nname = "bench_{slug}"\ncorpus = ["corpus.jsonl"]\n' + toml
    if not path.exists() or path.read_text() != text:  # atomic: qps clients start side by side
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return Job.from_config(path, list(overrides), index_dir=index_dir, settings=settings())


def share_model(job: Any, ref: Any, vectors: dict[str, Any]) -> None:
    """Give the job's embedder the already loaded model (`ref`, or a name only: no model)
    and every query's vector in its recent-query memory, so `embed_query` is a lookup."""
    import plm_plugins.embedders.sentence_transformers as st

    st.RECENT_QUERIES = max(st.RECENT_QUERIES, 10 * len(vectors) + 1000)
    emb = job.embedder
    if emb is None:
        return
    if isinstance(ref, str):  # name only: a client process that never loads the model
        emb._name, emb._path = ref, Path(ref)
    else:
        emb._model, emb._name, emb._path = ref._model, ref._name, ref._path
    emb._warm = True
    emb.__dict__["_recent"] = OrderedDict(vectors)


def pct(ms: list[float] | np.ndarray) -> dict[str, float]:
    a = np.asarray(ms, dtype=float)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "mean": float(a.mean())}


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def pg_info(dsn: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
        return {
            "server_version": one("SHOW server_version"),
            "pgvector": one("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
            "shared_buffers": one("SHOW shared_buffers"),
            "work_mem": one("SHOW work_mem"),
            "maintenance_work_mem": one("SHOW maintenance_work_mem"),
            "max_parallel_maintenance_workers": one("SHOW max_parallel_maintenance_workers"),
            "max_parallel_workers_per_gather": one("SHOW max_parallel_workers_per_gather"),
            "unix_socket": "host=/" in dsn or "host=%2F" in dsn,
        }


def pg_indexes(dsn: str, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s ORDER BY 1", (schema,))
        return [r[0] for r in rows.fetchall()]


def load_avg() -> float:
    return os.getloadavg()[0]


def explain(job: Any, text: str) -> list[list[str]]:
    """EXPLAIN (ANALYZE, BUFFERS) of every statement a Postgres retriever runs for `text`,
    captured in the retriever itself (same SQL, params, snapshot and hnsw.ef_search)."""
    from plm_plugins.retrievers.pg_search import PostgresRetriever

    r = next(c for s in job.query_stages for c in s.components() if isinstance(c, PostgresRetriever))
    plans: list[list[str]] = []
    real = r.run_sql

    def spy(sql: str, params: list[Any]) -> Any:
        rows = r.store.conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql.replace("{s}", r.store.schema), params)
        plans.append([re.sub(r"'\[[^']*\]'", "'[vector]'", line) for (line,) in rows.fetchall()])
        return real(sql, params)

    r.run_sql = spy
    try:
        job.search(text, k=10)
    finally:
        del r.run_sql
    return plans


def uses_hnsw(plans: list[list[str]]) -> bool:
    return any("chunks_hnsw_" in line for plan in plans for line in plan)


# --------------------------------------------------------------------------- a. ingest
def part_ingest(args: argparse.Namespace, work: Path, corpus: Path) -> dict[str, Any]:
    sysmap = systems("unused")
    variants = {
        "sqlite": (sysmap["dense (SQLite)"]["toml"], ()),
        "postgres": (sysmap["pgvector HNSW"]["toml"], ()),
        "postgres, hnsw = false": (sysmap["pgvector HNSW"]["toml"], ("store.hnsw=false",)),
    }
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    names = list(variants)
    for rep in range(args.repeats):
        order = names[rep % len(names) :] + names[: rep % len(names)]  # rotate who goes first
        for variant in order:
            toml, extra = variants[variant]
            folder = work / "ingest" / f"{variant.replace(', hnsw = false', '_nohnsw')}_{rep}"
            shutil.rmtree(folder, ignore_errors=True)
            schema = f"bench_ingest_{rep}_{'nohnsw' if extra else 'hnsw'}"
            overrides = (f"store.schema={schema}", *extra) if variant != "sqlite" else ()
            if variant != "sqlite":
                drop_schema(args.dsn, schema)
            job = make_job(work, f"ingest {variant}", toml, folder, overrides)
            job.embedder.ensure_warm()  # the model load is not the store's time
            load = load_avg()
            t0 = time.perf_counter()
            report = job.ingest([corpus])
            wall = time.perf_counter() - t0
            job.close()
            d = report.as_dict()
            timings = d.get("timings_s") or {}
            run = {
                "rep": rep,
                "wall_s": wall,
                "chunks": d["chunks"],
                "timings_s": timings,
                "work": d.get("work"),
                "load_avg": load,
                # `index:<retriever>` is the retriever's build after the load: for pgvector
                # (exact = false) that is `store.ensure_hnsw`, the HNSW build.
                "index_build_s": sum(v for k, v in timings.items() if k.startswith("index:")),
            }
            if variant != "sqlite":
                run["pg_indexes"] = pg_indexes(args.dsn, schema)
                run["has_hnsw_384"] = "chunks_hnsw_384" in run["pg_indexes"]
                if run["has_hnsw_384"] != (not extra):
                    raise SystemExit(f"ingest {variant}: indexes after the ingest are {run['pg_indexes']}")
            runs[variant].append(run)
            print(
                f"  ingest {variant:<24} rep {rep}: {wall:6.2f} s wall, store stage {timings.get('store')}, "
                f"index build {run['index_build_s']:.2f} s, {d['chunks']} chunks, load {load:.1f}, "
                f"indexes {run.get('pg_indexes', '-')}",
                flush=True,
            )
            if variant != "sqlite":
                drop_schema(args.dsn, schema)
            shutil.rmtree(folder, ignore_errors=True)
    out: dict[str, Any] = {"runs": runs, "median_wall_s": {}}
    for v, rs in runs.items():
        out["median_wall_s"][v] = float(np.median([r["wall_s"] for r in rs]))
        out.setdefault("median_store_s", {})[v] = float(
            np.median([(r["timings_s"] or {}).get("store", 0.0) for r in rs])
        )
        out.setdefault("median_index_build_s", {})[v] = float(np.median([r["index_build_s"] for r in rs]))
    base = out["median_wall_s"]["sqlite"]
    out["ratio_wall_vs_sqlite"] = {v: m / base for v, m in out["median_wall_s"].items()}
    # Ratios within each repeat (same minute of machine load), then their median.
    out["median_of_per_rep_ratio"] = {
        v: float(np.median([r["wall_s"] / s["wall_s"] for r, s in zip(rs, runs["sqlite"], strict=True)]))
        for v, rs in runs.items()
    }
    return out


# --------------------------------------------------------------------------- fixtures
def fixtures(args: argparse.Namespace, work: Path, corpus: Path) -> dict[str, Any]:
    """Ingest SciFact once per store (from the cache) for the query parts; a no-op when done."""
    sysmap = systems(args.schema)
    out = {}
    for name in ("dense (SQLite)", "pgvector HNSW"):
        job = make_job(work, name, sysmap[name]["toml"], index_dir(work, sysmap[name]))
        t0 = time.perf_counter()
        report = job.ingest([corpus])
        print(f"  fixture {name}: {report.summary()} ({time.perf_counter() - t0:.1f} s)", flush=True)
        out[name] = report.as_dict()["chunks"]
        job.close()
    out["pg_indexes"] = pg_indexes(args.dsn, args.schema)
    if "chunks_hnsw_384" not in out["pg_indexes"]:
        raise SystemExit(f"the fixture ingest left no HNSW index: {out['pg_indexes']}")
    # Keyword-only jobs read the same folder / schema; build their BM25 once, outside timing.
    for name in ("bm25s (SQLite)", "bm25s (Postgres)", "hybrid RRF (SQLite)"):
        job = make_job(work, name, sysmap[name]["toml"], index_dir(work, sysmap[name])).open(create=False)
        if job.embedder is not None:
            job.embedder.ensure_warm()
        job.rebuild_indexes()
        job.close()
    return out


def query_texts(args: argparse.Namespace) -> list[str]:
    from plm_eval.dataset import load_query_set

    return list(load_query_set(args.dataset, "test").queries.values())


def embed_queries(texts: list[str]) -> tuple[Any, dict[str, Any], dict[str, float]]:
    """Load MiniLM once, embed every query (timed: the cost the tables leave out)."""
    import plm_plugins.embedders.sentence_transformers as st
    from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder

    st.RECENT_QUERIES = 10 * len(texts) + 1000
    emb = SentenceTransformerEmbedder(SentenceTransformerEmbedder.Config(model=MINILM), settings=settings())
    emb.ensure_warm()
    emb.embed_query("warm up")
    lat = []
    for t in texts:
        t0 = time.perf_counter()
        emb.embed_query(t)
        lat.append((time.perf_counter() - t0) * 1000)
    vectors = {t: emb._recent[t] for t in texts}
    return emb, vectors, pct(lat)


# --------------------------------------------------------------------------- b. latency
def part_latency(
    args: argparse.Namespace, work: Path, texts: list[str], ref: Any, vectors: dict[str, Any]
) -> dict[str, Any]:
    sysmap = systems(args.schema)
    jobs = {}
    for name, spec in sysmap.items():
        job = make_job(work, name, spec["toml"], index_dir(work, spec)).open(create=False)
        share_model(job, ref, vectors)
        for t in texts[:20]:  # warm: indexes loaded, vectors read, connections and plans hot
            job.search(t, k=10)
        jobs[name] = job
    # Sanity: the same answers where they must be the same; the plans Postgres runs.
    checks = agreement(jobs, texts)
    checks["plans"] = {n: explain(jobs[n], texts[0]) for n in jobs if sysmap[n]["store"] == "pg" and "bm25s" not in n}
    checks["hnsw_plan_uses_index"] = {n: uses_hnsw(p) for n, p in checks["plans"].items()}
    print("  checks:", json.dumps({k: v for k, v in checks.items() if k != "plans"}), flush=True)
    passes: dict[str, list[dict[str, float]]] = {n: [] for n in jobs}
    names = list(jobs)
    for p in range(args.latency_passes):
        order = names[p % len(names) :] + names[: p % len(names)]
        for name in order:
            job, lat = jobs[name], []
            for t in texts:
                t0 = time.perf_counter()
                job.search(t, k=10)
                lat.append((time.perf_counter() - t0) * 1000)
            passes[name].append(pct(lat))
        print(f"  latency pass {p}: " + ", ".join(f"{n} {passes[n][-1]['p50']:.2f}" for n in names), flush=True)
    for job in jobs.values():
        job.close()
    summary = {
        n: {
            "p50_ms": float(np.median([r["p50"] for r in rs])),
            "p95_ms": float(np.median([r["p95"] for r in rs])),
            "mean_ms": float(np.median([r["mean"] for r in rs])),
        }
        for n, rs in passes.items()
    }
    return {"passes": passes, "median_of_passes": summary, "checks": checks}


def agreement(jobs: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    def top(name: str, t: str) -> list[tuple[str, float]]:
        return [(h.chunk_id, h.score) for h in jobs[name].search(t, k=10)[0].hits]

    out: dict[str, Any] = {}
    same_ids = max_diff = 0.0
    recall = []
    bm_same = 0
    for t in texts:
        d, e, h = top("dense (SQLite)", t), top("pgvector exact", t), top("pgvector HNSW", t)
        same_ids += [i for i, _ in d] == [i for i, _ in e]
        # `dense` alone in [query.retrieve] reports its cosine as the hit score, so compare them.
        max_diff = max(max_diff, max(abs(a[1] - b[1]) for a, b in zip(d, e, strict=True)))
        recall.append(len({i for i, _ in h} & {i for i, _ in e}) / 10)
        bm_same += [i for i, _ in top("bm25s (SQLite)", t)] == [i for i, _ in top("bm25s (Postgres)", t)]
    n = len(texts)
    out["dense_vs_pgvector_exact_same_top10"] = f"{int(same_ids)}/{n}"
    out["dense_vs_pgvector_exact_max_score_diff"] = max_diff
    out["pgvector_hnsw_recall@10_vs_exact"] = float(np.mean(recall))
    out["bm25s_sqlite_vs_postgres_same_top10"] = f"{bm_same}/{n}"
    return out


# --------------------------------------------------------------------------- c. qps
def client(spec: dict[str, Any], ready: Any, start: Any, results: Any) -> None:
    """One client process: its own Job, no model, pre-embedded queries, one thread."""
    try:
        job = make_job(Path(spec["work"]), spec["name"], spec["toml"], Path(spec["index"])).open(create=False)
        share_model(job, MINILM, spec["vectors"])
        texts = spec["texts"]
        for t in texts[:10]:
            job.search(t, k=10)
        ready.put(os.getpid())
        start.wait()
        lat, i = [], spec["offset"]
        t0 = time.perf_counter()
        end = t0 + spec["seconds"]
        while (now := time.perf_counter()) < end:
            job.search(texts[i % len(texts)], k=10)
            lat.append((time.perf_counter() - now) * 1000)
            i += 1
        results.put({"n": len(lat), "elapsed": time.perf_counter() - t0, "lat": lat})
        job.close()
    except BaseException as err:  # noqa: BLE001 - the parent must not wait forever
        ready.put(f"error: {type(err).__name__}: {err}")
        results.put({"error": f"{type(err).__name__}: {err}"})


def part_qps(args: argparse.Namespace, work: Path, texts: list[str], vectors: dict[str, Any]) -> dict[str, Any]:
    sysmap = systems(args.schema)
    names = ["pgvector HNSW", "pg_fulltext", "pg_hybrid", "dense (SQLite)", "hybrid RRF (SQLite)"]
    ctx = mp.get_context("spawn")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"  # the clients inherit it: one thread each, no BLAS pool per process
    plain = {t: np.array(v) for t, v in vectors.items()}
    out: dict[str, Any] = {}
    for _rep in range(args.qps_repeats):
        for clients in args.clients:
            for name in names:
                ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
                procs = []
                for c in range(clients):
                    spec = {
                        "work": str(work),
                        "name": name,
                        "toml": sysmap[name]["toml"],
                        "index": str(index_dir(work, sysmap[name])),
                        "vectors": plain,
                        "texts": texts,
                        "offset": (c * len(texts)) // clients,
                        "seconds": args.qps_seconds,
                    }
                    p = ctx.Process(target=client, args=(spec, ready, start, results), daemon=True)
                    p.start()
                    procs.append(p)
                got = [ready.get(timeout=300) for _ in procs]
                errors = [g for g in got if isinstance(g, str)]
                load = load_avg()
                start.set()
                res = [results.get(timeout=args.qps_seconds + 300) for _ in procs]
                for p in procs:
                    p.join(timeout=60)
                errors += [r["error"] for r in res if "error" in r]
                if errors:
                    raise SystemExit(f"qps {name} x{clients}: {errors[0]}")
                n = sum(r["n"] for r in res)
                window = max(r["elapsed"] for r in res)
                lat = [x for r in res for x in r["lat"]]
                row = {
                    "clients": clients,
                    "queries": n,
                    "qps": n / window,
                    **{f"{k}_ms": v for k, v in pct(lat).items()},
                    "load_avg_before": load,
                }
                out.setdefault(name, {}).setdefault(str(clients), []).append(row)
                print(
                    f"  qps {name:<20} x{clients}: {row['qps']:8.1f} q/s, p50 {row['p50_ms']:.1f} ms, "
                    f"p95 {row['p95_ms']:.1f} ms (load before {load:.1f})",
                    flush=True,
                )
    summary = {
        name: {
            c: {
                "qps": float(np.median([r["qps"] for r in rows])),
                "p95_ms": float(np.median([r["p95_ms"] for r in rows])),
                "p50_ms": float(np.median([r["p50_ms"] for r in rows])),
            }
            for c, rows in by_c.items()
        }
        for name, by_c in out.items()
    }
    return {"runs": out, "median": summary}


# --------------------------------------------------------------------------- d. scale
def vocabulary(size: int, rng: Any) -> list[str]:
    """`size` distinct random lower-case words of 4 to 9 letters."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < size:
        w = "".join(rng.choice(letters, size=int(rng.integers(4, 10))))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    return vocab


def part_scale(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from plm_core.records import Chunk, Document
    from plm_plugins.stores.postgres import PostgresStore
    from plm_plugins.stores.sqlite import SQLiteStore

    n, per_doc, dim, batch = args.scale_n, 10, 384, args.scale_batch
    model = f"synthetic-{dim}"
    rng = np.random.default_rng(0)
    vocab = vocabulary(5000, rng)
    vocab_arr = np.array(vocab)
    n_docs = n // per_doc
    schema = "bench_scale"
    drop_schema(args.dsn, schema)
    out: dict[str, Any] = {
        "chunks": n,
        "dim": dim,
        "vocabulary": len(vocab),
        "words_per_chunk": 60,
        "chunks_per_document": per_doc,
        "batch_chunks": batch,
    }

    def batch_rows(d0: int, d1: int, prefix: str = "d") -> tuple[list[Any], list[Any], Any]:
        docs, chunks = [], []
        for d in range(d0, d1):
            texts = [" ".join(vocab_arr[rng.integers(0, len(vocab), 60)]) for _ in range(per_doc)]
            docs.append(Document(id=f"{prefix}{d}", text="\n\n".join(texts), metadata={"group": d % 10}))
            chunks += [
                Chunk(id=f"{prefix}{d}_{j}", doc_id=f"{prefix}{d}", text=t, metadata={"group": d % 10})
                for j, t in enumerate(texts)
            ]
        m = rng.normal(size=(len(chunks), dim)).astype(np.float32)
        return docs, chunks, m / np.linalg.norm(m, axis=1, keepdims=True)

    # Generate everything first (not timed), then write it to both stores.
    t0 = time.perf_counter()
    per_batch = max(1, batch // per_doc)
    batches = [batch_rows(d, min(d + per_batch, n_docs)) for d in range(0, n_docs, per_batch)]
    matrix = np.concatenate([b[2] for b in batches])
    out["generate_s"] = time.perf_counter() - t0
    print(f"  scale: generated {n} chunks in {out['generate_s']:.1f} s", flush=True)

    # Postgres: load without the HNSW index, then build it with the store's own DDL.
    store = PostgresStore(PostgresStore.Config(dsn=args.dsn, schema=schema, hnsw=False))
    store.open(str(work / "scale_pg"))
    notices: list[str] = []
    store.conn.add_notice_handler(lambda diag: notices.append(str(diag.message_primary)))
    load = load_avg()
    t0 = time.perf_counter()
    deadline = t0 + args.scale_max_load_s
    written = 0
    for docs, chunks, m in batches:
        store.replace_documents(docs, chunks, m, model)
        written += len(chunks)
        if time.perf_counter() > deadline:
            print(f"  scale: load stopped at {written} chunks (--scale-max-load-s)", flush=True)
            break
    out["pg_load_s"] = time.perf_counter() - t0
    out["pg_loaded_chunks"] = written
    out["pg_load_chunks_per_s"] = written / out["pg_load_s"]
    out["load_avg_before_load"] = load
    print(f"  scale: postgres load {written} chunks in {out['pg_load_s']:.1f} s", flush=True)
    matrix = matrix[:written]
    store.close()
    store = PostgresStore(PostgresStore.Config(dsn=args.dsn, schema=schema, hnsw=True))  # defaults m=16, ef_c=64
    store.open(str(work / "scale_pg"))
    store.conn.add_notice_handler(lambda diag: notices.append(str(diag.message_primary)))
    # The store hides NOTICEs (client_min_messages = warning); pgvector says with one when the
    # graph outgrows maintenance_work_mem and the build goes on disk, so show them here.
    store.conn.execute("SET client_min_messages = notice")
    if args.scale_maintenance_work_mem:
        store.conn.execute(f"SET maintenance_work_mem = '{args.scale_maintenance_work_mem}'")
    out["maintenance_work_mem"] = store.conn.execute("SHOW maintenance_work_mem").fetchone()[0]
    t0 = time.perf_counter()
    if hasattr(store, "ensure_hnsw"):
        store.ensure_hnsw(dim)  # what the ANN retrievers' build runs after an ingest
    else:  # the store's first version built it at the first vector write
        with store._tx():
            store._vectors_written(model, dim)
    out["hnsw_build_s"] = time.perf_counter() - t0
    out["hnsw_build_notices"] = notices[:]
    print(f"  scale: HNSW build {out['hnsw_build_s']:.1f} s {notices}", flush=True)
    # Inserting with the index present (what an ingest into an indexed store pays).
    n_extra = args.scale_extra // per_doc
    extra = [batch_rows(d, min(d + per_batch, n_extra), "x") for d in range(0, n_extra, per_batch)]
    if extra:
        t0 = time.perf_counter()
        for docs, chunks, m in extra:
            store.replace_documents(docs, chunks, m, model)
        extra_n = sum(len(b[1]) for b in extra)
        out["pg_insert_with_hnsw"] = {"chunks": extra_n, "s": time.perf_counter() - t0}
        out["pg_insert_with_hnsw"]["chunks_per_s"] = extra_n / out["pg_insert_with_hnsw"]["s"]
        t0 = time.perf_counter()
        store.delete_documents([d.id for b in extra for d in b[0]])
        out["pg_delete_with_hnsw_s"] = time.perf_counter() - t0
    out["load_avg_before_vacuum"] = load_avg()
    t0 = time.perf_counter()
    store.conn.execute(f"VACUUM ANALYZE {schema}.chunks")
    store.conn.execute(f"VACUUM ANALYZE {schema}.documents")
    out["vacuum_analyze_s"] = time.perf_counter() - t0
    sizes = store.conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
        "WHERE s.nspname = %s AND c.relkind IN ('r', 'i', 't') ORDER BY 2 DESC",
        (schema,),
    ).fetchall()
    out["pg_relation_bytes"] = {r[0]: int(r[1]) for r in sizes}
    out["pg_total_bytes"] = int(store.stats()["bytes"])
    store.close()

    # SQLite: the same batches through its replace_documents.
    folder = work / "scale_sqlite"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    lite = SQLiteStore(SQLiteStore.Config())
    lite.open(str(folder))
    t0 = time.perf_counter()
    done = 0
    for docs, chunks, m in batches:
        if done >= written:
            break
        lite.replace_documents(docs, chunks, m, model)
        done += len(chunks)
    out["sqlite_load_s"] = time.perf_counter() - t0
    out["load_ratio_pg_vs_sqlite"] = out["pg_load_s"] / out["sqlite_load_s"]
    lite.close()
    print(f"  scale: sqlite load {done} chunks in {out['sqlite_load_s']:.1f} s", flush=True)

    # Queries: a stored vector plus noise (cosine ~0.7 to its source), and 3 random words.
    qrng = np.random.default_rng(1)
    src = qrng.choice(written, size=args.scale_queries, replace=False)
    noise = qrng.normal(size=(len(src), dim)).astype(np.float32) / np.sqrt(dim)
    qv = matrix[src] + noise
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    qtexts = [f"q{i}" for i in range(len(src))]
    vectors = {t: qv[i] for i, t in enumerate(qtexts)}
    ktexts = [" ".join(qrng.choice(vocab, size=3, replace=False)) for _ in range(args.scale_queries)]
    vectors.update({t: qv[i] for i, t in enumerate(ktexts)})  # hybrid queries: 3 words + a vector
    # SciFact's claims have ~12 words: an OR query of 10 words matches ~11% of the chunks here.
    ltexts = [" ".join(qrng.choice(vocab, size=10, replace=False)) for _ in range(args.scale_queries)]

    pg = pg_store(schema)
    emb = f'\n[embedder]\nuse = "sentence_transformers"\nmodel = "{model}"\n' + EMBED
    scale_systems = {
        "pgvector exact": (pg + emb + '[query.retrieve]\nuse = "pgvector"\nexact = true\n', qtexts, work / "scale_pg"),
        "pgvector HNSW": (
            pg + emb + '[query.retrieve]\nuse = "pgvector"\nef_search = 100\n',
            qtexts,
            work / "scale_pg",
        ),
        **{
            f"pgvector HNSW, ef_search {ef}": (
                pg + emb + f'[query.retrieve]\nuse = "pgvector"\nef_search = {ef}\n',
                qtexts,
                work / "scale_pg",
            )
            for ef in args.scale_ef
            if ef != 100
        },
        "dense (SQLite)": (SQLITE + emb + '[query.retrieve]\nuse = "dense"\n', qtexts, folder),
        "pg_fulltext": (pg + '[query.retrieve]\nuse = "pg_fulltext"\nmode = "or"\n', ktexts, work / "scale_pg"),
        "bm25s (SQLite)": (SQLITE + "[query.retrieve]\n" + BM25, ktexts, folder),
        "pg_fulltext, 10 words": (
            pg + '[query.retrieve]\nuse = "pg_fulltext"\nmode = "or"\n',
            ltexts,
            work / "scale_pg",
        ),
        "bm25s (SQLite), 10 words": (SQLITE + "[query.retrieve]\n" + BM25, ltexts, folder),
        "pg_hybrid": (
            pg + emb + '[query.retrieve]\nuse = "pg_hybrid"\ncandidates = 100\nk = 60\n',
            ktexts,
            work / "scale_pg",
        ),
        "hybrid RRF (SQLite)": (SQLITE + emb + RRF, ktexts, folder),
    }
    jobs, results, tops = {}, {}, {}
    for name, (toml, qs, index) in scale_systems.items():
        job = make_job(work, f"scale {name}", toml, index).open(create=False)
        share_model(job, model, vectors)
        t0 = time.perf_counter()
        if name in ("bm25s (SQLite)", "hybrid RRF (SQLite)"):  # the 10-word job reuses the same build
            job.rebuild_indexes()
        job.search(qs[0], k=10)  # first query: loads vectors / BM25 for this corpus version
        results[name] = {"first_query_s": time.perf_counter() - t0}
        for t in qs[:10]:
            job.search(t, k=10)
        jobs[name] = job
    for p in range(args.scale_passes):
        for name, job in jobs.items():
            qs, lat = scale_systems[name][1], []
            for t in qs:
                t0 = time.perf_counter()
                hits = job.search(t, k=10)[0].hits
                lat.append((time.perf_counter() - t0) * 1000)
                if p == 0:
                    tops.setdefault(name, []).append([h.chunk_id for h in hits])
            results[name].setdefault("passes", []).append(pct(lat))
        print(f"  scale pass {p}: " + ", ".join(f"{n} {results[n]['passes'][-1]['p50']:.1f}" for n in jobs), flush=True)
    for name in results:
        ps = results[name]["passes"]
        results[name].update(
            {"p50_ms": float(np.median([x["p50"] for x in ps])), "p95_ms": float(np.median([x["p95"] for x in ps]))}
        )
    exact, hnsw, lite_top = tops["pgvector exact"], tops["pgvector HNSW"], tops["dense (SQLite)"]
    out["hnsw_recall@10_vs_exact"] = float(
        np.mean([len(set(a) & set(b)) / 10 for a, b in zip(hnsw, exact, strict=True)])
    )
    ids = [f"d{i // per_doc}_{i % per_doc}" for i in src]
    out["hnsw_by_ef_search"] = {
        name: {
            "recall@10_vs_exact": float(
                np.mean([len(set(a) & set(b)) / 10 for a, b in zip(tops[name], exact, strict=True)])
            ),
            "recall@1_source": float(np.mean([i in h[:1] for i, h in zip(ids, tops[name], strict=True)])),
            "p50_ms": results[name]["p50_ms"],
            "p95_ms": results[name]["p95_ms"],
        }
        for name in tops
        if name.startswith("pgvector HNSW")
    }
    print(f"  HNSW by ef_search: {json.dumps(out['hnsw_by_ef_search'])}", flush=True)
    out["hnsw_recall@1_source"] = float(np.mean([i in h[:1] for i, h in zip(ids, hnsw, strict=True)]))
    out["exact_recall@1_source"] = float(np.mean([i in e[:1] for i, e in zip(ids, exact, strict=True)]))
    out["sqlite_dense_vs_pgvector_exact_same_top10"] = int(sum(a == b for a, b in zip(lite_top, exact, strict=True)))
    out["queries"] = results
    # The plans the retrievers' own statements run (EXPLAIN ANALYZE of the same SQL and params).
    plans = {name: explain(jobs[name], scale_systems[name][1][0]) for name in jobs if name.startswith("pg")}
    out["plans"] = plans
    out["hnsw_plan_uses_index"] = {name: uses_hnsw(p) for name, p in plans.items()}
    print(f"  plans use the HNSW index: {out['hnsw_plan_uses_index']}", flush=True)
    for name, p in plans.items():
        for plan in p:
            print(
                f"  {name}: " + " | ".join(line.strip() for line in plan if "Time" in line or "Scan" in line),
                flush=True,
            )
    for job in jobs.values():
        job.close()
    if not args.keep_scale:
        drop_schema(args.dsn, schema)
        shutil.rmtree(folder, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--dsn", default=os.environ.get("PLM_DATABASE_URL", ""), help="default: PLM_DATABASE_URL")
    ap.add_argument("--work", type=Path, default=Path("/tmp/plm-bench-postgres"), help="SQLite indexes, configs")
    ap.add_argument("--schema", default="bench_scifact", help="the Postgres schema of the SciFact query fixture")
    ap.add_argument("--parts", default="ingest,latency,qps,scale")
    ap.add_argument("--repeats", type=int, default=3, help="ingest repeats per store (median reported)")
    ap.add_argument("--latency-passes", type=int, default=3, help="passes over the 300 queries per system")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--qps-seconds", type=float, default=20.0)
    ap.add_argument("--qps-repeats", type=int, default=1)
    ap.add_argument("--scale-n", type=int, default=100_000, help="synthetic chunks")
    ap.add_argument("--scale-batch", type=int, default=1000, help="chunks per replace_documents call")
    ap.add_argument("--scale-extra", type=int, default=5000, help="chunks inserted with the HNSW index present")
    ap.add_argument("--scale-queries", type=int, default=200)
    ap.add_argument("--scale-passes", type=int, default=3)
    ap.add_argument("--scale-max-load-s", type=float, default=900.0, help="stop loading after this many seconds")
    ap.add_argument("--scale-ef", default="100", help="hnsw.ef_search values to measure at scale (a,b)")
    ap.add_argument(
        "--scale-maintenance-work-mem",
        default="",
        help="SET maintenance_work_mem for the HNSW build (default: the server's)",
    )
    ap.add_argument("--keep-scale", action="store_true", help="keep the scale schema and folder")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    args.scale_ef = [int(e) for e in args.scale_ef.split(",")]
    parts = set(args.parts.split(","))
    if not args.dsn:
        raise SystemExit("set PLM_DATABASE_URL or --dsn (`plm pg start --data DIR` prints one)")
    os.environ["PLM_DATABASE_URL"] = args.dsn
    check_index_side()
    args.work.mkdir(parents=True, exist_ok=True)
    import sentence_transformers
    import torch

    import plm_core

    out: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "sentence_transformers": sentence_transformers.__version__,
            "plm": getattr(plm_core, "__version__", "?"),
            "load_avg_start": os.getloadavg(),
        },
        "postgres": pg_info(args.dsn),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "dsn"},
        "command": " ".join(sys.argv),
    }
    print(json.dumps(out["postgres"]), flush=True)
    from plm_core.config import load_job
    from plm_eval.dataset import resolve_corpus
    from plm_index.plugins import default_registry

    corpus = resolve_corpus(load_job(ROOT / "configs/postgres/dense.toml", default_registry()), args.dataset)

    def save() -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(out, indent=2, default=str) + "\n")

    if "ingest" in parts:
        print("a. ingest", flush=True)
        out["ingest"] = part_ingest(args, args.work, corpus)
        save()
    if parts & {"latency", "qps"}:
        print("fixtures", flush=True)
        out["fixtures"] = fixtures(args, args.work, corpus)
        texts = query_texts(args)
        ref, vectors, embed_ms = embed_queries(texts)
        out["query_embedding_ms"] = embed_ms
        print(f"  MiniLM query embedding: {json.dumps(embed_ms)}", flush=True)
        if "latency" in parts:
            print("b. latency", flush=True)
            out["latency"] = part_latency(args, args.work, texts, ref, vectors)
            save()
        if "qps" in parts:
            print("c. qps", flush=True)
            out["qps"] = part_qps(args, args.work, texts, vectors)
            save()
    if "scale" in parts:
        print("d. scale", flush=True)
        out["scale"] = part_scale(args, args.work)
        save()
    save()


if __name__ == "__main__":
    main()
