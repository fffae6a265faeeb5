"""`plm mcp --config FILE`: an index's search as Model Context Protocol tools over stdio.

Two read-only tools, for an assistant that should cite your documents:

- `search(query, k=5, filters=None)`: the top k hits, as structured content (one object
  per hit, exactly `Hit.as_dict()`: what `plm query --json` prints) and as a text block a
  model reads directly (rank, score, id, title, heading path, metadata, text).
- `status()`: documents, chunks, model and corpus version of the index (`store.stats()`).

A user error (an empty query, k outside 1..10,000, a bad filter, an index emptied by
`plm delete`) is a tool error carrying plm's one-paragraph message, never a crash of the
server; a bug is the SDK's generic tool error, with its traceback on stderr. A line the
SDK cannot read (malformed JSON, a lone surrogate escape, JSON nested too deeply, not a
JSON-RPC message), which the SDK itself drops without a reply, is answered here with a
JSON-RPC error (`AnswerUnreadable`), and serving goes on.

Like `plm query`, the command never creates an index: a missing one stops it before the
protocol starts, with the message saying how to build it. The model is loaded before the
first request, so the first search is as fast as the others. stdout is the protocol:
anything a library prints while loading goes to stderr. Register it with an MCP client as
`{"command": "plm", "args": ["mcp", "--config", "/abs/path/job.toml"]}`.
"""

# No `from __future__ import annotations`: the SDK reads the tools' signatures at runtime,
# and their return types name classes imported inside `build_server` (mcp loads lazily).
import contextlib
import json
import sys
import threading
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from plm_core.errors import PlmUserError
from plm_core.records import Hit
from plm_index.cache import warm_to_embed
from plm_index.cli_kit import ConfigOpt, IndexOpt, SetOpt, open_job
from plm_index.job import Job
from plm_index.search import no_match
from plm_serve.schemas import HitModel

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult

SERVER_NAME = "plm"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
_METADATA_LINE_CHARS = 400

SEARCH_DESCRIPTION = """Search the indexed documents with this index's retrieval recipe (BM25, dense, hybrid).

Returns the k best passages (chunks), best first, each with its document id, title, heading
path, score, metadata and full text. `filters` keeps only chunks whose metadata matches, keys
combined with AND: {"team": "storage"} (equality; on a list value, contains),
{"tags": {"in": ["db", "backup"]}}, {"year": {"gte": 2020, "lt": 2024}},
{"updated": {"gte": "2024-01-01"}} (numbers and ISO dates), {"team": {"ne": "search"}}."""


class SearchHit(HitModel):
    """One hit, as `Hit.as_dict()` gives it."""

    model_config = ConfigDict(extra="allow")


class SearchResult(BaseModel):
    query: str
    expanded: str
    filters: dict[str, Any] | None
    hits: list[SearchHit]


class IndexStatus(BaseModel):
    """`store.stats()` plus where the index is and which job it belongs to."""

    model_config = ConfigDict(extra="allow")
    job: str
    index_dir: str
    documents: int
    chunks: int
    model: str | None
    corpus_version: int


