"""The `folder` loader on a mixed folder, as a new user's: every format some converter reads
becomes a document with its structure, the rest is counted by extension, a file that cannot
be read is one failure, a folder is a filter, a PDF hit says its page, and a sync redoes
only what changed (or everything, when a converter changes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from documents import write_docx, write_notebook, write_pdf

import plm
from plm import Converted, Converter, Registry
from plm_index.plugins import build_registry
from plm_plugins.converters.pdf import PdfConverter

REPO = Path(__file__).resolve().parents[3]
CONFIG = """
[job]
name = "mixed"
[store]
use = "sqlite"
[index.load]
use = "folder"
{load}
[index.chunk]
use = "markdown_semantic"
headings = "commonmark"
setext_headings = true
[query.retrieve]
use = "bm25s"
tokenizer = "bm25s_stem"
"""


def page_words(tag: str, n: int = 400) -> str:
    return " ".join(f"{tag}{i % 7}" if i % 5 else tag for i in range(n)) + "."


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "library"
    (root / "docs" / "deployment" / "helm").mkdir(parents=True)
    (root / "papers").mkdir()
    (root / "img").mkdir()
    (root / "docs" / "index.md").write_text(
        "# Welcome { #welcome }\n\nThe quokka service.\n\n"
        "```bash\n# install the quokka package\npip install quokka\n```\n"
    )
    (root / "docs" / "deployment" / "helm" / "chart.md").write_text("# Deploy with Helm\n\nhelm install quokka\n")
    (root / "docs" / "notes.txt").write_text("Release notes: zebra mode.\n")
    (root / "docs" / "faq.html").write_text(
        "<title>FAQ</title><script>var s='scriptword'</script><nav>navword</nav><main><h1>FAQ</h1>"
        "<p>The giraffe is slow.</p></main>"
    )
    (root / "docs" / "guide.rst").write_text("Guide\n=====\n\nThe pelican handles uploads.\n")
    write_pdf(root / "papers" / "paper.pdf", [[page_words("alpha")], [page_words("beta")], [page_words("gamma")]],
              title="Three pages", author="Ann")  # fmt: skip
    write_docx(root / "papers" / "report.docx", [("Title", "Quarterly report"), ("", "The armadillo grew.")])
    write_notebook(root / "papers" / "analysis.ipynb", [("markdown", "# Analysis\n\nThe ocelot data.")])
    for name in ("a.png", "b.png", "c.svg"):
        (root / "img" / name).write_bytes(b"\x89PNG")
    return root


def job_for(tmp_path: Path, load: str = "") -> plm.Job:
    config = tmp_path / "mixed.toml"
    config.write_text(CONFIG.format(load=load))
    return plm.Job.from_config(config, index_dir=tmp_path / "index")


def test_every_format_becomes_a_document_and_the_rest_is_counted(folder: Path, tmp_path: Path) -> None:
    job = job_for(tmp_path)
    report = job.ingest([folder])
    assert sorted(report.added) == [
        "docs/deployment/helm/chart", "docs/faq.html", "docs/guide.rst", "docs/index", "docs/notes.txt",
        "papers/analysis.ipynb", "papers/paper.pdf", "papers/report.docx",
    ]  # fmt: skip
    assert report.unread == {".png": ["img/a.png", "img/b.png"], ".svg": ["img/c.svg"]}
    assert report.summary().endswith("; skipped 2 .png, 1 .svg: no converter")
    assert job.retrieve("giraffe", k=1)[0].doc_id == "docs/faq.html"
    assert job.retrieve("navword scriptword", k=5) == []
    hit = job.retrieve("armadillo", k=1)[0]
    assert (hit.doc_id, hit.metadata["title"], hit.metadata["format"]) == (
        "papers/report.docx",
        "Quarterly report",
        "docx",
    )
    welcome = job.retrieve("quokka service", k=1)[0]
    assert welcome.metadata["title"] == "Welcome"  # its `{ #welcome }` left out, and no heading from the code:
    assert welcome.heading_path == () and "# install the quokka package\npip install" in welcome.text
    job.close()


def test_a_folder_is_a_filter_and_a_pdf_hit_says_its_page(folder: Path, tmp_path: Path) -> None:
    job = job_for(tmp_path)
    job.ingest([folder])
    hits = job.retrieve("quokka", k=5, filters={"folder": "docs/deployment"})
    assert [h.doc_id for h in hits] == ["docs/deployment/helm/chart"]
    assert {h.doc_id for h in job.retrieve("quokka", k=5, filters={"folder": "docs"})} == {
        "docs/index", "docs/deployment/helm/chart",
    }  # fmt: skip
    for word, page in (("alpha", 1), ("beta", 2), ("gamma", 3)):
        hit = job.retrieve(word, k=1)[0]
        assert (hit.doc_id, hit.metadata["page"]) == ("papers/paper.pdf", page), word
    assert {h.metadata["page"] for h in job.retrieve("gamma", k=5, filters={"page": {"gte": 3}})} == {3}
    job.close()


def test_hostile_names_are_counted_escaped(folder: Path, tmp_path: Path) -> None:
    (folder / "img" / "forged.x\nadded 99").write_bytes(b"x")
    (folder / "img" / os.fsdecode(b"bad\xffname.bin")).write_bytes(b"x")
    report = job_for(tmp_path).ingest([folder])
    assert "\n" not in report.summary() and ".x\\nadded 99" in report.unread
    assert report.unread[".bin"] == ["img/bad\\xffname.bin"]
    json.dumps(report.as_dict())  # printable as --json gives it


def test_files_that_cannot_be_read_are_failures_and_the_rest_goes_in(folder: Path, tmp_path: Path) -> None:
    write_pdf(folder / "papers" / "scan.pdf", [["x"]], text_layer=False)
    (folder / "papers" / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (folder / "papers" / "cut.ipynb").write_text('{"cells": [')
    report = job_for(tmp_path).ingest([folder])
    errors = {f.path.rsplit("/", 1)[-1]: f.error for f in report.failed}
    assert sorted(errors) == ["broken.docx", "cut.ipynb", "scan.pdf"]
    assert "OCR is not built in" in errors["scan.pdf"]
    assert "not a Word .docx file" in errors["broken.docx"]
    assert "not a readable notebook" in errors["cut.ipynb"]
    assert len(report.added) == 8


def test_a_sync_reads_what_changed_and_a_new_converter_version_reads_all(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = job_for(tmp_path)
    job.ingest([folder])
    again = job.ingest([folder])
    assert (again.added, again.updated, again.unchanged) == ([], [], 8)
    write_pdf(folder / "papers" / "paper.pdf", [[page_words("delta")]])
    changed = job.ingest([folder])
    assert (changed.updated, changed.unchanged) == (["papers/paper.pdf"], 7)
    assert job.retrieve("delta", k=1)[0].doc_id == "papers/paper.pdf"
    job.close()
    monkeypatch.setattr(PdfConverter, "version", lambda self: "pypdfium2 99.0")
    job = job_for(tmp_path)
    redone = job.ingest([folder])
    assert (len(redone.updated), redone.unchanged) == (8, 0)
    job.close()


class CsvConverter(Converter):
    name = "csv_rows"
    extensions = (".csv",)

    def convert(self, data: bytes, path: str) -> Converted:
        rows = [line.split(",") for line in data.decode().splitlines()]
        return Converted("\n".join(" | ".join(r) for r in rows), title=rows[0][0], metadata={"rows": len(rows)})


class LoudText(Converter):
    name = "loud_text"
    extensions = (".txt",)

    def convert(self, data: bytes, path: str) -> Converted:
        return Converted(data.decode().upper())


def test_a_third_party_adds_a_format_with_one_class(folder: Path, tmp_path: Path) -> None:
    (folder / "docs" / "table.csv").write_text("species,speed\nsloth,slow\n")
    registry: Registry = build_registry(autoload=True)
    registry.add(CsvConverter)
    registry.add(LoudText)  # a third party's converter of an extension wins over the built-in
    config = tmp_path / "mixed.toml"
    config.write_text(CONFIG.format(load=""))
    job = plm.Job.from_config(config, index_dir=tmp_path / "index", registry=registry)
    report = job.ingest([folder])
    assert "docs/table.csv" in report.added and ".csv" not in report.unread
    hit = job.retrieve("sloth", k=1)[0]
    assert (hit.doc_id, hit.metadata["title"], hit.metadata["rows"]) == ("docs/table.csv", "species", 2)
    assert "ZEBRA MODE" in job.retrieve("zebra", k=1)[0].text
    job.close()


def test_converter_settings_are_checked_by_name(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(plm.ConfigError, match=r"converters: no converter named 'pfd'; installed: .*pdf"):
        job_for(tmp_path, "converters = { pfd = { max_pages = 3 } }").ingest([folder])
    with pytest.raises(plm.ConfigError, match=r"converters.pdf: max_pages: Input should be greater than"):
        job_for(tmp_path, "converters = { pdf = { max_pages = 0 } }").ingest([folder])
    report = job_for(tmp_path, "converters = { pdf = { max_pages = 2 } }").ingest([folder])
    assert [f.error for f in report.failed] == [
        "3 pages, over the pdf converter's max_pages = 2; raise it to read this file"
    ]


def test_the_cli_says_what_it_skipped(folder: Path, tmp_path: Path) -> None:
    config = tmp_path / "mixed.toml"
    config.write_text(CONFIG.format(load=""))
    env = {**os.environ, "PLM_PROGRESS": "0", "PLM_DATA_DIR": str(tmp_path / "data")}
    run = [sys.executable, "-m", "plm_index.cli", "ingest", str(folder), "--config", str(config)]
    res = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "added 8, updated 0" in res.stdout and "skipped 2 .png, 1 .svg: no converter" in res.stdout
    res = subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(res.stdout)["unread"] == {".png": ["img/a.png", "img/b.png"], ".svg": ["img/c.svg"]}
    (tmp_path / "only_images").mkdir()
    (tmp_path / "only_images" / "x.png").write_bytes(b"x")
    res = subprocess.run([*run[:4], str(tmp_path / "only_images"), *run[5:]], capture_output=True, text=True, env=env)
    assert res.returncode != 0 and "no file here has a converter (1 .png)" in res.stderr
