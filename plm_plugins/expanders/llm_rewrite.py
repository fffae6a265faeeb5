"""Query rewriting by an LLM behind any OpenAI-compatible chat endpoint (OpenAI, vLLM,
llama.cpp's server, Ollama's /v1, LiteLLM, ...), standard library HTTP only.

With `n = 0` the reply replaces the query text. With `n > 0` the reply is read as up to n
alternative queries, one a line, which the hybrid stage retrieves for and fuses beside
the original (LlamaIndex's QueryFusionRetriever). A rewriter must never make search fail:
a timeout, an unreachable server, an HTTP error or a reply that is not what was asked for
logs one warning and the original query is searched. Answers are kept in an in-memory LRU
keyed by (model, messages); failures are not kept, so the next query asks again.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from string import Formatter
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from plm import (
    NO_REDIRECTS,
    ComponentConfig,
    ConfigError,
    ExpandedQuery,
    PlmUserError,
    Query,
    QueryExpander,
    RedirectRefused,
    bearer_key,
    hookimpl,
)

if TYPE_CHECKING:
    from plm import Registry

log = logging.getLogger(__name__)

DEFAULT_PROMPT = (
    "Rewrite the search query below so that a search engine finds the passages that answer it: "
    "fix spelling, spell out abbreviations and add the key technical terms. "
    "Answer with the rewritten query only, on one line.\n\nQuery: {query}"
)
DEFAULT_PROMPT_ALTERNATIVES = (
    "Write {n} different search queries that would find the passages answering the query below, "
    "each phrased differently (synonyms, spelled-out abbreviations, related technical terms). "
    "Answer with the {n} queries only, one per line, without numbering.\n\nQuery: {query}"
)
MAX_BODY_BYTES = 1 << 20  # an answer is a few hundred bytes; never read a runaway body whole
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Reasoning models served through Ollama or vLLM put their thoughts in the content.
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# "1. ", "2) ", "(3) ", "- ", "* ", "• ", "Query: ", "Rewritten query: " before a query.
_LINE_PREFIX = re.compile(
    r"^\s*(?:\(?\d{1,2}[.)]\s+|[-*\u2022+]\s+)?(?:(?:rewritten |search |alternative )?query\s*\d*\s*:\s*)?",
    re.IGNORECASE,
)
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d"}
# Whatever follows "Bearer" in a message is a key (e.g. a header value quoted by an error).
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)


class RewriteFailed(Exception):
    """Why the LLM's answer cannot be used (one line, never holding the API key)."""


def parse_reply(content: str) -> list[str]:
    """The queries in a reply: one a line, numbering, bullets, "Query:" labels and
    surrounding quotes removed, empty lines and a <think> block dropped."""
    queries = []
    for line in _THINKING.sub("", content).splitlines():
        text = _LINE_PREFIX.sub("", line, count=1).strip()
        if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
            text = text[1:-1].strip()
        if text:
            queries.append(text)
    return queries


def _same(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())


