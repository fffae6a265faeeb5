"""The POC's "markdown semantic" chunker (POC_SPEC section 2), quirks included.

Sections run from one heading to the next; tiny sections are merged pairwise, long ones
are packed paragraph by paragraph up to `target_words` with a one-sentence overlap, and
a final pass folds short chunks into the one before. Every quirk below is reproduced on
purpose: `configs/poc_parity.toml` must give the POC's 7,269 chunks on `poc_needle`,
byte for byte, and the reference enriched texts and top-5 lists depend on it.

Offsets are those of the section a chunk came from: `start_char` is where its first
section (or the document) starts and `end_char` where its last section ends. The pieces
of one split section therefore share a span, and a chunk's text is not always a slice of
the document (headings are re-rendered, paragraphs re-joined, "(continued)" added).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from plm_core.component import ComponentConfig
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Chunker
from plm_core.records import Chunk, Document

if TYPE_CHECKING:
    from plm_core.registry import Registry

# A code span: a fenced block from ``` to the next ``` (across lines) or an inline `...`
# on one line. Fences come first so their backticks are never read as inline spans.
CODE_SPAN = re.compile(r"```[\s\S]*?```|`[^`\n]+`")
# Splitting on the captured span keeps the code as its own piece. The POC did this with
# inline spans too, so `kubectl` inside a sentence becomes a paragraph of its own when a
# long section is packed; the reference chunk texts only match with that quirk.
_CODE_SPLIT = re.compile(f"({CODE_SPAN.pattern})")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


@lru_cache(maxsize=8)
def heading_pattern(max_level: int) -> re.Pattern[str]:
    # `\s+` may cross a newline and nothing excludes code fences, so a `# comment` line in
    # a shell block starts a section: the POC's behaviour, kept for parity.
    return re.compile(rf"^(#{{1,{max_level}}})\s+(.+)$", re.MULTILINE)


def word_count(text: str) -> int:
    """Whitespace-separated words once every code span is replaced by a space."""
    return len(CODE_SPAN.sub(" ", text).split())


def paragraphs(text: str) -> list[str]:
    """Code spans as their own paragraphs, other text split on exact blank lines.

    The POC split on "\\n\\n" (not on lines of spaces), then stripped and dropped empties.
    """
    out: list[str] = []
    for i, part in enumerate(_CODE_SPLIT.split(text)):
        pieces = [part] if i % 2 else part.split("\n\n")  # odd indexes are the captured spans
        out.extend(p.strip() for p in pieces if p.strip())
    return out


def last_sentences(paragraph: str, n: int) -> str:
    """The last `n` sentences of a paragraph, as written; the whole paragraph if it has fewer."""
    if n <= 0:
        return ""
    breaks = list(SENTENCE_BREAK.finditer(paragraph))
    return paragraph[breaks[-n].end() :] if len(breaks) >= n else paragraph


# Without strict_max_words, the POC's overshoots are kept (poc_needle has an 8,474-word
# table paragraph and 15 folds past max_words, which the reference depends on) but
# bounded: nothing grows past this many times max_words (the POC's largest chunk is
# 8,481 words, 10.6x), whether by one huge paragraph or by folding many tiny pieces.
OVERSIZE_FACTOR = 16
_WORD = re.compile(r"\S+")


def split_words(text: str, limit: int) -> list[str]:
    """`text` cut at word boundaries into pieces of at most `limit` words, in order.

    Words are counted as `word_count` counts them only for text without code spans; a
    paragraph that is one code span has no words and is never cut.
    """
    if limit <= 0 or word_count(text) <= limit:
        return [text]
    starts = [m.start() for m in _WORD.finditer(text)]
    return [
        text[starts[i] : starts[i + limit] if i + limit < len(starts) else len(text)].strip()
        for i in range(0, len(starts), limit)
    ]


@dataclass
class _Piece:
    """A section or a chunk under construction; `part` numbers the pieces of a split section."""

    text: str
    start: int
    end: int
    heading_path: tuple[str, ...]
    level: int = 0
    title: str = ""
    part: int | None = None
    extra: list[str] | None = None  # texts folded in by the final pass, joined once at the end


class MarkdownSemanticChunker(Chunker):
    """Documents -> heading-aware chunks of about `target_words` words (the POC's chunker)."""

    name = "markdown_semantic"

    class Config(ComponentConfig):
        target_words: int = Field(400, ge=1, description="pack long sections into chunks of about this size")
        min_words: int = Field(50, ge=0, description="smaller sections and chunks are merged")
        max_words: int = Field(800, ge=1, description="sections up to this size stay one chunk")
        overlap_sentences: int = Field(1, ge=0, description="sentences carried into the next piece")
        max_heading_level: int = Field(4, ge=1, le=6, description="deepest `#` level that starts a section")
        strict_max_words: bool = Field(
            False,
            description="never emit a chunk over max_words: split long paragraphs at word boundaries and never "
            "fold a short chunk into a full one. False keeps the POC's two overshoots (a paragraph longer than "
            "max_words stays whole; a short last piece is folded into the chunk before), each bounded",
        )

        @model_validator(mode="after")
        def _ordered(self) -> MarkdownSemanticChunker.Config:
            if not self.min_words <= self.target_words <= self.max_words:
                raise ValueError(
                    f"need min_words <= target_words <= max_words, got {self.min_words}, "
                    f"{self.target_words}, {self.max_words}"
                )
            return self

    config: Config

    def run(self, data: list[Document]) -> list[Chunk]:
        return [chunk for doc in data for chunk in self.chunk_document(doc)]

    def chunk_document(self, doc: Document) -> list[Chunk]:
        if not doc.text.strip():
            return []  # nothing to retrieve; the POC never met an empty page
        pieces = self._final_merge(self._split(self._merge_tiny(self._sections(doc.text))))
        metadata = {**doc.metadata, "title": doc.title}
        # The doc id, not the absolute path: the id must survive moving the corpus folder.
        source = doc.id
        chunks = []
        for i, p in enumerate(pieces):
            # Pieces of one split section share a span; the part number keeps their ids apart.
            key = f"{source}:{p.start}:{p.end}" + ("" if p.part is None else f":{p.part}")
            chunks.append(
                Chunk(
                    id=f"{doc.id}_mdsem_{i}",
                    doc_id=doc.id,
                    text=p.text,
                    heading_path=p.heading_path,
                    start_char=p.start,
                    end_char=p.end,
                    stable_id=hashlib.sha1(key.encode()).hexdigest()[:16],
                    metadata=dict(metadata),
                )
            )
        return chunks

    def _sections(self, text: str) -> list[_Piece]:
        headings = list(heading_pattern(self.config.max_heading_level).finditer(text))
        if not headings:
            return [_Piece(text, 0, len(text), ())]  # the whole document, unstripped
        sections: list[_Piece] = []
        intro = text[: headings[0].start()].strip()
        # The intro is kept from min_words // 2 words on (25 for the POC's 50).
        if intro and word_count(intro) >= self.config.min_words // 2:
            sections.append(_Piece(intro, 0, headings[0].start(), (), 0, "Introduction"))
        stack: list[tuple[int, str]] = []
        for i, m in enumerate(headings):
            end = headings[i + 1].start() if i + 1 < len(headings) else len(text)
            level, title = len(m.group(1)), m.group(2).strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            body = text[m.end() : end].strip()
            path = tuple(t for _, t in stack)
            sections.append(_Piece(f"{m.group(1)} {title}\n\n{body}", m.start(), end, path, level, title))
        return sections

    def _merge_tiny(self, sections: list[_Piece]) -> list[_Piece]:
        # One pairwise pass: the merged section is not re-checked, even if still tiny.
        merged: list[_Piece] = []
        i = 0
        while i < len(sections):
            s = sections[i]
            if i + 1 < len(sections) and word_count(s.text) < self.config.min_words:
                nxt = sections[i + 1]
                merged.append(_Piece(f"{s.text}\n\n{nxt.text}", s.start, nxt.end, s.heading_path, s.level, s.title))
                i += 2
            else:
                merged.append(s)
                i += 1
        return merged

    def _split(self, sections: list[_Piece]) -> list[_Piece]:
        out: list[_Piece] = []
        for s in sections:
            out.extend([s] if word_count(s.text) <= self.config.max_words else self._pack(s))
        return out

    def _pack(self, section: _Piece) -> list[_Piece]:
        """A long section as pieces of about target_words words, each after the first
        starting with a "(continued)" heading and the previous piece's last sentence."""
        cfg = self.config
        # Level 0 is the intro: the POC still wrote its (zero) hashes, hence " Introduction".
        prefix = f"{'#' * section.level} {section.title} (continued)\n\n"
        bodies: list[str] = []
        buffer: list[str] = []
        words = 0
        # Strict: a piece plus its "(continued)" heading fits max_words.
        limit = max(1, cfg.max_words - word_count(prefix)) if cfg.strict_max_words else cfg.max_words * OVERSIZE_FACTOR
        for para in (piece for p in paragraphs(section.text) for piece in split_words(p, limit)):
            para_words = word_count(para)
            # Only the buffer's words so far are compared: the carried sentence counts, and a
            # piece may end up over target (one huge paragraph, or overlap + paragraph).
            if buffer and words + para_words > cfg.target_words:
                bodies.append("\n\n".join(buffer))
                carried = last_sentences(buffer[-1], cfg.overlap_sentences)
                words = word_count(carried)
                if words + para_words > limit:  # a "sentence" with no break is a whole paragraph
                    carried, words = "", 0
                buffer = [carried] if carried else []
            buffer.append(para)
            words += para_words
        if buffer:
            bodies.append("\n\n".join(buffer))
        s = section
        return [
            _Piece(body if part == 0 else prefix + body, s.start, s.end, s.heading_path, s.level, s.title, part)
            for part, body in enumerate(bodies)
        ]

    def _final_merge(self, pieces: list[_Piece]) -> list[_Piece]:
        """Fold each chunk under min_words into the one before (the first is never folded
        back). Texts are collected and joined once, so this stays linear however many tiny
        pieces a file has; a fold that would take a chunk past max_words (without strict:
        past OVERSIZE_FACTOR x max_words, which the POC never reached) starts a new chunk
        instead, so folds cannot cascade into one huge chunk."""
        cfg = self.config
        kept: list[_Piece] = []
        kept_words = 0
        for p in pieces:
            words = word_count(p.text)
            if kept and words < cfg.min_words:
                limit = cfg.max_words if cfg.strict_max_words else cfg.max_words * OVERSIZE_FACTOR
                room = kept_words + words <= limit
                if room:
                    prev = kept[-1]
                    prev.extra = prev.extra if prev.extra is not None else []
                    prev.extra.append(p.text)
                    prev.end = p.end
                    kept_words += words
                    continue
            kept.append(p)
            kept_words = words
        for p in kept:
            if p.extra:
                p.text = "\n\n".join([p.text, *p.extra])
                p.extra = None
        return kept


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(MarkdownSemanticChunker)
