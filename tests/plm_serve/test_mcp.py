"""`plm mcp`: search and status as MCP tools, checked with the SDK's own client, in process
and as a real `plm mcp` subprocess over stdio. A BM25-only config (no model: fast)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from plm_needs import needs

from plm_core.settings import Settings
from plm_index.job import Job
from plm_serve.mcp_server import build_server, hit_data, warm

pytestmark = needs("mcp", extra="serve")

CONFIG = """
[job]
name = "mcp_fast"
description = "BM25 over a few Markdown notes"

[store]
use = "sqlite"

[index.load]
use = "markdown_dir"

[index.chunk]
use = "markdown_semantic"
target_words = 40
min_words = 10
max_words = 60
overlap_sentences = 1
max_heading_level = 4

[query.retrieve]
use = "hybrid"

[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "whitespace_lower"
method = "lucene"

[query.retrieve.fuser]
use = "rrf"
order = ["bm25"]

[query.retrieve.fuser.default]
weights = { bm25 = 1.0 }

[query.retrieve.fuser.expanded]
weights = { bm25 = 1.0 }
"""

DOCS = {
    "backups": "---\nteam: storage\nversion: 3\n---\n# Backups\n\n## Snapshots\n\nVault snapshots run hourly and "
    "give an RPO of one hour; snapshots are kept for thirty days in the backup bucket.\n\n## Restore\n\nA restore "
    "replays the newest snapshot into a fresh cluster, then checks the checksums.\n",
    "tokens": "---\nteam: identity\nversion: 1\n---\n# Tokens\n\n## Expiry\n\nAccess tokens are JWTs valid for "
    "fifteen minutes; refresh tokens last seven days and rotate on every use.\n",
    "search": "---\nteam: search\nversion: 2\n---\n# Search\n\n## Ranking\n\nQueries are ranked with BM25 and a "
    "dense model, fused by reciprocal rank fusion before the reranker.\n",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(config, index folder, data folder) with the notes ingested."""
    root = tmp_path_factory.mktemp("mcp")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / f"{name}.md").write_text(text)
    cfg = root / "job.toml"
    cfg.write_text(CONFIG)
    index, data = root / "index", root / "data"
    job = Job.from_config(cfg, index_dir=index, settings=Settings(progress=False, data_dir=str(data)))
    job.ingest([docs])
    job.close()
    return cfg, index, data


@pytest.fixture(scope="module")
def job(built: tuple[Path, Path, Path]) -> Job:
    cfg, index, data = built
    return warm(Job.from_config(cfg, index_dir=index, settings=Settings(progress=False, data_dir=str(data))))


def run_client(server: Any, calls: list[tuple[str, dict[str, Any] | None]]) -> tuple[Any, list[Any]]:
    """(tool listing, one result per call), through the SDK's in-process client."""
    from mcp import Client

    async def main() -> tuple[Any, list[Any]]:
        async with Client(server) as client:
            tools = await client.list_tools()
            return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def test_lists_search_and_status_with_schemas(job: Job) -> None:
    tools, _ = run_client(build_server(job), [])
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"search", "status"}
    search = by_name["search"]
    assert search.input_schema["required"] == ["query"]
    assert set(search.input_schema["properties"]) == {"query", "k", "filters"}
    assert search.input_schema["properties"]["k"]["default"] == 5
    assert "hits" in search.output_schema["properties"]
    assert search.annotations.read_only_hint is True
    assert "corpus_version" in by_name["status"].output_schema["properties"]


def test_search_gives_the_hits_job_retrieve_gives(job: Job) -> None:
    calls: list[tuple[str, dict[str, Any] | None]] = [
        ("search", {"query": "how long are refresh tokens valid", "k": 3}),
        ("search", {"query": "snapshots restore ranking", "k": 5, "filters": {"team": {"in": ["storage", "search"]}}}),
    ]
    _, (plain, filtered) = run_client(build_server(job), calls)
    assert not plain.is_error
    expected = [hit_data(h) for h in job.retrieve("how long are refresh tokens valid", k=3)]
    assert plain.structured_content["hits"] == expected
    assert expected[0]["doc_id"] == "tokens" and expected[0]["rank"] == 1
    hit = plain.structured_content["hits"][0]
    assert {"doc_id", "chunk_id", "rank", "score", "heading_path", "text", "metadata", "title", "sources"} <= set(hit)
    assert hit["metadata"]["team"] == "identity" and hit["heading_path"] == ["Expiry"]  # below the title
    text = plain.content[0].text
    assert text.startswith("1. tokens (Tokens)") and "section: Expiry\n" in text and "fifteen minutes" in text

    filters = {"team": {"in": ["storage", "search"]}}
    expected = [hit_data(h) for h in job.retrieve("snapshots restore ranking", k=5, filters=filters)]
    assert filtered.structured_content["hits"] == expected
    assert {h["doc_id"] for h in expected} == {"backups", "search"}
    assert filtered.structured_content["filters"] == filters


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"query": "   "}, "the query is empty"),
        ({"query": "tokens", "k": 0}, "k must be from 1 to 10000"),
        ({"query": "tokens", "k": 10_001}, "k must be from 1 to 10000"),
        ({"query": "tokens", "filters": {"version": {"gte": [1]}}}, "version"),
        ({"query": "tokens", "filters": {"team": ["a", "b"]}}, "ambiguous"),
        ({"query": "tokens", "k": "many"}, "k"),
        ({"k": 3}, "query"),
    ],
)
def test_bad_input_is_a_tool_error_not_a_crash(job: Job, args: dict[str, Any], message: str) -> None:
    _, (result, after) = run_client(build_server(job), [("search", args), ("search", {"query": "tokens"})])
    assert result.is_error and result.structured_content is None
    assert message in result.content[0].text
    assert "Traceback" not in result.content[0].text
    assert not after.is_error and after.structured_content["hits"]  # the server lives on


