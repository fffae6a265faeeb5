"""The Markdown, BEIR and JSON records loaders on small files written by each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plm_core.errors import PlmUserError
from plm_core.registry import Registry
from plm_plugins.front_matter import parse_front_matter
from plm_plugins.loaders import beir_corpus as beir
from plm_plugins.loaders import json_records
from plm_plugins.loaders import markdown_dir as markdown
from plm_plugins.loaders.beir_corpus import BeirCorpusLoader
from plm_plugins.loaders.json_records import JsonRecordsLoader
from plm_plugins.loaders.markdown_dir import MarkdownLoader, title_of


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- Markdown -------------------------------------------------------------------------


def test_markdown_one_document_per_file_sorted_by_path_id_is_stem(tmp_path: Path) -> None:
    write(tmp_path, "b.md", "# B\n")
    write(tmp_path, "a.md", "# A\n")
    write(tmp_path, "notes.txt", "# not markdown\n")
    docs = MarkdownLoader().run(str(tmp_path))
    assert [d.id for d in docs] == ["a", "b"]
    assert docs[0].path == (tmp_path / "a.md").as_posix()
    assert docs[0].metadata["path"] == docs[0].path


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ('---\ntitle: "Quoted Title"\n---\n# Heading\n', "Quoted Title"),
        ("---\ntitle: 'Single'\n---\n", "Single"),
        ("---\ntitle:   Plain words  \n---\n", "Plain words"),
        ("intro\n# First Heading \n\ntitle: later\n", "First Heading"),  # first match wins
        ("## Level two\n#NoSpace\n", "doc"),  # neither counts: fallback to the id
        ("---\nmeta:\n  title: nested\n---\n", "doc"),  # indented lines are not title lines
        ("no title here\n", "doc"),
    ],
)
def test_markdown_title_rule(tmp_path: Path, text: str, title: str) -> None:
    write(tmp_path, "doc.md", text)
    assert MarkdownLoader().run(str(tmp_path))[0].title == title
    assert title_of(text, "doc") == title


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("APT\n===\n\nA package manager.\n", "APT"),
        ("   APT  \n  =====  \nbody\n", "APT"),  # up to 3 spaces before the underline, trailing spaces
        ("intro\n\nFirst\n===\n\n# Later\n", "First"),  # first match wins, either kind
        ("# Hash\n\nSetext\n===\n", "Hash"),
        ('---\ntitle: "From meta"\n---\nAPT\n===\n', "From meta"),
        ("Usage\n-----\n", "doc"),  # level 2 is no title, as `## ` is not
        ("text\n\n===\n", "doc"),  # after a blank line `===` underlines nothing
        ("```\nAPT\n===\n```\n", "doc"),  # fenced code
        ("- item\n===\n", "doc"),  # a list item's line
    ],
)
def test_markdown_setext_title(tmp_path: Path, text: str, title: str) -> None:
    write(tmp_path, "doc.md", text)
    assert MarkdownLoader(setext_title=True).run(str(tmp_path))[0].title == title
    assert title_of(text, "doc", setext=True) == title
    # Off by default: the POC's rule reads `title:` and `# ` lines only.
    assert MarkdownLoader().run(str(tmp_path))[0].title == title_of(text, "doc")
    assert MarkdownLoader().config.setext_title is False


def test_markdown_readme_with_a_setext_title_is_not_titled_readme(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "APT\n===\n\nA package manager.\n")
    assert MarkdownLoader(setext_title=True).run(str(tmp_path))[0].title == "APT"
    assert MarkdownLoader().run(str(tmp_path))[0].title == "README"


def test_markdown_keeps_front_matter_in_text_and_parses_it(tmp_path: Path) -> None:
    text = (
        "---\n"
        'title: "Pods"\n'
        "weight: 40\n"
        "ratio: 0.5\n"
        "main_menu: true\n"
        "date: 2024-05-01\n"
        "reviewers:\n- alice\n- bob\n"
        "description: >\n  Two folded\n  lines.\n"
        "sitemap:\n  priority: 1.0\n"
        "---\n\n# Pods\n\nBody.\n"
    )
    write(tmp_path, "pods.md", text)
    doc = MarkdownLoader().run(str(tmp_path))[0]
    assert doc.text == text
    meta = dict(doc.metadata)
    assert meta.pop("path") == doc.path
    assert meta == {
        "title": "Pods",
        "weight": 40,
        "ratio": 0.5,
        "main_menu": True,
        "date": "2024-05-01",
        "reviewers": ["alice", "bob"],
        "description": "Two folded lines.",
    }


def test_markdown_front_matter_off_and_absent(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\nweight: 1\n---\n")
    docs = MarkdownLoader(front_matter=False).run(str(tmp_path))
    assert set(docs[0].metadata) == {"path"}
    assert parse_front_matter("no front matter\n---\nweight: 1\n---\n") == {}
    assert parse_front_matter("---\nweight: 1\n(never closed)\n") == {}


def test_markdown_single_file_and_recursive_pattern(tmp_path: Path) -> None:
    write(tmp_path, "top.md", "# Top\n")
    write(tmp_path, "sub/deep.md", "# Deep\n")
    # Recursive by default; ids are paths from the folder, without the extension.
    assert [d.id for d in MarkdownLoader().run(str(tmp_path))] == ["sub/deep", "top"]
    assert [d.id for d in MarkdownLoader(pattern="*.md").run(str(tmp_path))] == ["top"]
    assert [d.id for d in MarkdownLoader(pattern="**/*.md", ids="stem").run(str(tmp_path))] == ["deep", "top"]
    assert [d.id for d in MarkdownLoader().run(str(tmp_path / "sub" / "deep.md"))] == ["deep"]


def test_markdown_user_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.md"
    bad.write_bytes("# Caf\xe9\n".encode("latin-1"))
    with pytest.raises(PlmUserError, match=r"latin1\.md: not valid UTF-8"):
        MarkdownLoader().run(str(tmp_path))
    with pytest.raises(PlmUserError, match="no such file or folder"):
        MarkdownLoader().run(str(tmp_path / "missing"))
    with pytest.raises(PlmUserError, match="no files match"):
        MarkdownLoader(pattern="*.rst").run(str(tmp_path))


def test_markdown_duplicate_stems_are_an_error(tmp_path: Path) -> None:
    write(tmp_path, "a/page.md", "x")
    write(tmp_path, "b/page.md", "y")
    with pytest.raises(PlmUserError, match="both give document id 'page'"):
        MarkdownLoader(pattern="**/*.md", ids="stem").run(str(tmp_path))


def test_markdown_skips_hidden_vendored_and_excluded_folders(tmp_path: Path) -> None:
    for name in ("a.md", "team/b.md", ".git/c.md", ".hidden.md", "node_modules/pkg/d.md", "drafts/e.md", "x/old/f.md"):
        write(tmp_path, name, "# T\n")
    write(tmp_path, "index/g.md", "# T\n")
    loader = MarkdownLoader(exclude=["drafts", "x/old/**"])
    loader.settings = type("S", (), {"data_dir": str(tmp_path / "index")})()
    assert [d.id for d in loader.run(str(tmp_path))] == ["a", "team/b"]
    assert loader.files(str(tmp_path)) == ([str(tmp_path / "a.md"), str(tmp_path / "team" / "b.md")], [])
    # What a watcher asks of a single path agrees with the walk.
    wanted = [n for n in ("a.md", "team/b.md", ".git/c.md", "drafts/e.md", "x/old/f.md", "index/g.md", "a.txt")]
    assert [n for n in wanted if loader.wants(tmp_path, tmp_path / n)] == ["a.md", "team/b.md"]


# --- BEIR -----------------------------------------------------------------------------


def beir_corpus(folder: Path) -> Path:
    rows = [
        {"_id": "z", "title": "Zed", "text": "last letter", "metadata": {"lang": "en"}},
        {"_id": "a", "title": "", "text": "no title"},
    ]
    return write(folder, "corpus.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")


def test_beir_keeps_file_order_and_fields(tmp_path: Path) -> None:
    beir_corpus(tmp_path)
    docs = BeirCorpusLoader().run(str(tmp_path))  # the folder holding corpus.jsonl
    assert [(d.id, d.title, d.text) for d in docs] == [("z", "Zed", "last letter"), ("a", "", "no title")]
    assert dict(docs[0].metadata) == {"lang": "en"}


def test_beir_include_title(tmp_path: Path) -> None:
    path = beir_corpus(tmp_path)
    docs = BeirCorpusLoader(include_title=True).run(str(path))
    assert docs[0].text == "Zed\n\nlast letter"
    assert docs[1].text == "no title"  # an empty title adds nothing


def test_beir_bad_lines_name_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "corpus.jsonl", '{"_id": "1", "text": "ok"}\n{not json\n')
    with pytest.raises(PlmUserError, match=r"corpus\.jsonl:2: not valid JSON"):
        BeirCorpusLoader().run(str(path))
    write(tmp_path, "corpus.jsonl", '{"_id": "1", "text": "ok"}\n{"_id": "2"}\n')
    with pytest.raises(PlmUserError, match=r"corpus\.jsonl:2: missing field 'text'"):
        BeirCorpusLoader().run(str(path))
    with pytest.raises(PlmUserError, match="no such file"):
        BeirCorpusLoader().run(str(tmp_path / "nowhere"))


# --- JSON records ---------------------------------------------------------------------


RECORDS = [
    {"id": 1, "text": "first", "title": "One", "lang": "en", "year": 2020},
    {"id": "two", "text": "second", "lang": "de"},
]


def test_json_list_and_jsonl_give_the_same_documents(tmp_path: Path) -> None:
    as_json = write(tmp_path, "r.json", json.dumps(RECORDS))
    as_jsonl = write(tmp_path, "r.jsonl", "\n".join(json.dumps(r) for r in RECORDS))
    for path in (as_json, as_jsonl):
        docs = JsonRecordsLoader().run(str(path))
        # the title is searched too (include_title, default true): title, blank line, text
        assert [(d.id, d.text, d.title) for d in docs] == [("1", "One\n\nfirst", "One"), ("two", "second", "")]
        assert dict(docs[0].metadata) == {"lang": "en", "year": 2020}


def test_json_field_names_and_metadata_selection(tmp_path: Path) -> None:
    rows = [{"key": "k1", "body": "text", "title": "T", "lang": "en", "year": 2020}]
    path = write(tmp_path, "r.jsonl", json.dumps(rows[0]))
    loader = JsonRecordsLoader(id_field="key", text_field="body", title_field=None, metadata_fields=["year", "x"])
    doc = loader.run(str(path))[0]
    assert (doc.id, doc.text, doc.title, dict(doc.metadata)) == ("k1", "text", "", {"year": 2020})


def test_json_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "r.jsonl", '{"id": "a", "text": "ok"}\n\n{"id": "b"}\n')
    with pytest.raises(PlmUserError, match=r"r\.jsonl:3: missing field 'text'"):
        JsonRecordsLoader().run(str(path))
    path = write(tmp_path, "r.json", json.dumps([{"id": "a", "text": "ok"}, {"text": "no id"}]))
    with pytest.raises(PlmUserError, match=r"r\.json: record 2: missing field 'id'"):
        JsonRecordsLoader().run(str(path))
    path = write(tmp_path, "r.csv", "id,text\n")
    with pytest.raises(PlmUserError, match="unknown suffix"):
        JsonRecordsLoader().run(str(path))


def test_json_a_metadata_object_is_the_documents_metadata_not_a_nested_key(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "text": "x", "metadata": {"team": "storage", "tags": ["db"]}, "year": 2020},
        {"id": "b", "text": "x", "metadata": {"team": "storage"}, "team": "storage"},  # the same value twice
        {"id": "c", "text": "x", "metadata": None},
        {"id": "d", "text": "x", "metadata": {"team": "a"}, "team": "b"},
        {"id": "e", "text": "x", "metadata": "storage"},
    ]
    path = write(tmp_path, "r.jsonl", "\n".join(json.dumps(r) for r in rows))
    docs, failed = JsonRecordsLoader().load(str(path))
    assert [dict(d.metadata) for d in docs] == [
        {"year": 2020, "team": "storage", "tags": ["db"]},
        {"team": "storage"},
        {},
    ]
    assert [f.path.rsplit(":", 1)[1] for f in failed] == ["4", "5"]
    assert "metadata key 'team' is given twice with two values" in failed[0].error and "keep one" in failed[0].error
    assert "field 'metadata' must be a JSON object" in failed[1].error
    named = JsonRecordsLoader(metadata_fields=["metadata"]).run(str(write(tmp_path, "n.jsonl", json.dumps(rows[0]))))
    assert dict(named[0].metadata) == {"team": "storage", "tags": ["db"]}


def test_modules_register_their_loader() -> None:
    registry = Registry()
    for module in (markdown, beir, json_records):
        module.plm_register_components(registry)
    assert registry.names("loaders") == ["beir_corpus", "json_records", "markdown_dir"]


@pytest.mark.dataset
def test_markdown_loader_agrees_with_the_beir_copy_of_poc_needle(poc_needle: Path) -> None:
    from_md = MarkdownLoader().run(str(poc_needle / "kubernetes"))
    from_beir = BeirCorpusLoader().run(str(poc_needle))
    assert len(from_md) == 1569
    assert [(d.id, d.title, d.text) for d in from_md] == [(d.id, d.title, d.text) for d in from_beir]
