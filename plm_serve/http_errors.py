"""Every error `plm serve` answers has one shape, `{"error": "..."}`, and a status that says
whose fault it is: the exception handlers that map what a route raises to that shape.

- 400: a `PlmUserError` (a bad filter or weight, an unknown query parameter).
- 404, 405, 413: Starlette's `HTTPException` (an unmatched route, a wrong method, a chunked
  body counted past the limit).
- 409: a posted record that would replace a document a file holds (`FromFile`).
- 415: a POST body that is not JSON; 422: a request that does not match its schema.
- 503: no index loaded yet (`NotReady`).
- 500: a stage of the server's recipe that breaks: the server's fault, not the request's.

The guard's refusals (a missing key, a declared body over the limit, a URL that is not
UTF-8: plm_serve/request_guard.py) and the routes' own 404s use `error` for the same shape.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from plm_core.errors import PipelineError, PlmUserError, TypeValidationError
from plm_serve.errors import FromFile, NotReady


class ErrorResponse(BaseModel):
    error: str


# The error responses every route documents in its schema.
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 404, 409, 413, 415, 422, 503)
}


def shortened(text: str, limit: int = 200) -> str:
    """`text` for a message or a log line: an id or a path of any length (a client may send
    100 KB) is cut at `limit` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def error(status: int, message: str) -> Any:
    """The one error shape, as a response."""
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status)


def install_error_handlers(app: Any) -> None:
    """Give `app` the handlers that answer each exception in the one error shape."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # Every error has one shape, {"error": ...}: an unmatched route, a wrong method, a body over the limit.
        return error(exc.status_code, str(exc.detail))

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
