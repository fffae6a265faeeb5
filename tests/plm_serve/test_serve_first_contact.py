"""What a new user meets starting `plm serve` (issue 23): a config with no index is refused
as `plm query` refuses it, a busy port is one line before any model loads, and a client
started right after the server waits for it with `--wait` instead of failing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from plm_needs import needs

pytestmark = needs("fastapi", "bm25s")

REPO = Path(__file__).resolve().parents[2]
CONFIG = """
[job]
name = "first_contact"
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pager.md").write_text("# Pager\n\n## Rotation\n\nThe pager moves to the next engineer.\n")
    (tmp_path / "job.toml").write_text(CONFIG)
    return tmp_path


def env_for(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PLM_API_KEY", "PLM_SERVER")}
    return {**env, "PLM_DATA_DIR": str(root / "data"), "PLM_PROGRESS": "0"}


def plm(*args: str, root: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env_for(root), timeout=timeout, cwd=root)


def test_serve_refuses_a_config_with_no_index(root: Path) -> None:
    res = plm("serve", "--config", str(root / "job.toml"), "--port", str(free_port()), root=root)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "no index at" in res.stderr and str(root / "data" / "first_contact") in res.stderr
    assert "plm ingest" in res.stderr and "--create" in res.stderr and "Traceback" not in res.stderr
    assert not (root / "data" / "first_contact").exists()  # nothing created


def test_a_busy_port_is_one_line_and_no_serving_line(root: Path) -> None:
    assert plm("ingest", str(root / "docs"), "--config", str(root / "job.toml"), root=root).returncode == 0
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = plm("serve", "--config", str(root / "job.toml"), "--port", str(port), root=root)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"127.0.0.1:{port} is in use" in res.stderr and "Traceback" not in res.stderr
    assert "plm serve:" not in res.stdout


@pytest.mark.slow
def test_a_client_started_with_the_server_waits_for_it(root: Path) -> None:
    """The README's service block pasted at once: `plm serve ... &` then `plm query --wait`."""
    assert plm("ingest", str(root / "docs"), "--config", str(root / "job.toml"), root=root).returncode == 0
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "plm_index.cli", "serve", "--config", str(root / "job.toml"), "--port", str(port)]
    log = (root / "serve.log").open("w")
    server = subprocess.Popen(cmd, env=env_for(root), stdout=log, stderr=subprocess.STDOUT, cwd=root)
    try:
        res = plm("query", "pager rotation", "--server", url, "--wait", "60", root=root)
        assert res.returncode == 0, res.stderr + (root / "serve.log").read_text()
        assert "pager" in res.stdout
        deadline = time.monotonic() + 30
        while "ready on" not in (root / "serve.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert f"ready on {url}" in (root / "serve.log").read_text()
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def test_wait_gives_up_with_one_line(root: Path) -> None:
    res = plm("query", "x", "--server", f"http://127.0.0.1:{free_port()}", "--wait", "1", root=root)
    assert res.returncode == 2 and "not ready within 1s" in res.stderr and res.stderr.count("\n") == 1, res.stderr


@pytest.mark.slow
def test_status_reports_a_plm_watch_process_syncing_the_same_index(root: Path) -> None:
    pytest.importorskip("watchfiles")
    env = env_for(root)
    config = str(root / "job.toml")
    watch_log = (root / "watch.log").open("w")
    cmd = [sys.executable, "-m", "plm_index.cli"]
    watcher = subprocess.Popen([*cmd, "watch", "docs", "--config", config], env=env, stdout=watch_log, cwd=root)
    server = None
    try:
        deadline = time.monotonic() + 60
        while not (root / "data" / "first_contact" / "watcher.json").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        while "catch-up" not in (root / "watch.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        port = free_port()
        serve_log = (root / "serve.log").open("w")
        server = subprocess.Popen([*cmd, "serve", "--config", config, "--port", str(port)], env=env, stdout=serve_log)
        res = plm("status", "--server", f"http://127.0.0.1:{port}", "--wait", "60", "--json", root=root)
        assert res.returncode == 0, res.stderr + (root / "serve.log").read_text()
        state = json.loads(res.stdout)["watcher"]
        assert state is not None and state["pid"] == watcher.pid and state["dirs"] == [str(root / "docs")]
        watcher.terminate()
        watcher.wait(timeout=60)
        again = plm("status", "--server", f"http://127.0.0.1:{port}", "--json", root=root)
        assert json.loads(again.stdout)["watcher"] is None
    finally:
        for proc in (watcher, server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
        watch_log.close()
