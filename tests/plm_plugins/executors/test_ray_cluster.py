"""The Ray executor on a simulated multi-node cluster (`ray.cluster_utils.Cluster`: a head and
two worker nodes, all on 127.0.0.1), through bench/bench_faults.py in a subprocess (Ray's
address handling is set before Ray is imported there):

- an ingest on the cluster stores exactly what the local executor stores (document
  fingerprints, chunks, vector bytes) and answers queries alike;
- the worker node hosting a batch actor removed mid-ingest (`cluster.remove_node`) loses
  and duplicates nothing: the ingest completes (the actor restarts on the other node) or
  fails with one line, the store stays consistent, and a rerun gives the local result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def test_a_cluster_ingest_equals_local_and_survives_a_removed_node(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'plm[ray]')")
    pytest.importorskip("plm_example_plugin", reason="the example plugin (hashed_words) is not installed")
    out = tmp_path / "ray.json"
    cmd = [sys.executable, str(ROOT / "bench" / "bench_faults.py"), "--parts", "ray", "--json", str(out)]
    cmd += ["--ray-batch", "2", "--ray-slow", "0.2", "--ray-timeout", "90"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0"}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert out.exists(), res.stderr[-3000:]
    result = json.loads(out.read_text())
    assert res.returncode == 0 and result["ok"], (result["failed"], result["ray"])
    ray = result["ray"]
    assert ray["clean"]["equal_local"] and ray["local"]["documents"] == ray["clean"]["added"]
    removed = ray["node_removed"]
    assert removed["actors_on_removed_node"] >= 1 and 0 < removed["committed_before"] < ray["local"]["documents"]
    assert removed["rerun"]["equal_local"] and removed["consistency_problems"] == []
