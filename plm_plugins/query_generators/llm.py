"""Questions an LLM writes for passages of the corpus, each a query for the document its
passage came from (doc2query, InPars): what a user who does not know the document's words
might ask. The model is asked through any OpenAI-compatible chat endpoint, with the client
`llm_rewrite` uses (`plm.chat`).

It sends passages of the corpus to that endpoint, so it is never used unless named: not in
the default `--generators`; `plm eval --synthetic N --generators llm --generator-option
llm.base_url=... --generator-option llm.model=...`. Passages are picked by a hash of the
document id and `seed` (the same corpus gives the same passages), at most `max_passage_chars`
of a document's prose each. A question that copies a run of more than `max_copied_words`
words of its passage is dropped (the evaluation also cuts every verbatim copy of a query
from the corpus, as for every generator). An endpoint that cannot be reached, answers an
error or something other than a chat completion stops the generation with one line.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from plm import ComponentConfig, Document, PlmUserError, QueryGenerator, SyntheticQuery, hookimpl
from plm.chat import (
    THINKING,
    ChatClient,
    ChatConfig,
    ChatFailed,
    check_key_env,
    parse_reply,
    renderable_prompt,
    unquote,
)
from plm_plugins.query_generators.text import longest_copy, paragraphs, render, words

if TYPE_CHECKING:
    from plm import Registry

log = logging.getLogger(__name__)

DEFAULT_PROMPT = (
    "Here is a passage from a document collection. Write one question that a user might type into "
    "a search engine and that this passage answers. Use your own words rather than phrases from the "
    "passage. Answer with the question only, on one line.\n\nPassage:\n{passage}"
)
# "Question: ", "Q: ", "Search question: " before the question (parse_reply drops "Query: ").
_LABEL = re.compile(r"^(?:(?:search |user )?question|q)\s*:\s*", re.IGNORECASE)


class LLMQueryGenerator(QueryGenerator):
    """One question per picked passage, written by an LLM and judged relevant to the
    passage's document; replies that copy the passage, are empty, too short or too long are
    dropped (and counted in a log line)."""

    name = "llm"

    class Config(ChatConfig):
        prompt: str | None = None
        """The user message: a template with {passage} (required) and {title}; literal braces
        are written {{ and }}. Default: ask for one search question the passage answers."""
        timeout_ms: int = Field(30_000, ge=1, le=600_000)
        """The time budget of one call (one passage); when it runs out the generation stops."""
        passages: int = Field(100, ge=1, le=100_000)
        """Passages asked about at most, one call each (the documents with the most prose are
        not favoured: a hash of the id and `seed` orders them). `plm eval --synthetic N` draws
        from what comes back, one query per document, so give at least your share of N."""
        seed: int = 0
        """Which passages are picked (and where in a long document each starts)."""
        max_passage_chars: int = Field(1500, ge=100, le=100_000)
        """The most characters of a document sent: whole paragraphs from a hashed start, the
        first one cut at a word if it alone is longer."""
        min_passage_words: int = Field(20, ge=1)
        """A document with fewer words of prose is not asked about."""
        max_copied_words: int = Field(6, ge=1)
        """A question holding a run of more words of its passage (in order, case and punctuation
        aside) copies it, and is dropped."""
        min_words: int = Field(3, ge=1)
        """A shorter question is dropped (too vague to find a passage by)."""
        max_words: int = Field(40, ge=1)
        """A longer reply is dropped (a passage, not a query)."""

        @field_validator("prompt")
        @classmethod
        def _renderable(cls, value: str | None) -> str | None:
            return renderable_prompt(value, {"passage": "p", "title": "t"}, "the passage goes")

    config: Config

    def __init__(self, config: ComponentConfig | None = None, /, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._chat = ChatClient(self.config, f"llm:{self.label}")
        # Replies by prompt: the same documents give the same queries within a run (the kit
        # asks twice; a model at temperature 0 is not always repeatable).
        self._answers: dict[tuple[str, str, str], str] = {}

    def check(self) -> None:
        check_key_env(self.config, f"query generator {self.label!r}")

    @property
    def endpoint(self) -> str:
        return self._chat.endpoint

    def passage(self, doc: Document) -> str:
        """What is sent about `doc`: its prose (Markdown rendered as a reader sees it), whole
        if it fits `max_passage_chars`, else whole paragraphs from a start picked by a hash of
        the id ("" when the document has fewer than `min_passage_words` words)."""
        c = self.config
        paras = [p for p in (render(raw) for raw in paragraphs(doc.text)) if words(p)]
        if sum(len(words(p)) for p in paras) < c.min_passage_words:
            return ""
        if len("\n\n".join(paras)) <= c.max_passage_chars:
            return "\n\n".join(paras)
        start = _hash(c.seed, "start", doc.id) % len(paras)
        text = self._window(paras[start:])
        # A short last paragraph: from the top instead.
        return text if len(words(text)) >= c.min_passage_words else self._window(paras)

    def _window(self, paras: list[str]) -> str:
        """The paragraphs that fit `max_passage_chars`, the first cut at a word if it alone is longer."""
        limit = self.config.max_passage_chars
        kept: list[str] = []
        size = -2
        for para in paras:
            if kept and size + 2 + len(para) > limit:
                break
            kept.append(para)
            size += 2 + len(para)
        return _cut("\n\n".join(kept), limit)

    def messages(self, doc: Document, passage: str) -> list[dict[str, str]]:
        c = self.config
        template = c.prompt or DEFAULT_PROMPT
        system = [{"role": "system", "content": c.system}] if c.system else []
        return [*system, {"role": "user", "content": template.format(passage=passage, title=doc.title)}]

    def generate(self, documents: Sequence[Document]) -> list[SyntheticQuery]:
        c = self.config
        picked: list[tuple[Document, str]] = []
        for doc in sorted(documents, key=lambda d: _hash(c.seed, "pick", d.id)):
            if len(picked) >= c.passages:
                break
            passage = self.passage(doc)
            if passage:
                picked.append((doc, passage))
        out: list[SyntheticQuery] = []
        dropped: Counter[str] = Counter()
        reasons = ""
        seen: set[str] = set()
        for doc, passage in picked:
            reply = self._reply(doc, passage)
            text, why = self._question(reply, passage + "\n" + doc.title)
            key = " ".join(words(text)).lower()
            if not why and key in seen:
                why = "the same question as another passage's"
            if why:
                dropped[why] += 1
                continue
            seen.add(key)
            out.append(SyntheticQuery(text, doc.id, self.name, source_doc=doc.id))
        if dropped:
            reasons = ", ".join(f"{n} {why}" for why, n in dropped.most_common())
            log.warning(
                "query generator %r: %d of %d replies from %s dropped (%s)",
                self.label,
                sum(dropped.values()),
                len(picked),
                c.model,
                reasons,
            )
        if picked and not out:
            raise PlmUserError(
                f"query generator {self.label!r}: no usable question in {len(picked)} replies from "
                f"{c.model} at {self.endpoint} ({reasons}); check the model and the prompt"
            )
        return out

    def _reply(self, doc: Document, passage: str) -> str:
        messages = self.messages(doc, passage)
        key = (self.config.model, self.config.system, messages[-1]["content"])
        if key not in self._answers:
            try:
                self._answers[key] = self._chat.ask(messages)
            except ChatFailed as err:
                raise PlmUserError(
                    f"query generator {self.label!r} ({self.config.model}), asking about document {doc.id!r}: {err}"
                ) from None
        return self._answers[key]

    def _question(self, reply: str, passage: str) -> tuple[str, str]:
        """(the question, "") from a reply, or ("", why it is not used)."""
        c = self.config
        lines = [unquote(_LABEL.sub("", line).strip()) for line in parse_reply(THINKING.sub("", reply))]
        lines = [line for line in lines if line]
        if not lines:
            return "", "empty"
        # "Here is a question:" then the question: the first line that asks, else the first.
        text = next((line for line in lines if line.endswith("?")), lines[0])
        n = len(words(text))
        if n < c.min_words:
            return "", f"shorter than min_words = {c.min_words}"
        if n > c.max_words:
            return "", f"longer than max_words = {c.max_words}"
        if longest_copy(text, passage) > c.max_copied_words:
            return "", f"copied more than max_copied_words = {c.max_copied_words} words of the passage"
        return text, ""


def _cut(text: str, limit: int) -> str:
    """The text within `limit` characters, cut after a whole word (one longer word: inside it)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    if head[-1].isspace() or text[limit].isspace():
        return head.rstrip()
    return head.rsplit(None, 1)[0] if len(head.split()) > 1 else head


def _hash(seed: int, what: str, doc_id: str) -> int:
    return int(hashlib.sha256(f"{seed}\0{what}\0{doc_id}".encode()).hexdigest()[:12], 16)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(LLMQueryGenerator)
