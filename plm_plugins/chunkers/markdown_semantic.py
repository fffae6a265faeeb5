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

Any file is chunked in time and output linear in its size: one pass per stage, folds
joined once, repeated titles capped. The POC let a chunk grow past `max_words` when one
paragraph was longer (with the sentence carried before it) and when short pieces were
folded into a full chunk; poc_needle's reference depends on both, so by default they are
kept, behind guards the corpus never reaches (`OVERSIZE_FACTOR`, `_keeps_overlap`,
`_folds`, `_bounded`). With `strict_max_words` no chunk ever exceeds `max_words`, nor
`STRICT_CHARS_PER_WORD` characters per word of it (code counts as no words).

The POC read `#` headings only. With `setext_headings` a line underlined by `===` or `---`
starts a section too, written into the chunk as the `#` heading it equals; the rules
(fences, front matter, thematic breaks) are in `plm_plugins.setext`.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from plm import Chunk, Chunker, ComponentConfig, Document, hookimpl
from plm.languages import WORD_UNIT
from plm_plugins.commonmark import atx_headings
from plm_plugins.setext import SetextHeading, setext_headings

if TYPE_CHECKING:
    from plm import Registry

# A code span: a fenced block from ``` to the next ``` (across lines) or an inline `...`
# on one line. Fences come first so their backticks are never read as inline spans.
CODE_SPAN = re.compile(r"```[\s\S]*?```|`[^`\n]+`")
# Splitting on the captured span keeps the code as its own piece. The POC did this with
# inline spans too, so `kubectl` inside a sentence becomes a paragraph of its own when a
# long section is packed; the reference chunk texts only match with that quirk.
_CODE_SPLIT = re.compile(f"({CODE_SPAN.pattern})")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
SCRIPT_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])\s*(?=\S)")


@lru_cache(maxsize=8)
def heading_pattern(max_level: int) -> re.Pattern[str]:
    # `\s+` may cross a newline and nothing excludes code fences, so a `# comment` line in
    # a shell block starts a section: the POC's behaviour, kept for parity.
    return re.compile(rf"^(#{{1,{max_level}}})\s+(.+)$", re.MULTILINE)


@lru_cache(maxsize=64)
def word_count(text: str, by_script: bool = False) -> int:
    """Whitespace-separated words once every code span is replaced by a space; `by_script`:
    each character of a script written without spaces (Chinese, Japanese, Korean's Hangul,
    Thai) is a word of its own, so a Chinese chunk's size is its characters, about its
    model tokens. Remembered for the last texts: a one-section document is counted by three
    passes (a string keeps its hash, so asking again costs a lookup, not a split)."""
    prose = CODE_SPAN.sub(" ", text) if "`" in text else text  # no backtick: no span
    if by_script and not prose.isascii():
        return len(WORD_UNIT.findall(prose))
    return len(prose.split())


def paragraphs(text: str) -> list[str]:
    """Code spans as their own paragraphs, other text split on exact blank lines.

    The POC split on "\\n\\n" (not on lines of spaces), then stripped and dropped empties.
    """
    out: list[str] = []
    for i, part in enumerate(_CODE_SPLIT.split(text)):
        pieces = [part] if i % 2 else part.split("\n\n")  # odd indexes are the captured spans
        out.extend(p.strip() for p in pieces if p.strip())
    return out


def last_sentences(paragraph: str, n: int, by_script: bool = False) -> str:
    """The last `n` sentences of a paragraph, as written; the whole paragraph if it has fewer.
    `by_script`: a CJK full stop, question or exclamation mark ends a sentence too, with no
    space after it."""
    if n <= 0:
        return ""
    breaks = list((SCRIPT_SENTENCE_BREAK if by_script else SENTENCE_BREAK).finditer(paragraph))
    return paragraph[breaks[-n].end() :] if len(breaks) >= n else paragraph


