"""The core stays light: importing it, or listing every plugin, loads no ML library."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "numpy", "sentence_transformers", "spacy", "bm25s", "yake", "gliner", "transformers")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_core_imports_no_ml_library() -> None:
    assert _loaded_after("import plm_core, plm_core.cli, plm_core.job, plm_core.config") == []


def test_loading_every_plugin_imports_no_heavy_model_library() -> None:
    loaded = _loaded_after("from plm_core.registry import build_registry; build_registry()")
    assert not {"torch", "sentence_transformers", "spacy", "gliner", "transformers"} & set(loaded)
