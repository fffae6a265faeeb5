"""What HTTP adds to a query: one client, keep-alive, `GET /query` against a running `plm
serve`, timed at the client, beside the stage times the server reports for the same query
(`timings_ms`); the difference is uvicorn, FastAPI, JSON and the loopback. Fresh query
texts each request (the embedder remembers recent ones). Optionally `GET /health` too.

    plm serve --config bench.toml --port 8771 &
    python bench/bench_http_query.py --port 8771 --requests 500 --rounds 3
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import time
import urllib.parse

WORDS = "kubernetes pods scaling node cluster service deploy volume network ingress secret config storage".split()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--health", action="store_true", help="also time GET /health, the smallest request")
    args = ap.parse_args()
    conn = http.client.HTTPConnection("127.0.0.1", args.port)
    rng = random.Random(1)

    def get(path: str) -> bytes:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"{path}: HTTP {response.status}: {body[:200]!r}")
        return body

    def query_path(i: int) -> str:
        text = " ".join(rng.choices(WORDS, k=3)) + f" w{i}"
        return "/query?" + urllib.parse.urlencode({"q": text, "k": args.k})

    for i in range(50):
        get(query_path(-i))
    for r in range(args.rounds):
        client, server = [], []
        for i in range(args.requests):
            path = query_path(r * args.requests + i)
            t0 = time.perf_counter()
            body = get(path)
            client.append((time.perf_counter() - t0) * 1000)
            server.append(sum(json.loads(body)["timings_ms"].values()))
        overhead = [c - s for c, s in zip(client, server, strict=True)]
        line = (
            f"round {r + 1}: query p50 {pct(client, 0.5):.2f} ms, p95 {pct(client, 0.95):.2f} ms; "
            f"server stages p50 {pct(server, 0.5):.2f} ms; HTTP and the rest p50 {pct(overhead, 0.5):.2f} ms"
        )
        if args.health:
            health = []
            for _ in range(args.requests):
                t0 = time.perf_counter()
                get("/health")
                health.append((time.perf_counter() - t0) * 1000)
            line += f"; /health p50 {pct(health, 0.5):.2f} ms"
        print(line, flush=True)


if __name__ == "__main__":
    main()
