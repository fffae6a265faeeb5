"""Running the service: `GET /health` (the process is up; no key needed), `GET /ready` (an
index is loaded and answers: 503 until then), `GET /status` (counts, corpus version, model,
config, sizes, last sync, watcher state), the writes (`POST /documents`, `DELETE
/documents/{id}`: the same sync path as `plm ingest`, one writer at a time, answered once the
change is searchable) and `GET /metrics` (Prometheus text)."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from plm_index.documents import documents_from_values
from plm_serve.errors import FromFile
from plm_serve.http_errors import ERRORS, ErrorResponse, error, shortened
from plm_serve.metrics import ServerMetrics
from plm_serve.service import Service

MAX_DOCUMENTS = 10_000  # records in one POST /documents


class DocumentsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    records: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_DOCUMENTS, description="Records as the json_records loader reads them."
    )


class RecordProblem(BaseModel):
    path: str = Field(description="Which record: `record N`, counting from 1 in the request's list.")
    doc_id: str = Field(description="Its id, when it has one.")
    error: str = Field(description="What is wrong with it and how to fix it.")


class RecordsErrorResponse(ErrorResponse):
    failed: list[RecordProblem] = Field(
        [], description="POST /documents: each record that is invalid (nothing of the request was stored)."
    )


class SyncResponse(BaseModel):
    added: list[str]
    updated: list[str]
    deleted: list[str]
    unchanged: int
    failed: list[dict[str, str]]
    seconds: float
    corpus_version: int


def refuse_file_documents(job: Any, docs: list[Any]) -> list[Any]:
    """These posted documents, unless one has the id of a document a file holds (a folder's
    `plm ingest` or a watcher's): replaced by a record, it kept neither the file's path nor its
    metadata, and nothing put it back until that file changed (HTTP 409). One store query."""
    for doc_id, path in job.store.paths_of([d.id for d in docs]).items():
        if path:
            raise FromFile(
                f"document {doc_id!r} comes from the file {path}: change the file (a watcher or "
                "`plm ingest` of its folder reads it), or post the record under another id"
            )
    return docs


def sync_payload(report: Any) -> dict[str, Any]:
    """A sync's report as `SyncResponse`."""
    return {
        "added": report.added,
        "updated": report.updated,
        "deleted": report.deleted,
        "unchanged": report.unchanged,
        "failed": [{"path": f.path, "doc_id": f.doc_id or "", "error": f.error} for f in report.failed],
        "seconds": round(report.seconds, 3),
        # The write's own version (the whole status, store counts and a check of every
        # saved segment, cost a POST 150-250 ms at a million chunks).
        "corpus_version": report.corpus_version or 0,
    }


def add_operation_routes(router: APIRouter, service: Service, counted: ServerMetrics) -> None:
    """Health, readiness, status, the writes and the metrics of `service`, on `router`."""

    @router.get("/health")
    def health() -> dict[str, str]:
        """Liveness: the process is up (no key needed)."""
        return {"status": "ok"}

    @router.get("/ready", responses=ERRORS)
    def ready() -> Any:
        """Readiness: an index is loaded and not empty (503 until then)."""
        problem = service.check()  # a loaded index, and a store that still answers
        generation = service.generation
        if problem is not None or generation is None:
            return error(503, problem or "no documents indexed yet")
        return {"ready": True, "corpus_version": str(generation.version)}

    @router.get("/status", responses=ERRORS)
    def status() -> dict[str, Any]:
        """Documents, chunks, corpus version, model, config, sizes, last sync, watcher."""
        return service.status()

    @router.post("/documents", response_model=SyncResponse, responses={**ERRORS, 422: {"model": RecordsErrorResponse}})
    def post_documents(body: DocumentsRequest) -> Any:
        """Add or update documents (records with at least `id` and `text`); unchanged ones are
        skipped. A request holding an invalid record is a 422 naming each one, and stores nothing."""
        docs, failed = documents_from_values(body.records)
        if failed:
            # All or nothing: a 200 with the problem inside `failed` read as success to
            # clients that check the status; fixed and sent again, the request is whole.
            problems = "; ".join(f"{f.path}: {f.error}" for f in failed[:5])
            more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
            return JSONResponse(
                {
                    "error": f"{len(failed)} of {len(body.records)} records are invalid, nothing was stored: "
                    f"{problems}{more}",
                    "failed": [{"path": f.path, "doc_id": f.doc_id or "", "error": f.error} for f in failed],
                },
                status_code=422,
            )
        report = service.apply(lambda job: job.sync(refuse_file_documents(job, docs)))
        counted.sync(report, "documents")
        return sync_payload(report)

    # `:path`: an id may hold a `/` (`docs/a.md`), which POST /documents accepts.
    @router.delete("/documents/{doc_id:path}", response_model=SyncResponse, responses=ERRORS)
    def delete_document(doc_id: str) -> Any:
        """Remove a document with its chunks and vectors (404 if unknown)."""
        report = service.apply(lambda job: job.sync(deleted=[doc_id]))
        if not report.deleted:
            return error(404, f"no document with id {shortened(repr(doc_id))}")
        counted.sync(report, "delete")
        return sync_payload(report)

    @router.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> Any:
        """Prometheus metrics."""
        return PlainTextResponse(counted.text(), media_type="text/plain; version=0.0.4")