# The POC kept a paragraph of any size whole (poc_needle has a generated HTML block of
# 8,474 words, and its largest chunk has 8,481, 10.6x max_words). Without strict_max_words
# that quirk is kept, but a paragraph is cut at word boundaries past this many times
# max_words, and so is any chunk (`_bounded`): one giant paragraph (a minified file, a
# dump) no longer becomes one giant chunk.
OVERSIZE_FACTOR = 16
# A title is a whole line of any length, and it is copied into the heading_path of every
# chunk under it and into each "(continued)" heading: copies are cut to this many
# characters so that output stays linear in the input. poc_needle's longest title has
# 575; the section's own text keeps its heading line whole.
MAX_TITLE_CHARS = 1_000
_WORD = re.compile(r"\S+")
# Code counts as no words, so a fenced block of any size is "0 words". With
# strict_max_words a chunk is also held to this many characters per max_words word (prose
# averages about 6, so only code and unbroken strings reach it), cut at line ends.
STRICT_CHARS_PER_WORD = 12


def word_starts(text: str, by_script: bool = False) -> list[int]:
    """Where each word that `word_count` counts starts: a code span ends a word, as the
    space that replaces it does."""
    word = WORD_UNIT if by_script else _WORD
    starts: list[int] = []
    pos = 0
    for span in CODE_SPAN.finditer(text):
        starts.extend(w.start() for w in word.finditer(text, pos, span.start()))
        pos = span.end()
    starts.extend(w.start() for w in word.finditer(text, pos))
    return starts


def split_words(text: str, limit: int, by_script: bool = False) -> list[str]:
    """`text` cut before every `limit`-th word into pieces of at most `limit` words each.

    Cuts fall outside code spans, so each piece counts alone exactly the words it holds
    in `text`; a text that is one code span has no words and is never cut.
    """
    if limit <= 0 or word_count(text, by_script) <= limit:
        return [text]
    cuts = [0, *word_starts(text, by_script)[limit::limit], len(text)]
    return [text[a:b].strip() for a, b in pairwise(cuts)]


def split_lines(text: str, max_chars: int, max_words: int) -> list[str]:
    """`text` in pieces of whole lines, each of at most `max_chars` characters and
    `max_words` whitespace-separated words (code counted as words: a cut fence is no longer
    a span); a line over either limit alone is cut within the line."""
    pieces: list[str] = []
    buffer: list[str] = []
    chars = words = 0
    for line in text.splitlines(keepends=True):
        line_words = len(line.split())
        if buffer and (chars + len(line) > max_chars or words + line_words > max_words):
            pieces.append("".join(buffer))
            buffer, chars, words = [], 0, 0
        if len(line) > max_chars or line_words > max_words:
            for part in split_words(line, max_words):
                pieces.extend(part[i : i + max_chars] for i in range(0, len(part), max_chars))
            continue
        buffer.append(line)
        chars, words = chars + len(line), words + line_words
    if buffer:
        pieces.append("".join(buffer))
    return [p.strip("\n") for p in pieces if p.strip()]


def continued_heading(level: int, title: str, max_title_words: int) -> str:
    """The heading of each packed piece after a section's first, as the POC wrote it.

    Level 0 (the intro, or a document without headings) still gets its zero hashes, as in
    the POC: " Introduction (continued)". Only the title's first `max_title_words` words
    are repeated (a guard: the POC repeated the whole line).
    """
    title = split_words(title, max_title_words)[0] if max_title_words else ""
    return f"{'#' * level} {title} (continued)\n\n"


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
    cut: int | None = None  # numbers the pieces of a chunk that `_bounded` had to cut
    at: int = -1  # where its own text starts in the document (-1: at `start`), for its page


