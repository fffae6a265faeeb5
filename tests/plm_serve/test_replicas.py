"""Two `plm serve` replicas over one Postgres store, as real processes on 127.0.0.1, through
bench/bench_faults.py in a subprocess (reduced sizes):

- a document written through one replica is found by the other's GET /query within 2 s;
- SIGKILL of either replica, and a Postgres restart, during a stream of writes lose and
  duplicate nothing: every write the client got a 2xx for (after retrying the failed ones
  on the other replica) is stored exactly once and found exactly once through both; no
  write is refused with a 4xx, which would tell a client not to retry it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_two_replicas_over_postgres_replicate_and_lose_nothing_to_faults(tmp_path: Path) -> None:
    for module in ("httpx", "fastapi", "bm25s", "psycopg", "pgserver"):
        pytest.importorskip(module)
    out = tmp_path / "replicas.json"
    cmd = [sys.executable, str(ROOT / "bench" / "bench_faults.py"), "--parts", "replicas", "--json", str(out)]
    cmd += ["--writes", "10", "--stream", "12", "--down-s", "0.5"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0"}
    env.pop("PLM_API_KEY", None)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)
    assert out.exists(), res.stderr[-3000:]
    result = json.loads(out.read_text())
    assert res.returncode == 0 and result["ok"], (result["failed"], result["replicas"])
    replicas = result["replicas"]
    assert replicas["replication"]["within_2s"] == 10
    assert [p["fault"] for p in replicas["faults"]] == ["kill A", "kill B", "pg restart"]
    for phase in replicas["faults"]:
        acknowledged = phase["acknowledged_first_try"] + phase["retried_then_acknowledged"]
        assert acknowledged == phase["writes"] and phase["lost"] == phase["duplicated"] == 0, phase
    assert replicas["tracebacks_in_logs"] == {"A": 0, "B": 0}