class LLMRewriteExpander(QueryExpander):
    """Rewrites the query, or adds alternative queries, with an LLM; the original on any failure."""

    name = "llm_rewrite"

    class Config(ComponentConfig):
        base_url: str
        """The API's base URL, e.g. "http://127.0.0.1:11434/v1" (Ollama) or
        "https://api.openai.com/v1"; requests go to {base_url}/chat/completions."""
        model: str = Field(min_length=1)
        """The model name the endpoint serves, e.g. "gpt-4o-mini" or "llama3.2"."""
        api_key_env: str = "OPENAI_API_KEY"
        """The environment variable holding the API key (sent as `Authorization: Bearer`);
        unset or "": no Authorization header, which local servers accept."""
        prompt: str | None = None
        """The user message: a template with {query} (required) and {n}; literal braces are
        written {{ and }}. Default: a rewrite prompt (n = 0) or an alternatives prompt (n > 0)."""
        system: str = ""
        """An optional system message sent before the prompt."""
        n: int = Field(0, ge=0, le=20)
        """0: the reply replaces the query text. n > 0: the reply is read as up to n alternative
        queries, one a line; the hybrid stage retrieves for each and fuses the lists by RRF."""
        keep_original: bool = True
        """With n > 0, also retrieve for the user's own query (false: the first alternative
        takes its place)."""
        temperature: float = Field(0.0, ge=0.0, le=2.0)
        """Sampling temperature; 0 keeps rewrites (and evaluations) repeatable."""
        timeout_ms: int = Field(2000, ge=1, le=600_000)
        """The time budget of one call; when it runs out the original query is searched."""
        max_chars: int = Field(2000, ge=1, le=100_000)
        """A longer reply is not used (the model is explaining, not rewriting)."""
        cache_size: int = Field(1024, ge=0, le=1_000_000)
        """Answers kept in memory (LRU), keyed by model and messages; 0 = none."""
        profile: str = ""
        """The fusion profile a rewritten query asks for ("" = the fuser's default)."""

        @field_validator("base_url")
        @classmethod
        def _http_url(cls, value: str) -> str:
            value = value.strip().rstrip("/")
            if not value.startswith(("http://", "https://")):
                raise ValueError('expected an http:// or https:// URL, e.g. "http://127.0.0.1:11434/v1"')
            return value

        @field_validator("prompt")
        @classmethod
        def _renderable(cls, value: str | None) -> str | None:
            if value is None:
                return value
            try:
                fields = {name for _, name, _, _ in Formatter().parse(value) if name is not None}
                value.format(query="q", n=1)
            except (ValueError, KeyError, IndexError, AttributeError) as err:
                raise ValueError(
                    f"cannot be rendered ({type(err).__name__}: {err}); it may use {{query}} and {{n}}, "
                    "and a literal brace is written {{ or }}"
                ) from None
            if "query" not in fields:
                raise ValueError("must contain {query}, where the user's query goes")
            return value

    config: Config

    def __init__(self, config: ComponentConfig | None = None, /, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        # An empty LRU and its lock, not heavy work; kept here rather than in warm_up() so that
        # reset() (the index changed) does not drop answers, which do not depend on the corpus.
        self._cache: OrderedDict[tuple[str, str, str], tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self) -> None:
        # Not a pydantic validator: its error would echo the value, which may be the key itself.
        if self.config.api_key_env and not _ENV_NAME.fullmatch(self.config.api_key_env):
            raise ConfigError(
                f"expander {self.label!r}: `api_key_env` must name an environment variable (letters, digits, _), "
                'not hold the key; e.g. api_key_env = "OPENAI_API_KEY" and export the key in it'
            )

    @property
    def endpoint(self) -> str:
        base = self.config.base_url
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    def messages(self, text: str) -> list[dict[str, str]]:
        """The chat messages for a query text."""
        c = self.config
        template = c.prompt or (DEFAULT_PROMPT_ALTERNATIVES if c.n else DEFAULT_PROMPT)
        messages = [{"role": "system", "content": c.system}] if c.system else []
        return [*messages, {"role": "user", "content": template.format(query=text, n=c.n)}]

    def run(self, data: Query) -> ExpandedQuery:
        messages = self.messages(data.text)
        key = (self.config.model, self.config.system, messages[-1]["content"])
        queries = self._cached(key)
        if queries is None:
            try:
                queries = self._usable(data.text, self._ask(messages))
            except RewriteFailed as err:
                why = _BEARER.sub(r"\1***", str(err))  # the last guard: no message carries a key
                log.warning("expander %r (llm_rewrite): %s; searching with the original query", self.label, why)
                return ExpandedQuery.of(data)
            self._remember(key, queries)
        return self._expanded(data, queries)

    def _expanded(self, data: Query, queries: tuple[str, ...]) -> ExpandedQuery:
        query = ExpandedQuery.of(data)
        if self.config.n and self.config.keep_original:
            text, alternatives = query.text, queries
        else:
            text, alternatives = queries[0], queries[1:]
        # Every other field (k, filters, depth, ...) is carried over as it is.
        fields = {f.name: getattr(query, f.name) for f in dataclasses.fields(ExpandedQuery)}
        return ExpandedQuery(
            **{
                **fields,
                "text": text,
                "original": query.original or data.text,
                "fired": (*query.fired, self.name),
                "profile": self.config.profile or query.profile,
                "alternatives": (*query.alternatives, *alternatives),
            }
        )

    def _usable(self, text: str, content: str) -> tuple[str, ...]:
        """The queries to search for from a reply, or RewriteFailed."""
        c = self.config
        reply = _THINKING.sub("", content).strip()
        if len(reply) > c.max_chars:
            raise RewriteFailed(f"the reply has {len(reply):,} characters, more than max_chars = {c.max_chars:,}")
        queries = parse_reply(reply)
        if not queries:
            raise RewriteFailed("the reply is empty")
        if not c.n:
            return (queries[0],)
        kept: list[str] = []
        for q in queries:
            if not any(_same(q, seen) for seen in kept) and not (c.keep_original and _same(q, text)):
                kept.append(q)
        if not kept:
            raise RewriteFailed("the reply holds no query other than the original")
        return tuple(kept[: c.n])

    def _ask(self, messages: list[dict[str, str]]) -> str:
        """The reply's content within the time budget: the call runs in a daemon thread, so a
        server that trickles bytes cannot hold the query past `timeout_ms`."""
        budget = self.config.timeout_ms / 1000
        box: list[str | BaseException] = []

        def call() -> None:
            try:
                box.append(self._post(messages, budget))
            except BaseException as err:  # handed to the caller, which turns it into a warning
                box.append(err)

        start = time.perf_counter()
        worker = threading.Thread(target=call, name=f"llm_rewrite:{self.label}", daemon=True)
        worker.start()
        worker.join(budget)
        if not box:
            raise RewriteFailed(f"{self.endpoint} did not answer within timeout_ms = {self.config.timeout_ms}")
        result = box[0]
        if isinstance(result, RewriteFailed):
            raise result
        if isinstance(result, BaseException):  # a bug or an odd OS error: still never fail the query
            raise RewriteFailed(f"the call to {self.endpoint} failed: {type(result).__name__}: {result}")
        log.debug("llm_rewrite %r answered in %.0f ms", self.label, 1000 * (time.perf_counter() - start))
        return result

    def _post(self, messages: list[dict[str, str]], timeout: float) -> str:
        c = self.config
        body = json.dumps({"model": c.model, "messages": messages, "temperature": c.temperature}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            try:
                with NO_REDIRECTS.open(request, timeout=timeout) as response:
                    raw = response.read(MAX_BODY_BYTES + 1)
            except RedirectRefused as err:  # the key goes to base_url's origin only
                raise RewriteFailed(
                    f"{err}; redirects are not followed: set base_url to the address that answers"
                ) from None
            except urllib.error.HTTPError as err:
                raise RewriteFailed(f"{self.endpoint} answered {err.code} {err.reason}{_error_message(err)}") from None
            except http.client.HTTPException as err:  # a dropped connection, a bad status line
                raise RewriteFailed(f"{self.endpoint} sent a broken HTTP answer ({type(err).__name__})") from None
            except (urllib.error.URLError, OSError) as err:
                reason = getattr(err, "reason", err)
                if isinstance(err, TimeoutError) or isinstance(reason, TimeoutError):
                    raise RewriteFailed(f"{self.endpoint} did not answer within timeout_ms = {c.timeout_ms}") from None
                raise RewriteFailed(f"cannot reach {self.endpoint}: {reason}") from None
            if len(raw) > MAX_BODY_BYTES:
                raise RewriteFailed(f"{self.endpoint} answered more than {MAX_BODY_BYTES:,} bytes")
            return _content(raw, self.endpoint)
        except RewriteFailed as err:
            # Some servers quote the key they refused; it must not reach a log.
            raise RewriteFailed(str(err).replace(key, "***") if key else str(err)) from None

    def _api_key(self) -> str | None:
        """The key from the environment, surrounding whitespace (a file's trailing newline)
        removed; RewriteFailed naming the variable, never the value, if it cannot be a header."""
        try:
            return bearer_key(self.config.api_key_env) if self.config.api_key_env else None
        except PlmUserError as err:
            raise RewriteFailed(str(err)) from None

    def _cached(self, key: tuple[str, str, str]) -> tuple[str, ...] | None:
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
            return found

    def _remember(self, key: tuple[str, str, str], queries: tuple[str, ...]) -> None:
        if not self.config.cache_size:
            return
        with self._lock:
            self._cache[key] = queries
            self._cache.move_to_end(key)
            while len(self._cache) > self.config.cache_size:
                self._cache.popitem(last=False)


def _content(raw: bytes, where: str) -> str:
    """choices[0].message.content of an OpenAI-style chat completion, or RewriteFailed."""
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except ValueError:
        raise RewriteFailed(f"{where} did not answer with JSON") from None
    except (KeyError, IndexError, TypeError):
        raise RewriteFailed(f"{where} answered JSON without choices[0].message.content") from None
    if not isinstance(content, str):
        raise RewriteFailed(f"{where} answered a non-text message content ({type(content).__name__})")
    return content


def _error_message(err: urllib.error.HTTPError) -> str:
    """The server's message from an error body ({"error": {"message"}} or text) as ": ...", short."""
    try:
        raw = err.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message", "") if isinstance(error, dict) else str(error)
    except ValueError:
        message = raw
    message = " ".join(str(message).split())
    return f": {message[:200]}" if message else ""


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(LLMRewriteExpander)
