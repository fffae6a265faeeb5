"""`plm serve`: the HTTP service (FastAPI under uvicorn), warm, over one index.

    plm serve --config FILE [--index DIR] [--host 127.0.0.1] [--port 8000] [--watch DIR...]

Endpoints (JSON; the schema is at /openapi.json; no /docs page: Swagger UI's script would
come from a CDN onto the origin where the pages keep the API key):
- `POST /query` {text, k, filters, weights} and `GET /query?q=...&k=...&filter=...&weight=...`:
  hits as `plm query --json` prints them, with per-stage timings. GET's `filter` and `weight`
  (repeatable) take the CLI's `--filter`/`--weight` syntax (`version>=3`, `team=a,b`, `bm25=0.5`).
- `GET /files/{id}`: a document's original file (a PDF opens at `#page=N`), only from inside an
  indexed folder.
- `GET /documents/{id}`: one stored document, whole, with its Markdown rendered to HTML
  (`?chunk=ID` adds the id of the heading that chunk sits under; a relative link to another
  stored document points at its page, `/doc?id=...`).
- `GET /`: a search page (plain HTML and a little JavaScript) over `GET /query`, its state in
  the URL (`/?q=...&k=...&filter=...`); `GET /doc?id=...`: the page showing one document.
- `GET /health` (the process is up), `GET /ready` (an index is loaded: 503 until then).
- `GET /status`: counts, corpus version, model, config, sizes, last sync, watcher state.
- `POST /documents` (records as the JSON loader takes them; an invalid record makes the
  request a 422 that stores nothing) and `DELETE /documents/{id}`: the same sync path as
  `plm ingest`, one writer at a time; the response comes once the change is searchable.
- `GET /metrics`: Prometheus text (requests, latency, corpus version, syncs).

A user error is a 4xx with `{"error": "..."}`; nothing a client sends yields a 500. With
PLM_API_KEY set, every endpoint but /health and the two pages needs `Authorization: Bearer <key>`. Request
bodies are limited (`--max-body-mb`); CORS is off unless `--cors-origin` is given. Every
request must name this server in `Host` (`--allow-host`), and every response carries the
usual security headers: see plm_serve/http_guard.py.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations, which
# name classes imported inside create_app (FastAPI loads only when serving).
import hmac
import json
import logging
import mimetypes
import signal
import threading
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from pydantic import BaseModel, ConfigDict, Field

from plm_core.errors import PipelineError, PlmUserError, TypeValidationError
from plm_core.records import Query
from plm_index.remote import bearer_key
from plm_index.search import MAX_K, MAX_QUERY_CHARS
from plm_serve.documents import render_document
from plm_serve.http_guard import API_CSP, HostAllowlist, HostGuard, page_csp
from plm_serve.schemas import HitModel
from plm_serve.service import FromFile, NotReady, Service

log = logging.getLogger("plm.serve")
access = logging.getLogger("plm.serve.access")
MAX_DOCUMENTS = 10_000  # records in one POST /documents
PAGES = {"/": "search_page.html", "/doc": "document_page.html"}  # hold no data: served without the key
PDF_CSP = "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"  # GET /files/{id} of a PDF


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to search for.")
    k: int = Field(5, ge=1, le=MAX_K, description="How many hits to return.")
    filters: dict[str, Any] | None = Field(None, description="Metadata filters, as plm_index/filters.py defines them.")
    weights: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(
        None,
        description="Fusion weight per source (retriever name) for this query, replacing the fuser profile's.",
    )


class QueryResponse(BaseModel):
    query: str
    expanded: str
    fired: list[str]
    filters: dict[str, Any] | None
    hits: list[HitModel]
    timings_ms: dict[str, float]
    corpus_version: str
    note: str | None = Field(None, description="Why there is no hit, when there is none (the filters' rule).")


class HeadingModel(BaseModel):
    id: str
    level: int
    text: str
    line: int
    page: int


class DocumentResponse(BaseModel):
    id: str
    title: str
    path: str
    metadata: dict[str, Any]
    front_matter: str
    text: str
    html: str
    headings: list[HeadingModel]
    anchor: str | None
    pages: int | None = Field(None, description="A paged document's (a PDF's) page count; `#page-N` opens page N.")
    page: int | None = Field(None, description="The page the chunk asked for is on.")
    file: str | None = Field(None, description="Where its original file opens (`/files/ID`), if it has one.")


class ErrorResponse(BaseModel):
    error: str


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


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 404, 409, 413, 415, 422, 503)
}


GET_QUERY_PARAMS = frozenset({"q", "k", "filter", "weight"})
GET_HELP = "q, k, filter (repeat it) and weight (repeat it)"


def shortened(text: str, limit: int = 200) -> str:
    """`text` for a message or a log line: an id or a path of any length (a client may send
    100 KB) is cut at `limit` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def did_you_mean(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, sorted(GET_QUERY_PARAMS), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


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


def query_payload(text: str, ranking: Any, timings: dict[str, float], filters: Any, version: str) -> dict[str, Any]:
    from plm_index.search import query_payload as local_payload

    return {**local_payload(text, ranking, timings, filters), "corpus_version": version}


def create_app(
    service: Service,
    api_key: str | None = None,
    cors_origins: tuple[str, ...] = (),
    max_body_mb: float = 10.0,
    allowlist: HostAllowlist | None = None,
) -> Any:
    """The ASGI app over a started `Service`: FastAPI inside the Host check and security
    headers (`allowlist`; None: a server bound to 127.0.0.1)."""
    from fastapi import FastAPI, Request
    from fastapi import Query as QueryParam
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, PlainTextResponse, Response
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
    from starlette.exceptions import HTTPException

    app = FastAPI(
        title="plm",
        version=_version(),
        description=__doc__.split("\n\n")[0] if __doc__ else "",
        docs_url=None,  # Swagger UI and ReDoc load their scripts from a CDN: none on this origin
        redoc_url=None,
    )
    registry = CollectorRegistry()
    requests_total = Counter("plm_requests_total", "HTTP requests", ["path", "status"], registry=registry)
    latency = Histogram("plm_request_seconds", "HTTP request latency", ["path"], registry=registry)
    version_gauge = Gauge("plm_corpus_version", "Corpus version being served", registry=registry)
    syncs = Counter("plm_syncs_total", "Syncs applied by this process", ["kind"], registry=registry)
    synced_docs = Counter("plm_synced_documents_total", "Documents changed by syncs", ["change"], registry=registry)
    service.on_reload = lambda v: version_gauge.set(v.counter if v is not None else 0)
    if service.generation is not None and service.generation.version is not None:
        version_gauge.set(service.generation.version.counter)
    limit = int(max_body_mb * 1024 * 1024)
    too_large = f"the request body is larger than {max_body_mb:g} MB"

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    class BodyTooLarge(HTTPException):
        """The body read so far is over the limit (an HTTPException, so FastAPI's body
        parsing lets it through rather than calling it a parse error)."""

    class BodyLimit:
        """ASGI middleware: the body is counted while it is received, by whoever reads it,
        and BodyTooLarge raised once it passes the limit, so a chunked body (no length to
        check first) is never held whole."""

        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await self.app(scope, receive, send)
            read = 0

            async def counted() -> Any:
                nonlocal read
                message = await receive()
                if message["type"] == "http.request":
                    read += len(message.get("body", b""))
                    if read > limit:
                        raise BodyTooLarge(413, too_large)
                return message

            return await self.app(scope, counted, send)

    app.add_middleware(BodyLimit)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # Every error has one shape, {"error": ...}: an unmatched route, a wrong method, a body over the limit.
        return error(exc.status_code, str(exc.detail))

    class Guard:
        """ASGI middleware, outside the app's own: the API key, a declared body over the
        limit and a URL whose %-escapes are not UTF-8 are refused before the app runs (in
        that order), and every request is counted, timed and logged. Plain ASGI, not
        `@app.middleware("http")`: that wrapper cost about a millisecond a request."""

        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await self.app(scope, receive, send)
            start = time.perf_counter()
            status = 500  # what the client gets if the app raises before answering

            async def sent(message: Any) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                refused = _refusal(scope)
                await (refused or self.app)(scope, receive, sent)
            finally:
                elapsed = time.perf_counter() - start
                path = getattr(scope.get("route"), "path", "(unmatched)")
                requests_total.labels(path, str(status)).inc()
                latency.labels(path).observe(elapsed)
                client = scope.get("client")
                access.info(
                    json.dumps(
                        {
                            "method": scope["method"],
                            "path": shortened(scope["path"]),
                            "status": status,
                            "ms": round(1000 * elapsed, 2),
                            "client": client[0] if client else None,
                        }
                    )
                )

    def _refusal(scope: Any) -> JSONResponse | None:
        from starlette.datastructures import Headers

        headers = Headers(scope=scope)
        path = scope["path"]
        if api_key and path != "/health" and path not in PAGES:  # pages ask for the key
            given = headers.get("authorization", "")
            expected = f"Bearer {api_key}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                return error(401, "missing or wrong API key: send `Authorization: Bearer <PLM_API_KEY>`")
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return error(413, too_large)  # a chunked body is counted as it is read (BodyLimit)
        # Starlette decodes %-escapes that are not UTF-8 to U+FFFD, so a bad query or id
        # would silently become another one: refuse it instead.
        if _not_utf8(scope.get("raw_path") or b"", scope.get("query_string") or b""):
            return error(400, "the URL holds %-escapes that are not UTF-8; encode it as UTF-8")
        return None

    app.add_middleware(Guard)

    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["*"], allow_headers=["*"])

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        main, _, sub = kind.partition("/")
        if (
            request.method == "POST"
            and kind
            and not (main == "application" and (sub == "json" or sub.endswith("+json")))
        ):
            return error(415, f"send the body as JSON, with Content-Type: application/json (not {kind})")
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}"
            for e in exc.errors()[:5]
        )
        return error(422, f"invalid request: {problems}")

    @app.exception_handler(FromFile)
    async def from_file(request: Request, exc: FromFile) -> JSONResponse:
        return error(409, str(exc))

    @app.exception_handler(NotReady)
    async def not_ready(request: Request, exc: NotReady) -> JSONResponse:
        return error(503, str(exc))

    @app.exception_handler(PlmUserError)
    async def user_error(request: Request, exc: PlmUserError) -> JSONResponse:
        return error(400, str(exc))

    # A stage of this server's recipe that breaks (returns the wrong type, or raises on every
    # document) is the server's fault, not the request's: a 500, in the errors' JSON shape.
    async def stage_bug(request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"a stage of the server's recipe is broken: {exc}")

    for broken in (TypeValidationError, PipelineError):
        app.add_exception_handler(broken, stage_bug)

    def run_query(text: str, k: int, filters: dict[str, Any] | None, weights: dict[str, float] | None = None) -> Any:
        (ranking, timings), version = service.search(Query(text=text, k=k, filters=filters, weights=weights or None))
        # Written as JSON here, not validated into QueryResponse and dumped again by FastAPI:
        # that took 0.3-0.4 ms of a 2 ms query. The schemathesis test checks the shape. A
        # score that is not finite has no JSON: that answer goes through the model, which
        # writes null, as FastAPI did.
        payload = query_payload(text, ranking, timings, filters, str(version or ""))
        try:
            return JSONResponse(payload)
        except ValueError:
            return Response(QueryResponse.model_validate(payload).model_dump_json(), media_type="application/json")

    @app.post("/query", response_model=QueryResponse, responses=ERRORS)
    def post_query(body: QueryRequest) -> Any:
        """Search: the top `k` hits for `text`, within `filters`."""
        return run_query(body.text, body.k, body.filters, body.weights)

    @app.get("/query", response_model=QueryResponse, responses=ERRORS)
    def get_query(
        request: Request,
        q: Annotated[str, QueryParam(min_length=1, max_length=MAX_QUERY_CHARS, description="What to search for.")],
        k: Annotated[int, QueryParam(ge=1, le=MAX_K, description="How many hits to return.")] = 5,
        filter_: Annotated[
            list[str] | None,
            QueryParam(alias="filter", description="A condition as `plm query --filter` takes (`version>=3`); repeat."),
        ] = None,
        weight: Annotated[
            list[str] | None,
            QueryParam(description="A fusion weight as `plm query --weight` takes it (`bm25=0.5`); repeat."),
        ] = None,
    ) -> Any:
        """Search without a body: `/query?q=...&k=5&filter=version>=3&weight=bm25=0.5`."""
        from plm_index.cli_values import parse_filter_args, parse_weight_args

        # An unknown name is refused, not ignored: `filters=team=a` answered unfiltered.
        unknown = sorted(set(request.query_params) - GET_QUERY_PARAMS)
        if unknown:
            raise PlmUserError(
                f"unknown query parameter {unknown[0]!r}{did_you_mean(unknown[0])}; GET /query takes {GET_HELP}"
            )
        # The CLI's own parsers: one syntax everywhere, and a bad condition is a 400 saying why.
        filters = parse_filter_args(filter_) if filter_ else None
        return run_query(q, k, filters, parse_weight_args(weight) if weight else None)

    @app.get("/documents/{doc_id:path}", response_model=DocumentResponse, responses=ERRORS)
    def get_document(
        doc_id: str,
        chunk: Annotated[
            str | None, QueryParam(max_length=1000, description="A chunk id: `anchor` is the heading it sits under.")
        ] = None,
    ) -> Any:
        """One stored document, whole, its Markdown rendered to HTML (404 if unknown)."""
        found, chunk_record = service.document(doc_id, chunk)
        if found is None:
            return error(404, f"no document with id {shortened(repr(doc_id))}")
        shown = render_document(found, chunk_record, service.doc_paths)  # links to stored documents: their pages
        if service.original(found) is not None:
            shown["file"] = f"/files/{quote(doc_id, safe='/')}" + (f"#page={shown['page']}" if shown["page"] else "")
        return shown

    @app.head("/files/{doc_id:path}", include_in_schema=False)  # as GET, without the body (curl -I)
    @app.get("/files/{doc_id:path}", responses=ERRORS)
    def get_file(doc_id: str) -> Any:
        """The original file of a document read from a folder (a PDF, a Word file), as it is on
        disk now: only a file inside a folder given to this index (404 for any other)."""
        from fastapi.responses import FileResponse

        found, _ = service.document(doc_id)
        path = service.original(found) if found is not None else None
        if path is None:
            why = "only files inside an indexed folder are served"
            return error(404, f"no file to open for document {shortened(repr(doc_id))}: {why}")
        kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
        # A page of the folder never runs in this origin: anything but a PDF is sandboxed. A PDF
        # needs the browser's viewer, which `default-src 'none'` would refuse; it still frames nowhere.
        policy = PDF_CSP if kind == "application/pdf" else f"sandbox; {API_CSP}"
        return FileResponse(
            path, media_type=kind, headers={"Content-Security-Policy": policy, "Content-Disposition": "inline"}
        )

    def page(name: str) -> Any:
        from fastapi.responses import HTMLResponse

        html = (Path(__file__).parent / name).read_text(encoding="utf-8")
        return HTMLResponse(html, headers={"Content-Security-Policy": page_csp(html)})

    @app.get("/", include_in_schema=False)
    def search_page() -> Any:
        """The search page: a query box, filters, k, weights, hits with ranks and timings."""
        return page(PAGES["/"])

    @app.get("/doc", include_in_schema=False)
    def document_page() -> Any:
        """One document, rendered, opened at a hit's heading (`/doc?id=...&chunk=...`)."""
        return page(PAGES["/doc"])

    @app.get("/health")
    def health() -> dict[str, str]:
        """Liveness: the process is up (no key needed)."""
        return {"status": "ok"}

    @app.get("/ready", responses=ERRORS)
    def ready() -> Any:
        """Readiness: an index is loaded and not empty (503 until then)."""
        problem = service.check()  # a loaded index, and a store that still answers
        generation = service.generation
        if problem is not None or generation is None:
            return error(503, problem or "no documents indexed yet")
        return {"ready": True, "corpus_version": str(generation.version)}

    @app.get("/status", responses=ERRORS)
    def status() -> dict[str, Any]:
        """Documents, chunks, corpus version, model, config, sizes, last sync, watcher."""
        return service.status()

    def sync_response(report: Any, kind: str) -> dict[str, Any]:
        syncs.labels(kind).inc()
        for change in ("added", "updated", "deleted"):
            synced_docs.labels(change).inc(len(getattr(report, change)))
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

    @app.post("/documents", response_model=SyncResponse, responses={**ERRORS, 422: {"model": RecordsErrorResponse}})
    def post_documents(body: DocumentsRequest) -> Any:
        """Add or update documents (records with at least `id` and `text`); unchanged ones are
        skipped. A request holding an invalid record is a 422 naming each one, and stores nothing."""
        from plm_core.registry import default_registry

        # as the json_records loader reads a file; reached by its registered name, as a config would
        loader: Any = default_registry().get("json_records", "loaders").cls
        docs, failed = loader.from_records(body.records)
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
        return sync_response(service.apply(lambda job: job.sync(refuse_file_documents(job, docs))), "documents")

    # `:path`: an id may hold a `/` (`docs/a.md`), which POST /documents accepts.
    @app.delete("/documents/{doc_id:path}", response_model=SyncResponse, responses=ERRORS)
    def delete_document(doc_id: str) -> Any:
        """Remove a document with its chunks and vectors (404 if unknown)."""
        report = service.apply(lambda job: job.sync(deleted=[doc_id]))
        if not report.deleted:
            return error(404, f"no document with id {shortened(repr(doc_id))}")
        return sync_response(report, "delete")

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> Any:
        """Prometheus metrics."""
        return PlainTextResponse(generate_latest(registry).decode(), media_type="text/plain; version=0.0.4")

    return HostGuard(app, allowlist or HostAllowlist("127.0.0.1"), cors_origins)


