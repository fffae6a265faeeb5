"""The hit as JSON (`Hit.as_dict()`), shared by the HTTP service's and the MCP server's schemas."""

from typing import Any

from pydantic import BaseModel


class HitSource(BaseModel):
    rank: int
    score: float


class HitModel(BaseModel):
    rank: int
    chunk_id: str
    doc_id: str
    title: str
    score: float
    heading_path: list[str]
    sources: dict[str, HitSource]
    metadata: dict[str, Any]
    text: str
