"""Every format, measured (issue 48): the SciFact corpus written as Markdown, HTML, PDF and
Word files (generated into a temporary folder, never the repo), then

0. a mixed folder of `--mixed` files (a quarter of each format) ingested with the recommended
   recipe on an empty content cache, its time split by stage;
1. conversion throughput: each built-in converter against its raw library alone, on the
   same files in the same run (PDF: pypdfium2 opening the file and reading each page's text;
   Word: python-docx reading every paragraph; HTML: the standard library's HTMLParser
   collecting text; median of `--repeats` passes);
2. format parity: each format's folder ingested with `configs/recommended.toml` (the folder
   loader, MiniLM + BM25; the content cache shares the vectors of equal chunk texts between
   formats), SciFact's test queries whose judged documents are among them run, nDCG@10 per
   format (ir-measures); the same texts must score within 0.01.

    HF_HUB_OFFLINE=1 PLM_DATA_DIR=/tmp/plm-formats python bench/bench_formats.py --docs 2000 \
        --repeats 3 --json bench/results/formats.json
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "tests" / "support"))
SCIFACT = REPO.parent / "shared" / "datasets" / "scifact"

RECIPE = REPO / "configs" / "recommended.toml"


def recipe(fmt: str) -> str:
    """configs/recommended.toml as it is, named for the format, without its dataset lines."""
    lines = RECIPE.read_text().splitlines()
    kept = [line for line in lines if not line.startswith(("dataset =", "corpus =", "queries ="))]
    return "\n".join(kept).replace('name = "recommended"', f'name = "formats_{fmt}"') + "\n"


def write_corpus(docs: list[dict], root: Path) -> dict[str, Path]:
    import docx
    from documents import pdf_bytes

    folders = {fmt: root / fmt for fmt in ("md", "html", "pdf", "docx")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    for d in docs:
        # What Helvetica's WinAnsi encoding holds, in every format alike: the PDF writer here
        # has no other font, and parity compares converters, not fonts.
        title, text = (d[k].encode("cp1252", "replace").decode("cp1252") for k in ("title", "text"))
        doc_id = d["_id"]
        (folders["md"] / f"{doc_id}.md").write_text(f"# {title}\n\n{text}\n")
        (folders["html"] / f"{doc_id}.html").write_text(
            f"<html><head><title>{title}</title></head><body><nav>menu</nav><main><h1>{title}</h1>"
            f"<p>{text}</p></main></body></html>"
        )
        (folders["pdf"] / f"{doc_id}.pdf").write_bytes(pdf_bytes([[text]], title=title))
        document = docx.Document()
        document.add_paragraph(title, style="Title")
        document.add_paragraph(text)
        document.save(str(folders["docx"] / f"{doc_id}.docx"))
    return folders


def raw_pdf(data: bytes) -> str:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(data)
    out = []
    for i in range(len(pdf)):
        page = pdf[i]
        textpage = page.get_textpage()
        out.append(textpage.get_text_bounded())
        textpage.close()
        page.close()
    pdf.close()
    return "\f".join(out)


def raw_docx(data: bytes) -> str:
    import docx

    return "\n".join(p.text for p in docx.Document(io.BytesIO(data)).paragraphs)


def raw_html(data: bytes) -> str:
    from html.parser import HTMLParser

    parts: list[str] = []
    parser = HTMLParser()
    parser.handle_data = parts.append  # type: ignore[method-assign,assignment]
    parser.feed(data.decode("utf-8"))
    parser.close()
    return "".join(parts)


def timed(fn: Callable[[bytes], object], blobs: list[bytes], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for blob in blobs:
            fn(blob)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def throughput(folders: dict[str, Path], repeats: int, files: int) -> dict[str, dict[str, float]]:
    from plm_plugins.converters.docx import DocxConverter
    from plm_plugins.converters.html import HtmlConverter
    from plm_plugins.converters.pdf import PdfConverter

    pairs = {
        "pdf": (PdfConverter(), raw_pdf),
        "docx": (DocxConverter(), raw_docx),
        "html": (HtmlConverter(), raw_html),
    }
    out = {}
    for fmt, (converter, raw) in pairs.items():
        blobs = [p.read_bytes() for p in sorted(folders[fmt].iterdir())[:files]]
        converter.convert(blobs[0], ""), raw(blobs[0])  # imports and first-call set-up, for neither to pay
        plm_runs, raw_runs = [], []
        for _ in range(repeats):  # alternating, so both see the same machine
            plm_runs.append(timed(functools.partial(converter.convert, path=""), blobs, 1))
            raw_runs.append(timed(raw, blobs, 1))
        ours, theirs = statistics.median(plm_runs), statistics.median(raw_runs)
        out[fmt] = {
            "files": len(blobs),
            "plm_files_per_s": round(len(blobs) / ours, 1),
            "raw_files_per_s": round(len(blobs) / theirs, 1),
            "ratio": round(theirs / ours, 3),
        }
        print(fmt, out[fmt], flush=True)
    return out


def parity(folders: dict[str, Path], ids: set[str], work: Path) -> dict[str, dict[str, float]]:
    import ir_measures
    from ir_measures import nDCG

    import plm

    queries = [json.loads(line) for line in (SCIFACT / "queries.jsonl").open()]
    qrels = [
        ir_measures.Qrel(q, d, int(s))
        for q, d, s in (line.rstrip("\n").split("\t") for line in list((SCIFACT / "qrels" / "test.tsv").open())[1:])
        if d in ids
    ]
    wanted = {q.query_id for q in qrels}
    out = {}
    for fmt, folder in folders.items():
        config = work / f"formats_{fmt}.toml"
        config.write_text(recipe(fmt))
        job = plm.Job.from_config(config, index_dir=work / f"index_{fmt}")
        start = time.perf_counter()
        report = job.ingest([folder])
        seconds = time.perf_counter() - start
        run = []
        for q in queries:
            if q["_id"] not in wanted:
                continue
            for hit in job.retrieve(q["text"], k=10):
                doc = hit.doc_id.rsplit(".", 1)[0] if fmt != "md" else hit.doc_id
                run.append(ir_measures.ScoredDoc(q["_id"], doc, hit.score))
        job.close()
        score = ir_measures.calc_aggregate([nDCG @ 10], qrels, run)[nDCG @ 10]
        out[fmt] = {
            "documents": len(report.added),
            "failed": len(report.failed),
            "ingest_s": round(seconds, 1),
            "read_s": round(report.timings.get("read", 0.0), 1),
            "nDCG@10": round(score, 4),
        }
        print(fmt, out[fmt], flush=True)
    return out


def mixed(folders: dict[str, Path], n: int, work: Path) -> dict[str, object]:
    """One folder of `n` files, a quarter of each format (each document once), ingested with
    the recommended recipe before anything else has filled the content cache: where the time goes."""
    import shutil

    import plm

    root = work / "mixed"
    root.mkdir()
    formats = list(folders)
    files = {fmt: sorted(folders[fmt].iterdir()) for fmt in formats}
    for i in range(min(n, len(files[formats[0]]))):
        source = files[formats[i % len(formats)]][i]
        shutil.copy(source, root / source.name)
    config = work / "formats_mixed.toml"
    config.write_text(recipe("mixed"))
    job = plm.Job.from_config(config, index_dir=work / "index_mixed")
    report = job.ingest([root])
    job.close()
    out = {"files": len(report.added), "seconds": round(report.seconds, 1), "timings_s": report.as_dict()["timings_s"]}
    print("mixed", out, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=5183, help="the first N SciFact documents")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--throughput-files", type=int, default=500, help="files of each format timed")
    parser.add_argument("--mixed", type=int, default=1000, help="files in the mixed folder (a quarter of each format)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with (SCIFACT / "corpus.jsonl").open() as lines:
        docs = [json.loads(line) for _, line in zip(range(args.docs), lines, strict=False)]
    with tempfile.TemporaryDirectory(prefix="plm-formats-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        folders = write_corpus(docs, work / "corpus")
        print(f"wrote {len(docs)} documents in 4 formats in {time.perf_counter() - start:.1f}s", flush=True)
        result = {
            "documents": len(docs),
            "mixed": mixed(folders, args.mixed, work),
            "throughput": throughput(folders, args.repeats, args.throughput_files),
            "parity": parity(folders, {d["_id"] for d in docs}, work),
        }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