def _not_utf8(*raw: bytes) -> bool:
    from urllib.parse import unquote_to_bytes

    try:
        for part in raw:
            unquote_to_bytes(part.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _version() -> str:
    from plm_core import __version__

    return str(__version__)


def listen_socket(host: str, port: int) -> Any:
    """A listening TCP socket on host:port (0: any free port), or one clear error."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto
    # says TCP; with 0 every answer after the first on a kept-alive connection waited ~40 ms
    # for the client's delayed ACK (bench/bench_fresh.py: 44 ms -> 2 ms per query).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own bind
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise PlmUserError(f"{host}:{port} is in use (another `plm serve`?): pass a free --port") from None
        raise PlmUserError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    return sock


def serve_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="Job config (TOML).")],
    index: Annotated[Path | None, typer.Option("--index", help="Index folder (default: PLM_DATA_DIR/<job>).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config value.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=0, max=65535)] = 8000,
    watch: Annotated[
        list[Path] | None, typer.Option("--watch", help="Keep the index in sync with this folder (repeat).")
    ] = None,
    readers: Annotated[int, typer.Option(help="Queries answered at once (each holds its own indexes).", min=1)] = 1,
    cors_origin: Annotated[list[str] | None, typer.Option("--cors-origin", help="Allow browser calls from.")] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            envvar="PLM_ALLOW_HOSTS",
            help="Also answer requests whose Host is this name (repeat; '*': any). Always allowed: localhost, "
            "127.0.0.1, [::1] and the --host address; with --host 0.0.0.0, any IP address and this machine's name.",
        ),
    ] = None,
    max_body_mb: Annotated[float, typer.Option(help="Largest request body accepted.", min=0.001)] = 10.0,
    create: Annotated[
        bool, typer.Option(help="Start with an empty index when there is none; documents arrive by POST /documents.")
    ] = False,
) -> None:
    """Serve queries over HTTP, warm (model and indexes loaded once); PLM_API_KEY requires a key."""
    import uvicorn

    from plm_core.errors import StoreError
    from plm_index.cli_kit import open_job

    allowlist = HostAllowlist(host, allow_host or ())  # a bad name is refused before any work
    writer = open_job(config, set_, None, index)
    if not (create or watch):  # as `plm query` refuses: serving an index nobody built helps no one
        try:
            writer.open(create=False)
        except StoreError as err:
            raise PlmUserError(f"{err}; or serve --watch DIR to index a folder, or --create to start empty") from None
    sock = listen_socket(host, port)  # a busy port fails now, not after the model has loaded
    port = sock.getsockname()[1]
    service = Service(writer, readers=readers)
    service.start()
    stop = threading.Event()
    watcher_thread = None
    if watch:
        from plm_serve.watcher import job_watcher

        # Catch-up, then batches, each applied through the service's single writer.
        service.watcher = job_watcher(writer, watch, locked=service.apply, log=lambda line: log.info("watch: %s", line))
        watcher_thread = threading.Thread(target=service.watcher.run, args=(stop,), name="plm-watcher", daemon=True)
        watcher_thread.start()
    api_key = bearer_key("PLM_API_KEY")  # the client strips it too: a key file's newline is no key
    app = create_app(
        service, api_key=api_key, cors_origins=tuple(cors_origin or ()), max_body_mb=max_body_mb, allowlist=allowlist
    )
    logging.getLogger("plm.serve").setLevel(logging.INFO)
    access.setLevel(logging.INFO)
    # The socket already listens: a client connecting from now on is answered, not refused.
    generation = service.generation
    state = "ready on" if generation is not None and not generation.empty else "serving an empty index on"
    print(f"plm serve: {writer.config.job.name} {state} http://{host}:{port} (index {writer.index_dir})", flush=True)
    # uvicorn handles SIGTERM/SIGINT (stop accepting, let in-flight requests finish), then
    # re-raises the signal with the handlers it found: these make that a normal exit, after
    # the watcher's batch and the service are closed below.
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        settings = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=30
        )
        uvicorn.Server(settings).run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stop.set()
        if watcher_thread is not None:
            watcher_thread.join(timeout=60)  # the batch in progress commits first
        service.stop()
