"""The two HTML pages, plain HTML and a little JavaScript over the API: `GET /` (search, its
state in the URL: `/?q=...&k=...&filter=...`) and `GET /doc?id=...` (one document, opened at
a hit's heading). They hold no data, so they are served without the API key (they ask for
it); each carries a Content-Security-Policy that lets only its own inline script run."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from plm_serve.http_guard import page_csp

PAGES = {"/": "search_page.html", "/doc": "document_page.html"}  # files in plm_serve/, above this folder


def page(name: str) -> Any:
    html = (Path(__file__).parents[1] / name).read_text(encoding="utf-8")
    return HTMLResponse(html, headers={"Content-Security-Policy": page_csp(html)})


def add_page_routes(router: APIRouter) -> None:
    """`GET /` and `GET /doc` on `router`, outside the schema."""

    @router.get("/", include_in_schema=False)
    def search_page() -> Any:
        """The search page: a query box, filters, k, weights, hits with ranks and timings."""
        return page(PAGES["/"])

    @router.get("/doc", include_in_schema=False)
    def document_page() -> Any:
        """One document, rendered, opened at a hit's heading (`/doc?id=...&chunk=...`)."""
        return page(PAGES["/doc"])
