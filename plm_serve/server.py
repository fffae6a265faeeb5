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

This module is the app factory and the command; each concern has its own room:
plm_serve/routes/ (query, documents, pages, operations: one `APIRouter` each),
plm_serve/request_guard.py (the key, the body limit, the access log), plm_serve/http_guard.py
(Host and security headers), plm_serve/http_errors.py (the one error shape) and
plm_serve/metrics.py.
"""

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from plm_core.errors import PlmUserError
from plm_index.remote import bearer_key
from plm_serve.http_guard import HostAllowlist, HostGuard
from plm_serve.service import Service

log = logging.getLogger("plm.serve")
access = logging.getLogger("plm.serve.access")
WATCH_START_S = 30.0  # the most a start waits for the watch to be in place (a slow disk, a huge tree)


def create_app(
    service: Service,
    api_key: str | None = None,
    cors_origins: tuple[str, ...] = (),
    max_body_mb: float = 10.0,
    allowlist: HostAllowlist | None = None,
) -> Any:
    """The ASGI app over a started `Service`: FastAPI inside the Host check and security
    headers (`allowlist`; None: a server bound to 127.0.0.1)."""
    from fastapi import FastAPI

    from plm_serve.http_errors import install_error_handlers
    from plm_serve.metrics import ServerMetrics
    from plm_serve.request_guard import BodyLimit, Guard
    from plm_serve.routes.documents import add_document_routes
    from plm_serve.routes.operations import add_operation_routes
    from plm_serve.routes.pages import PAGES, add_page_routes
    from plm_serve.routes.query import add_query_routes

    app = FastAPI(
        title="plm",
        version=_version(),
        description=__doc__.split("\n\n")[0] if __doc__ else "",
        docs_url=None,  # Swagger UI and ReDoc load their scripts from a CDN: none on this origin
        redoc_url=None,
    )
    metrics = ServerMetrics()
    metrics.follow(service)
    install_error_handlers(app)
    # A request meets CORS (when asked for), then Guard, then BodyLimit: each added wraps the last.
    app.add_middleware(BodyLimit, max_body_mb=max_body_mb)
    open_paths = {"/health", *PAGES}  # the pages hold no data, and ask for the key
    app.add_middleware(Guard, metrics=metrics, api_key=api_key, max_body_mb=max_body_mb, open_paths=open_paths)
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["*"], allow_headers=["*"])
    # Straight onto the app's own router, in the schema's order (include_router would nest
    # each group behind one more match a request).
    add_query_routes(app.router, service)
    add_document_routes(app.router, service)
    add_page_routes(app.router)
    add_operation_routes(app.router, service, metrics)
    return HostGuard(app, allowlist or HostAllowlist("127.0.0.1"), cors_origins)


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
    # Before the watcher starts: its catch-up of a small folder is done within milliseconds.
    logging.getLogger("plm.serve").setLevel(logging.INFO)
    access.setLevel(logging.INFO)
    if watch:
        from plm_serve.watcher import job_watcher

        # Catch-up, then batches, each applied through the service's single writer.
        service.watcher = job_watcher(
            writer, watch, locked=service.apply, read=service.with_writer, log=lambda line: log.info("watch: %s", line)
        )
        watcher_thread = threading.Thread(target=service.watcher.run, args=(stop,), name="plm-watcher", daemon=True)
        watcher_thread.start()
        # Ready once the watch is in place (about half a second): a file saved after that is
        # a batch of its own, where one saved before is found by the catch-up's listing.
        service.watcher.watching.wait(WATCH_START_S)
    api_key = bearer_key("PLM_API_KEY")  # the client strips it too: a key file's newline is no key
    app = create_app(
        service, api_key=api_key, cors_origins=tuple(cors_origin or ()), max_body_mb=max_body_mb, allowlist=allowlist
    )
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
