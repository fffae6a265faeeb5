"""Build the multilingual FastAPI-docs corpus (BEIR layout) from a git mirror.

Reads ``docs/<lang>/docs/**/*.md`` at one commit of the FastAPI repository
(https://github.com/fastapi/fastapi, MIT licence), keeps the relative paths
that exist in all eight languages (en, zh, ja, ko, de, ru, fr, es), drops the
two non-documentation files (``_llm-test.md``, ``translation-banner.md``),
sorts the paths, keeps at most 150, and writes one gzip (level 9) JSONL file
per language to ``<out>/corpus/<lang>.jsonl.gz``.

Each line: ``{"_id": "tutorial/cors", "title": "...", "text": "<Markdown as
is>", "metadata": {"language": "zh"}}``.  The title is the first ``# ``
heading with its ``{ #anchor }`` suffix removed, or the path if there is none.

Only the standard library is used; ``git`` must be on PATH.

Usage::

    python bench/languages/build_corpus.py /path/to/fastapi.git <commit> [--out bench/languages]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path

LANGUAGES: tuple[str, ...] = ("en", "zh", "ja", "ko", "de", "ru", "fr", "es")
EXCLUDED: frozenset[str] = frozenset({"_llm-test.md", "translation-banner.md"})
MAX_PAGES: int = 150
_ANCHOR = re.compile(r"\s*\{\s*#[^}]*\}\s*$")


def git(git_dir: str, *args: str) -> str:
    """Run a git command against ``git_dir`` and return its stdout as UTF-8."""
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        check=True,
        capture_output=True,
    ).stdout
    return out.decode("utf-8")


def list_pages(git_dir: str, commit: str, lang: str) -> set[str]:
    """Return the Markdown paths under ``docs/<lang>/docs/`` relative to it."""
    prefix = f"docs/{lang}/docs/"
    names = git(git_dir, "ls-tree", "-r", "--name-only", commit, prefix).splitlines()
    return {n[len(prefix):] for n in names if n.startswith(prefix) and n.endswith(".md")}


def common_pages(git_dir: str, commit: str) -> list[str]:
    """Return the sorted paths present in every language, minus exclusions, capped."""
    pages: set[str] | None = None
    for lang in LANGUAGES:
        found = list_pages(git_dir, commit, lang)
        pages = found if pages is None else pages & found
    assert pages is not None
    return sorted(p for p in pages if p not in EXCLUDED)[:MAX_PAGES]


def title_of(text: str, fallback: str) -> str:
    """Return the first level-1 ATX heading (anchor removed) outside code fences."""
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if not in_fence and line.startswith("# "):
            return _ANCHOR.sub("", line[2:]).strip() or fallback
    return fallback


def build(git_dir: str, commit: str, out: Path) -> dict[str, tuple[int, int]]:
    """Write the corpus files; return ``{lang: (pages, characters)}``."""
    pages = common_pages(git_dir, commit)
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    stats: dict[str, tuple[int, int]] = {}
    for lang in LANGUAGES:
        buf = io.StringIO()
        chars = 0
        for page in pages:
            text = git(git_dir, "show", f"{commit}:docs/{lang}/docs/{page}")
            doc_id = page[: -len(".md")]
            record = {
                "_id": doc_id,
                "title": title_of(text, doc_id),
                "text": text,
                "metadata": {"language": lang},
            }
            buf.write(json.dumps(record, ensure_ascii=False) + "\n")
            chars += len(text)
        data = buf.getvalue().encode("utf-8")
        path = out / "corpus" / f"{lang}.jsonl.gz"
        # mtime=0 and no file name in the header keep the output byte-for-byte reproducible.
        with open(path, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
                gz.write(data)
        stats[lang] = (len(pages), chars)
    return stats


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the corpus, print per-language counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", help="path to a (bare) clone of fastapi/fastapi")
    parser.add_argument("commit", help="commit to read, e.g. c3f316b7e814667e8ee81e03a7330d00ee61e45c")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent), help="output folder")
    args = parser.parse_args(argv)
    stats = build(args.git_dir, args.commit, Path(args.out))
    for lang, (n, chars) in stats.items():
        print(f"{lang}\tpages={n}\tchars={chars}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
