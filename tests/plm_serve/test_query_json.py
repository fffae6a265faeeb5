"""`GET`/`POST /query` write their JSON themselves (not through FastAPI's response model):
the body is the payload as `plm query --json` has it, and a score that is not finite is
written as null with a 200, as the model did, not a 500."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from plm_needs import needs

pytestmark = needs("fastapi", "bm25s", "httpx")

CONFIG = """
[job]
name = "query_json"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
"""


@pytest.fixture()
def client(tmp_path: Path) -> Any:
    from fastapi.testclient import TestClient

    from plm_core.settings import Settings
    from plm_index.job import Job
    from plm_serve.server import create_app
    from plm_serve.service import Service

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "alpha.md").write_text("# Alpha\n\nNightly backups of the alpha volume run at two.\n")
    (docs / "beta.md").write_text("# Beta\n\nBeta tokens expire after one hour.\n")
    (tmp_path / "job.toml").write_text(CONFIG)
    job = Job.from_config(tmp_path / "job.toml", settings=Settings(data_dir=str(tmp_path / "data"), progress=False))
    job.ingest([docs])
    service = Service(job, readers=1)
    service.start()
    try:
        yield TestClient(create_app(service), base_url="http://127.0.0.1")  # the host check lets 127.0.0.1 in
    finally:
        service.stop()
        job.close()


def test_the_body_is_the_query_payload(client: Any) -> None:
    got = client.get("/query", params={"q": "alpha backups", "k": 2})
    assert got.status_code == 200 and got.headers["content-type"] == "application/json"
    body = got.json()
    assert [h["doc_id"] for h in body["hits"]] == ["alpha"] and body["query"] == "alpha backups"
    assert set(body) == {"query", "expanded", "fired", "filters", "hits", "timings_ms", "corpus_version"}
    posted = client.post("/query", json={"text": "alpha backups", "k": 2}).json()
    assert posted["hits"] == body["hits"]


def test_a_score_that_is_not_finite_is_written_as_null(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from plm_serve.routes import query

    real = query.query_payload

    def broken_score(*args: Any) -> dict[str, Any]:  # what a plugin that divides by zero leaves
        payload = real(*args)
        payload["hits"][0]["score"] = math.nan
        return payload

    monkeypatch.setattr(query, "query_payload", broken_score)
    got = client.get("/query", params={"q": "alpha backups"})
    assert got.status_code == 200
    assert json.loads(got.text)["hits"][0]["score"] is None
