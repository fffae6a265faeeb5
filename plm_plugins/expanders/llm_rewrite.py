"""Query rewriting by an LLM behind any OpenAI-compatible chat endpoint (OpenAI, vLLM,
llama.cpp's server, Ollama's /v1, LiteLLM, ...), through the shared client in
`plm.chat` (standard library HTTP only, no redirects, a time budget per call).

With `n = 0` the reply replaces the query text. With `n > 0` the reply is read as up to n
alternative queries, one a line, which the hybrid stage retrieves for and fuses beside
the original (LlamaIndex's QueryFusionRetriever). A rewriter must never make search fail:
a timeout, an unreachable server, an HTTP error or a reply that is not what was asked for
logs one warning and the original query is searched. Answers are kept in an in-memory LRU
keyed by (model, messages); failures are not kept, so the next query asks again.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from plm import ComponentConfig, ExpandedQuery, Query, QueryExpander, hookimpl
from plm.chat import (
    THINKING,
    ChatClient,
    ChatConfig,
    ChatFailed,
    check_key_env,
    parse_reply,
    renderable_prompt,
)
from plm.remote import scrub

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
RewriteFailed = ChatFailed  # why the LLM's answer cannot be used (one line, never holding the API key)


def _same(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())


class LLMRewriteExpander(QueryExpander):
    """Rewrites the query, or adds alternative queries, with an LLM; the original on any failure."""

    name = "llm_rewrite"

    class Config(ChatConfig):
        prompt: str | None = None
        """The user message: a template with {query} (required) and {n}; literal braces are
        written {{ and }}. Default: a rewrite prompt (n = 0) or an alternatives prompt (n > 0)."""
        n: int = Field(0, ge=0, le=20)
        """0: the reply replaces the query text. n > 0: the reply is read as up to n alternative
        queries, one a line; the hybrid stage retrieves for each and fuses the lists by RRF."""
        keep_original: bool = True
        """With n > 0, also retrieve for the user's own query (false: the first alternative
        takes its place)."""
        timeout_ms: int = Field(2000, ge=1, le=600_000)
        """The time budget of one call; when it runs out the original query is searched."""
        max_chars: int = Field(2000, ge=1, le=100_000)
        """A longer reply is not used (the model is explaining, not rewriting)."""
        cache_size: int = Field(1024, ge=0, le=1_000_000)
        """Answers kept in memory (LRU), keyed by model and messages; 0 = none."""
        profile: str = ""
        """The fusion profile a rewritten query asks for ("" = the fuser's default)."""

        @field_validator("prompt")
        @classmethod
        def _renderable(cls, value: str | None) -> str | None:
            return renderable_prompt(value, {"query": "q", "n": 1}, "the user's query goes")

    config: Config

    def __init__(self, config: ComponentConfig | None = None, /, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        # An empty LRU and its lock, not heavy work; kept here rather than in warm_up() so that
        # reset() (the index changed) does not drop answers, which do not depend on the corpus.
        self._cache: OrderedDict[tuple[str, str, str], tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self._chat = ChatClient(self.config, f"llm_rewrite:{self.label}")

    def check(self) -> None:
        check_key_env(self.config, f"expander {self.label!r}")

    @property
    def endpoint(self) -> str:
        return self._chat.endpoint

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
                queries = self._usable(data.text, self._chat.ask(messages))
            except ChatFailed as err:
                why = scrub(str(err))  # the last guard: no message carries a key
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
        reply = THINKING.sub("", content).strip()
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


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(LLMRewriteExpander)