def _plain(value: Any) -> Any:
    """A numpy scalar (a float32 score) as its Python value, anything else as text."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def hit_data(hit: Hit) -> dict[str, Any]:
    """`hit.as_dict()` as JSON data (numpy scores become floats)."""
    data: dict[str, Any] = json.loads(json.dumps(hit.as_dict(), default=_plain))
    return data


def hits_text(hits: list[dict[str, Any]], filters: dict[str, Any] | None) -> str:
    """The hits as a block of text for a model to read: the CLI's list, with metadata and
    the whole chunk text."""
    if not hits:
        return no_match(filters)
    blocks = []
    for h in hits:
        lines = [
            f"{h['rank']}. {h['doc_id']}" + (f" ({h['title']})" if h["title"] else "") + f"  score {h['score']:.4f}"
        ]
        if h["heading_path"]:
            lines.append("section: " + " > ".join(h["heading_path"]))
        shown = {k: v for k, v in h["metadata"].items() if k not in ("title", "path")}
        if shown:
            meta = "; ".join(f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in shown.items())
            lines.append(
                "metadata: " + (meta[:_METADATA_LINE_CHARS] + "..." if len(meta) > _METADATA_LINE_CHARS else meta)
            )
        lines.append(" ".join(h["text"].split()))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def warm(job: Job) -> Job:
    """Open the index (never creating one), load the model and the indexes, and run one query
    through every stage, so the first request pays nothing extra. Stray prints go to stderr:
    stdout is the protocol."""
    with contextlib.redirect_stdout(sys.stderr):
        job.open(create=False)
        warm_to_embed(job.embedder)
        job.searcher.pipeline.warm_up()
        # An index emptied by `plm delete` is no reason not to start: `search` will say so.
        with contextlib.suppress(PlmUserError):
            job.search("warm up", k=1)
    return job


def build_server(job: Job, log_level: LogLevel = "WARNING") -> "MCPServer[Any]":
    """An MCP server whose `search` and `status` tools read `job`'s index."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult, TextContent, ToolAnnotations

    # Tools run on worker threads; one query at a time keeps the searcher's warm indexes
    # and SQLite snapshot consistent (a query takes milliseconds).
    lock = threading.Lock()
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        title=f"plm: {job.config.job.name}",
        instructions=f"Search the documents indexed by the plm job {job.config.job.name!r} "
        f"({job.config.job.description or job.config.path}). Use `search` to find passages, `status` "
        "to see what is indexed.",
        log_level=log_level,
    )
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    def failed(err: PlmUserError) -> "CallToolResult":
        return CallToolResult(content=[TextContent(type="text", text=str(err))], is_error=True)

    @server.tool(description=SEARCH_DESCRIPTION, annotations=read_only)
    def search(
        query: Annotated[str, Field(description="what to search for, in words")],
        k: Annotated[int, Field(description="how many hits to return, 1 to 10,000")] = 5,
        filters: Annotated[dict[str, Any] | None, Field(description="metadata conditions, see above")] = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        try:
            with lock:
                ranking, _ = job.search(query, k=k, filters=filters or None)
        except PlmUserError as err:
            return failed(err)
        hits = [hit_data(h) for h in ranking.hits]
        data = {"query": query, "expanded": ranking.query.text, "filters": filters or None, "hits": hits}
        return CallToolResult(
            content=[TextContent(type="text", text=hits_text(hits, filters))], structured_content=data
        )

    @server.tool(description="What the index holds: documents, chunks, model, corpus version.", annotations=read_only)
    def status() -> Annotated[CallToolResult, IndexStatus]:
        try:
            with lock, job.store.snapshot():
                stats = job.store.stats()
        except PlmUserError as err:
            return failed(err)
        data = {
            "job": job.config.job.name,
            "index_dir": str(job.index_dir),
            **json.loads(json.dumps(stats, default=str)),
        }
        text = (
            f"{data['documents']} documents, {data['chunks']} chunks in {data['index_dir']} "
            f"(job {data['job']}, model {data['model'] or 'none'}, corpus version {data['corpus_version']})"
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    return server


PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0's codes


def unreadable_reply(exc: Exception) -> dict[str, Any]:
    """The JSON-RPC error answering a line the SDK could not read (`exc`, its validation
    error): a parse error (malformed, a lone surrogate escape, nested too deeply) or an
    invalid request, with the request's id when one can still be read, else null."""
    listed = getattr(exc, "errors", None)  # a pydantic ValidationError's
    errors = listed() if callable(listed) else []
    first = errors[0] if errors else {}
    data = first.get("input")
    if first.get("type") == "json_invalid":
        code, message = PARSE_ERROR, f"Parse error: {first.get('msg', 'invalid JSON')}"
        if "hex escape" in message or "surrogate" in message:
            message += " (a \\ud800-\\udfff escape must be half of a surrogate pair: a lone surrogate is not text)"
        try:
            data = json.loads(data) if isinstance(data, str) else None  # only to find the id
        except (ValueError, RecursionError):
            data = None
    else:
        code, message = INVALID_REQUEST, f"Invalid Request: not a JSON-RPC 2.0 message ({len(errors)} problem(s))"
    request_id = data.get("id") if isinstance(data, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    elif isinstance(request_id, str) and not request_id.isprintable():
        request_id = None  # e.g. a lone surrogate, which could not be written back
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class AnswerUnreadable:
    """The stdio transport's read stream, minus the lines it could not read: the SDK's
    dispatcher drops those without a reply (a client would wait for ever), so each is
    answered here with `unreadable_reply` and never reaches the SDK."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self.inner, self.write_stream = inner, write_stream

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        while True:
            item = await self.inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = jsonrpc_message_adapter.validate_python(unreadable_reply(item))
            await self.write_stream.send(SessionMessage(reply))

    def __aiter__(self) -> "AnswerUnreadable":
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> "AnswerUnreadable":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.aclose()

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def serve_stdio(server: "MCPServer[Any]") -> None:
    """`server.run("stdio")` (the SDK's run_stdio_async), with unreadable lines answered."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # what run_stdio_async runs; the SDK has no public name for it
    async with stdio_server() as (read_stream, write_stream):
        options = lowlevel.create_initialization_options()
        await lowlevel.run(AnswerUnreadable(read_stream, write_stream), write_stream, options)


def mcp_command(config: ConfigOpt, set_: SetOpt = None, index: IndexOpt = None) -> None:
    """Serve an index's search as Model Context Protocol tools (`search`, `status`) over
    stdio, for an MCP client such as an AI assistant; the index must exist (`plm ingest`)."""
    import anyio

    job = warm(open_job(config, set_, None, index))
    try:
        anyio.run(serve_stdio, build_server(job, job.settings.log_level))
    finally:
        job.close()
