"""`GET /documents/{id}`: one stored document, whole, its Markdown rendered to HTML by
plm_serve/documents.py (`?chunk=ID` adds the id of the heading that chunk sits under); and
`GET /files/{id}` (and `HEAD`): its original file as it is on disk now, served only from
inside a folder given to the index. The writes to `/documents` are in operations.py."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
import mimetypes
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter
from fastapi import Query as QueryParam
from pydantic import BaseModel, Field

from plm_serve.documents import render_document
from plm_serve.http_errors import ERRORS, error, shortened
from plm_serve.http_guard import API_CSP
from plm_serve.service import Service

PDF_CSP = "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"  # GET /files/{id} of a PDF


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


def add_document_routes(router: APIRouter, service: Service) -> None:
    """`GET /documents/{id}` and `GET`/`HEAD /files/{id}` over `service`, on `router`."""

    @router.get("/documents/{doc_id:path}", response_model=DocumentResponse, responses=ERRORS)
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

    @router.head("/files/{doc_id:path}", include_in_schema=False)  # as GET, without the body (curl -I)
    @router.get("/files/{doc_id:path}", responses=ERRORS)
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