class MarkdownSemanticChunker(Chunker):
    """Documents -> heading-aware chunks of about `target_words` words (the POC's chunker)."""

    name = "markdown_semantic"

    class Config(ComponentConfig):
        target_words: int = Field(400, ge=1, description="pack long sections into chunks of about this size")
        min_words: int = Field(50, ge=0, description="smaller sections and chunks are merged")
        max_words: int = Field(800, ge=1, description="sections up to this size stay one chunk")
        overlap_sentences: int = Field(1, ge=0, description="sentences carried into the next piece")
        max_heading_level: int = Field(
            4, ge=1, le=6, description="deepest heading level that starts a section (setext: `===` 1, `---` 2)"
        )
        setext_headings: bool = Field(
            False,
            description="also start sections at setext headings (a line underlined by `===` for level 1 or `---` "
            "for level 2, written into the chunk as `# title` / `## title`); not in fenced code or front matter, "
            "not after a blank line (a thematic break), only the one line above the underline (plm_plugins/setext.py "
            "has the rules). False keeps the POC's `#` headings only",
        )
        headings: Literal["poc", "commonmark"] = Field(
            "poc",
            description='which `#` lines are headings: "commonmark" reads none inside fenced code or front '
            'matter and leaves a `{ #id }` attribute list out of the title (plm_plugins/commonmark.py); "poc" '
            "keeps the POC's rule, where a `# comment` line in a code block starts a section",
        )
        words: Literal["spaces", "script"] = Field(
            "spaces",
            description='what a word is wherever sizes are counted: "spaces" (the POC) splits on whitespace; '
            '"script" also counts each character of a script written without spaces (Chinese, Japanese, '
            "Korean's Hangul, Thai) as a word, so chunks of such text are sized as the embedder reads them, "
            "and a CJK full stop ends a sentence",
        )
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
            # A "# (continued)" heading is two words; a piece needs room for it and a word.
            if self.strict_max_words and self.max_words < 3:
                raise ValueError(f"strict_max_words needs max_words >= 3, got {self.max_words}")
            return self

    config: Config

    @property
    def _by_script(self) -> bool:
        return self.config.words == "script"

    def _count(self, text: str) -> int:
        return word_count(text, self._by_script)

    @property
    def _ceiling(self) -> int:
        """No chunk has more words than this: max_words, or the POC's bounded overshoot."""
        cfg = self.config
        return cfg.max_words if cfg.strict_max_words else cfg.max_words * OVERSIZE_FACTOR

    def run(self, data: list[Document]) -> list[Chunk]:
        return [chunk for doc in data for chunk in self.chunk_document(doc)]

    def chunk_document(self, doc: Document) -> list[Chunk]:
        if not doc.text.strip():
            return []  # nothing to retrieve; the POC never met an empty page
        pieces = self._bounded(self._final_merge(self._split(self._merge_tiny(self._sections(doc.text)))))
        metadata = {**doc.metadata, "title": doc.title}
        # A paged document (a PDF) has a form feed before each page after the first.
        breaks = [i for i, c in enumerate(doc.text) if c == "\f"] if "\f" in doc.text else None
        # The doc id, not the absolute path: the id must survive moving the corpus folder.
        source = doc.id
        chunks = []
        for i, p in enumerate(pieces):
            meta = dict(metadata)
            if breaks is not None:
                meta["page"] = bisect_right(breaks, p.at if p.at >= 0 else p.start) + 1
            # Pieces of one split section share a span; the part number keeps their ids apart.
            key = f"{source}:{p.start}:{p.end}" + ("" if p.part is None else f":{p.part}")
            key += "" if p.cut is None else f"/{p.cut}"
            chunks.append(
                Chunk(
                    id=f"{doc.id}_mdsem_{i}",
                    doc_id=doc.id,
                    text=p.text,
                    heading_path=p.heading_path,
                    start_char=p.start,
                    end_char=p.end,
                    stable_id=hashlib.sha1(key.encode()).hexdigest()[:16],
                    metadata=meta,
                )
            )
        return chunks

    def _headings(self, text: str) -> list[SetextHeading]:
        """Every heading that starts a section: (start, end, level, title), in order."""
        # No "#" anywhere: no heading (a search for one character is far cheaper than the pattern's).
        if self.config.headings == "commonmark":
            found = atx_headings(text, self.config.max_heading_level)
            headings = [SetextHeading(h.start, h.end, h.level, h.title) for h in found if h.title]
        else:
            atx = heading_pattern(self.config.max_heading_level).finditer(text) if "#" in text else ()
            headings = [SetextHeading(m.start(), m.end(), len(m.group(1)), m.group(2).strip()) for m in atx]
        if not self.config.setext_headings:
            return headings
        # Merged in order. A `#` heading's `\s+` may cross a line (`#` alone, then `Title`), so
        # a setext heading whose text a `#` heading took is dropped: the `#` rule wins.
        merged: list[SetextHeading] = []
        for h in sorted([*headings, *setext_headings(text, self.config.max_heading_level)]):
            if not merged or h.start >= merged[-1].end:
                merged.append(h)
        return merged

    def _sections(self, text: str) -> list[_Piece]:
        headings = self._headings(text)
        if not headings:
            return [_Piece(text, 0, len(text), ())]  # the whole document, unstripped
        sections: list[_Piece] = []
        intro = text[: headings[0].start].strip()
        # The intro is kept from min_words // 2 words on (25 for the POC's 50).
        if intro and self._count(intro) >= self.config.min_words // 2:
            sections.append(_Piece(intro, 0, headings[0].start, (), 0, "Introduction"))
        stack: list[tuple[int, str]] = []
        for i, h in enumerate(headings):
            end = headings[i + 1].start if i + 1 < len(headings) else len(text)
            level, title = h.level, h.title
            short = title[:MAX_TITLE_CHARS].rstrip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, short))
            body = text[h.end : end].strip()
            path = tuple(t for _, t in stack)
            # A setext heading is written as the `#` heading it equals, like every heading here.
            sections.append(_Piece(f"{'#' * level} {title}\n\n{body}", h.start, end, path, level, short))
        return sections

    def _merge_tiny(self, sections: list[_Piece]) -> list[_Piece]:
        # One pairwise pass: the merged section is not re-checked, even if still tiny. A
        # merged section over max_words is packed like any long one, so no guard is needed.
        merged: list[_Piece] = []
        i = 0
        while i < len(sections):
            s = sections[i]
            if i + 1 < len(sections) and self._count(s.text) < self.config.min_words:
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
            out.extend([s] if self._count(s.text) <= self.config.max_words else self._pack(s))
        return out

    def _pack(self, section: _Piece) -> list[_Piece]:
        """A long section as pieces of about target_words words, each after the first
        starting with a "(continued)" heading and the previous piece's last sentence."""
        cfg = self.config
        # A title may be as long as its line: only as many words are repeated as leave room
        # for a target-sized body within max_words (the "2" is the hashes and "(continued)"),
        # and at least a quarter of max_words. The POC's titles (81 words at most) are whole.
        title_words = max(cfg.max_words - cfg.target_words - 2, cfg.max_words // 4)
        prefix = continued_heading(section.level, section.title, title_words)
        # Body sizes in words: `fit` keeps a piece and its heading within max_words, `room`
        # is the most any body holds (fit when strict).
        fit = max(1, cfg.max_words - self._count(prefix))
        room = max(fit, self._ceiling - self._count(prefix))
        bodies: list[str] = []
        firsts: list[str] = []  # the first paragraph each body takes from the section (not carried)
        buffer: list[str] = []
        words = 0  # kept as the buffer grows, never re-counted
        for para in (piece for p in paragraphs(section.text) for piece in split_words(p, room, self._by_script)):
            para_words = self._count(para)
            # The POC packs up to target_words; a piece after the first also leaves room for
            # its heading (never binding in the POC's settings, only when target is near max).
            budget = cfg.target_words if not bodies else min(cfg.target_words, fit)
            # Only the buffer's words so far are compared: the carried sentence counts, and a
            # piece may end up over budget (one big paragraph, or overlap + paragraph).
            if buffer and words + para_words > budget:
                bodies.append("\n\n".join(buffer))
                carried = last_sentences(buffer[-1], cfg.overlap_sentences, self._by_script)
                words = self._count(carried)
                if not self._keeps_overlap(words, para_words, fit, room):
                    carried, words = "", 0
                buffer = [carried] if carried else []
            if len(firsts) == len(bodies):
                firsts.append(para)
            buffer.append(para)
            words += para_words
        if buffer:
            bodies.append("\n\n".join(buffer))
        s = section
        return [
            _Piece(body if part == 0 else prefix + body, s.start, s.end, s.heading_path, s.level, s.title, part,
                   at=at)
            for part, (body, at) in enumerate(zip(bodies, self._body_starts(section, firsts), strict=True))
        ]  # fmt: skip

    @staticmethod
    def _body_starts(section: _Piece, firsts: list[str]) -> list[int]:
        """Where each piece's first new paragraph is in the document (about: a heading is
        re-rendered), found in order in the section's text; -1 (the section's start, on the
        same page) for every piece of a section without a page break."""
        if "\f" not in section.text:
            return [-1] * len(firsts)
        starts, cursor = [], 0
        for para in firsts:
            found = section.text.find(para, cursor)
            cursor = found if found >= 0 else cursor
            starts.append(section.start + cursor)
        return starts

    @staticmethod
    def _keeps_overlap(carried_words: int, para_words: int, fit: int, room: int) -> bool:
        """Whether the carried sentence(s) may start the next piece, before a paragraph.

        The POC always carried them. Guard: the overlap never pushes a piece past max_words
        (a "sentence" with no break is a whole paragraph, and may be as long as one), except
        before a paragraph that alone is over it (a POC quirk: poc_needle has six, e.g. 20
        carried words before an 839-word paragraph), and then only within `room`.
        """
        total = carried_words + para_words
        return total <= fit or (para_words > fit and total <= room)

    def _final_merge(self, pieces: list[_Piece]) -> list[_Piece]:
        """Fold each chunk under min_words into the one before (the first is never folded
        back). Texts are collected and joined once at the end, so this stays linear however
        many tiny pieces a file has."""
        kept: list[_Piece] = []
        kept_words = folded_words = 0  # of kept[-1]: in all, and how many came from folds
        for p in pieces:
            words = self._count(p.text)
            if kept and words < self.config.min_words and self._folds(kept_words, folded_words, words):
                prev = kept[-1]
                prev.extra = prev.extra if prev.extra is not None else []
                prev.extra.append(p.text)
                prev.end = p.end
                kept_words += words
                folded_words += words
            else:
                kept.append(p)
                kept_words, folded_words = words, 0
        for p in kept:
            if p.extra:
                p.text = "\n\n".join([p.text, *p.extra])
                p.extra = None
        return kept

    def _folds(self, kept_words: int, folded_words: int, words: int) -> bool:
        """Whether a short chunk of `words` words is folded into the kept chunk before it
        (`kept_words` words so far, `folded_words` of them from earlier folds).

        The POC always folded, so a run of tiny pieces (a file of bare headings) cascaded
        into one chunk of any size. A fold within max_words is still always made; one past
        it only while the folds into that chunk total at most target_words, and never when
        strict. poc_needle has 15 folds past max_words (reaching 912 words, with at most 171
        folded in), which its reference depends on; a long run of tiny pieces now fills a
        chunk to about max_words and starts the next one.
        """
        cfg = self.config
        total = kept_words + words
        if total <= cfg.max_words:
            return True
        return not cfg.strict_max_words and folded_words + words <= cfg.target_words and total <= self._ceiling

    def _bounded(self, pieces: list[_Piece]) -> list[_Piece]:
        """Last guard: a chunk over the ceiling (max_words when strict), counted on its final
        text, is cut at word boundaries. The stages above count words piece by piece, as the POC did, and a join
        can re-pair an unclosed ``` (a `# comment` line splits a code block across
        sections) so that code counts as words; poc_needle never reaches this."""
        out: list[_Piece] = []
        chars = self.config.max_words * STRICT_CHARS_PER_WORD if self.config.strict_max_words else 0
        for p in pieces:
            texts = split_words(p.text, self._ceiling, self._by_script)
            if chars and any(len(t) > chars for t in texts):
                # Code is no words: cut at line ends by characters and raw words (a cut
                # fence's code counts as words in its pieces), then by words as a last guard.
                texts = [
                    w
                    for t in texts
                    for c in split_lines(t, chars, self._ceiling)
                    for w in split_words(c, self._ceiling, self._by_script)
                ]
            out.extend([p] if len(texts) == 1 else (replace(p, text=t, cut=i) for i, t in enumerate(texts)))
        return out


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(MarkdownSemanticChunker)