def test_no_match_is_an_empty_result(job: Job) -> None:
    _, (result,) = run_client(build_server(job), [("search", {"query": "zebra xylophone"})])
    assert not result.is_error and result.structured_content["hits"] == []
    assert result.content[0].text == "no match: no chunk matches the query"


def test_status_reports_the_index(job: Job) -> None:
    _, (result,) = run_client(build_server(job), [("status", None)])
    assert not result.is_error
    data = result.structured_content
    stats = job.store.stats()
    assert data["documents"] == stats["documents"] == 3
    assert data["chunks"] == stats["chunks"] and data["corpus_version"] == stats["corpus_version"]
    assert data["model"] is None and data["job"] == "mcp_fast" and data["index_dir"] == str(job.index_dir)
    assert result.content[0].text.startswith("3 documents, ")


def plm_command() -> list[str]:
    """The installed `plm` script next to this interpreter, else the module."""
    script = Path(sys.executable).with_name("plm")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "plm_index.cli"]


def test_plm_mcp_over_stdio(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """The real command: `plm mcp` as a subprocess, driven by the SDK's stdio client."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    cfg, index, data = built
    plm, *first = plm_command()
    params = StdioServerParameters(
        command=plm,
        args=[*first, "mcp", "--config", str(cfg), "--index", str(index)],
        env={
            "PLM_DATA_DIR": str(data),
            "PLM_PROGRESS": "0",
            "HF_HUB_OFFLINE": "1",
            "PATH": os.environ["PATH"],
            # the checkout under test, where it is put first on the path (not the installed one)
            **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        },
    )
    stderr = tmp_path / "stderr.txt"

    async def main() -> tuple[list[str], Any, Any]:
        with anyio.fail_after(60), stderr.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                tools = await client.list_tools()
                found = await client.call_tool("search", {"query": "vault snapshots RPO", "k": 2})
                bad = await client.call_tool("search", {"query": ""})
                return [t.name for t in tools.tools], found, bad

    try:
        names, found, bad = anyio.run(main)
    except Exception as err:
        raise AssertionError(f"plm mcp failed ({err!r}); its stderr:\n{stderr.read_text()}") from err
    assert sorted(names) == ["search", "status"]
    assert not found.is_error
    assert [h["doc_id"] for h in found.structured_content["hits"]][0] == "backups"
    assert found.structured_content["hits"][0]["heading_path"] == ["Snapshots"]
    assert bad.is_error and "the query is empty" in bad.content[0].text


def test_plm_mcp_without_an_index_says_how_to_build_one(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    import subprocess

    cfg, _, data = built
    env = {**os.environ, "PLM_DATA_DIR": str(data)}
    args = [*plm_command(), "mcp", "--config", str(cfg), "--index", str(tmp_path / "none")]
    res = subprocess.run(args, input="", capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 2, res.stderr
    assert "no index at" in res.stderr and "plm ingest" in res.stderr and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_raw_lines_the_sdk_cannot_read_get_an_error_reply(built: tuple[Path, Path, Path]) -> None:
    """The SDK drops a line it cannot read without a word, leaving a client waiting for ever;
    `plm mcp` answers each with a JSON-RPC error (the request's id when it can be read, else
    null) and goes on serving."""
    import json
    import subprocess
    import threading

    cfg, index, data = built
    env = {**os.environ, "PLM_DATA_DIR": str(data), "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    args = [*plm_command(), "mcp", "--config", str(cfg), "--index", str(index)]
    proc = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
    )
    replies: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: replies.extend(json.loads(line) for line in proc.stdout), daemon=True)
    reader.start()
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    search = {"name": "search", "arguments": {"query": "\ud800 vault"}}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": search}),  # a lone \ud800 escape
        '{"jsonrpc": "2.0", "id": 6, "method"',  # malformed JSON
        "[" * 100_000 + "]" * 100_000,  # 100k deep
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call"} | {"oops": [1]}),  # not a valid request
        json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    ]
    try:
        assert proc.stdin is not None
        proc.stdin.write("\n".join(lines) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while not any(r.get("id") == 9 for r in replies) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # any reply written before the last one has arrived by now
    finally:
        proc.stdin.close()
        proc.wait(30)
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for r in replies:
        by_id.setdefault(r.get("id"), []).append(r)
    assert 9 in by_id, replies  # still serving after the bad lines
    assert by_id[5][0]["error"]["code"] == -32700 and "surrogate" in by_id[5][0]["error"]["message"]
    assert [r["error"]["code"] for r in by_id[None]] == [-32700, -32700]  # malformed, too deep: no id to read
    assert "recursion" in by_id[None][1]["error"]["message"] or "deep" in by_id[None][1]["error"]["message"]
    assert 7 in by_id and "error" in by_id[7][0], replies
