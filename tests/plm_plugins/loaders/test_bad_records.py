"""Every loader turns each record (or file) it cannot index into one LoadFailure that can be
printed and stored, and loads all the others; patterns never reach outside their folder;
JSON record titles are searched."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from plm_core.interfaces import Loader
from plm_core.records import LoadFailure
from plm_index.documents import searchable_text
from plm_plugins.front_matter import parse_front_matter
from plm_plugins.loaders.beir_corpus import BeirCorpusLoader
from plm_plugins.loaders.json_records import JsonRecordsLoader
from plm_plugins.loaders.markdown_dir import MarkdownLoader


def printable(failures: list[LoadFailure]) -> None:
    """What the CLI prints and a sync stores: one line each, valid UTF-8."""
    for f in failures:
        (f.path + f.error + f.doc_id).encode("utf-8")
        assert f.error and "\n" not in f.error


# One bad line each, written for both `id` (json_records) and `_id` (BEIR); the value is
# what the failure's message says.
BAD = {
    "surrogate text": ('{"ID": "s", "text": "bad \\ud83d"}', "text is not valid Unicode"),
    "surrogate title": ('{"ID": "st", "title": "\\udc00 T", "text": "x"}', "title is not valid Unicode"),
    "surrogate id": ('{"ID": "\\ud83d", "text": "x"}', r"id '\\ud83d' is not valid Unicode"),
    "surrogate in metadata": (
        '{"ID": "sm", "text": "x", "metadata": {"k": ["\\udc00"]}, "k": ["\\udc00"]}',
        "metadata.k.* is not valid Unicode",
    ),
    "nested 100k deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "object nested 100k deep": ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
    "a 5000-digit number": ('{"ID": "n", "text": "x", "n": ' + "7" * 5000 + "}", "too long to read"),
    "null text": ('{"ID": "nt", "text": null}', "'text' is null"),
    "empty text": ('{"ID": "et", "text": ""}', "text is empty"),
    "whitespace text": ('{"ID": "wt", "text": " \\n\\t "}', "text is blank"),
    "invisible text": ('{"ID": "zw", "text": "\\u200b\\ufeff"}', "text is blank"),
    "number as text": ('{"ID": "it", "text": 5}', "'text' must be a string, got int"),
    "empty id": ('{"ID": "", "text": "x"}', "is empty"),
    "blank id": ('{"ID": "  ", "text": "x"}', "is blank"),
    "object id": ('{"ID": {"nested": 1}, "text": "x"}', "non-empty string or an integer, got dict"),
    "float id": ('{"ID": 1.5, "text": "x"}', "got float"),
    "boolean id": ('{"ID": true, "text": "x"}', "got bool"),
    "null id": ('{"ID": null, "text": "x"}', "is null"),
    "id with a newline": ('{"ID": "a\\nb", "text": "x"}', "control character"),
    "list title": ('{"ID": "lt", "title": ["x"], "text": "x"}', "'title' must be a string or null, got list"),
    "zero title": ('{"ID": "zt", "title": 0, "text": "x"}', "got int"),
    "NaN metadata": ('{"ID": "nan", "text": "x", "metadata": {"n": NaN}, "n": NaN}', "not a finite number"),
}
GOOD = '{"ID": "good", "title": "Zeppelin", "text": "fine text"}'


def jsonl(tmp_path: Path, name: str, lines: list[str], id_key: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(line.replace('"ID"', f'"{id_key}"') for line in lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("loader", [JsonRecordsLoader(), BeirCorpusLoader()], ids=["json_records", "beir_corpus"])
def test_a_bad_jsonl_line_is_one_failure_and_the_rest_loads(tmp_path: Path, loader: Loader, case: str) -> None:
    line, error = BAD[case]
    id_key = "_id" if isinstance(loader, BeirCorpusLoader) else "id"
    path = jsonl(tmp_path, "corpus.jsonl", [GOOD, line, GOOD.replace("good", "after")], id_key)
    docs, failures = loader.load(str(path))
    assert [d.id for d in docs] == ["good", "after"]
    assert len(failures) == 1 and failures[0].path == f"{path.as_posix()}:2"
    assert re.search(error, failures[0].error), failures[0]
    printable(failures)


@pytest.mark.parametrize("case", [c for c in BAD if "nested" not in c and "digit" not in c])
def test_a_bad_record_in_a_json_list_is_one_failure(tmp_path: Path, case: str) -> None:
    line, error = BAD[case]
    path = tmp_path / "r.json"
    path.write_text(f"[{GOOD}, {line}]".replace('"ID"', '"id"'), encoding="utf-8")
    docs, failures = JsonRecordsLoader().load(str(path))
    assert [d.id for d in docs] == ["good"]
    assert [f.path for f in failures] == [f"{path.as_posix()}: record 2"]
    printable(failures)


@pytest.mark.parametrize("data", ["[" * 100_000 + "]" * 100_000, '[{"id": "a", "text": "x", "n": ' + "7" * 5000 + "}]"])
def test_a_json_list_python_cannot_read_is_one_failure_not_a_crash(tmp_path: Path, data: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(data)
    docs, failures = JsonRecordsLoader().load(str(path))
    assert docs == [] and len(failures) == 1 and failures[0].path == path.as_posix()


def test_a_failure_never_carries_an_id_no_document_can_have(tmp_path: Path) -> None:
    lines = ['{"id": "\\ud83d", "text": "x"}', '{"id": "a\\tb", "text": "x"}', '{"id": "ok", "text": ""}']
    _, failures = JsonRecordsLoader().load(str(jsonl(tmp_path, "r.jsonl", lines, "id")))
    assert [f.doc_id for f in failures] == ["", "", "ok"]


def test_beir_metadata_and_titles_of_the_wrong_type_are_failures_not_dropped(tmp_path: Path) -> None:
    lines = [
        '{"_id": "m0", "text": "x", "metadata": 0}',
        '{"_id": "ml", "text": "x", "metadata": []}',
        '{"_id": "tf", "text": "x", "title": false}',
        '{"_id": "ok", "text": "x", "title": null, "metadata": null}',
    ]
    docs, failures = BeirCorpusLoader().load(str(jsonl(tmp_path, "corpus.jsonl", lines, "_id")))
    assert [(d.id, d.title, dict(d.metadata)) for d in docs] == [("ok", "", {})]
    assert [f.doc_id for f in failures] == ["m0", "ml", "tf"]


def test_a_jsonl_file_with_a_bom_loads_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "text": "first"}\n')
    assert [d.id for d in JsonRecordsLoader().run(str(path))] == ["a"]


# --- titles are searched ---------------------------------------------------------------


def test_json_record_titles_are_searched_and_beir_joins_them_the_same_way(tmp_path: Path) -> None:
    record = {"id": "z", "_id": "z", "title": "Zeppelin", "text": "hangar checks"}
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps(record) + "\n")
    [doc] = JsonRecordsLoader().run(str(path))
    assert "Zeppelin" in doc.text and doc.title == "Zeppelin"  # a title-only word is indexed
    assert doc.text == searchable_text("Zeppelin", "hangar checks", include_title=True)
    assert BeirCorpusLoader(include_title=True).run(str(path))[0].text == doc.text  # one helper for both
    assert JsonRecordsLoader(include_title=False).run(str(path))[0].text == "hangar checks"
    # a title indexed with a blank text is a document (TREC-COVID has such), without one it is blank
    path.write_text(json.dumps({"_id": "t", "title": "Only a title", "text": ""}) + "\n")
    assert BeirCorpusLoader(include_title=True).run(str(path))[0].text.startswith("Only a title")
    assert len(BeirCorpusLoader().load(str(path))[1]) == 1


# --- Markdown ---------------------------------------------------------------------------


def test_markdown_checks_every_document_it_makes(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext")
    (tmp_path / "zw.md").write_text("\u200b\n\u200b\n")  # nothing visible: would get no chunk
    (tmp_path / "tab\there.md").write_text("# Tab in the name\n")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["a"]
    assert [(Path(f.path).name, f.doc_id) for f in failures] == [("tab\there.md", ""), ("zw.md", "zw")]
    assert "text is blank" in failures[1].error and "control character" in failures[0].error


@pytest.mark.skipif(os.name != "posix", reason="file names of raw bytes are a POSIX thing")
def test_markdown_file_name_that_is_not_utf8_is_a_printable_failure(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext")
    try:
        (tmp_path / os.fsdecode(b"bad\xff.md")).write_text("# Bad name\n")  # Python holds \xff as '\udcff'
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["a"]
    [failure] = failures
    assert failure.path.endswith("bad\\xff.md") and failure.doc_id == "" and "not valid UTF-8" in failure.error
    printable(failures)


def test_markdown_front_matter_numbers_metadata_cannot_hold_stay_text(tmp_path: Path) -> None:
    text = f"---\nbig: {'9' * 5000}\nhuge: 1e999\nwide: 123456789012345678901234567890\nok: 42\n---\n# T\n"
    assert parse_front_matter(text) == {"big": "9" * 5000, "huge": "1e999", "wide": "1234567890" * 3, "ok": 42}
    (tmp_path / "t.md").write_text(text)
    [doc] = MarkdownLoader().run(str(tmp_path))
    assert doc.metadata["huge"] == "1e999"


# --- patterns stay inside their folder --------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "match"),
    [
        ("/etc/*.md", "must be relative to the folder"),
        ("/", "must be relative to the folder"),
        ("\\\\server\\share\\*.md", "must be relative to the folder"),
        ("~/*.md", "must be relative to the folder"),
        ("C:/docs/*.md", "must be relative to the folder"),
        ("../*.md", "must not contain '..'"),
        ("..", "must not contain '..'"),
        ("docs/../../*.md", "must not contain '..'"),
        ("**/..\\*.md", "must not contain '..'"),
    ],
)
def test_loader_patterns_stay_inside_their_folder(pattern: str, match: str) -> None:
    with pytest.raises(ValidationError, match=match) as info:
        MarkdownLoader(pattern=pattern)
    assert info.value.errors()[0]["loc"] == ("pattern",)  # the error names the setting


def test_a_pattern_reads_nothing_outside_its_folder(tmp_path: Path) -> None:
    (tmp_path / "outside.md").write_text("# Outside\n")
    inside = tmp_path / "docs"
    inside.mkdir()
    (inside / "in.md").write_text("# In\n")
    docs = MarkdownLoader(pattern="**/*.md").run(str(inside))
    assert [d.id for d in docs] == ["in"]
    assert MarkdownLoader(pattern="..*.md").config.pattern == "..*.md"  # a name, not a parent
