"""`plm plugins` and `plm plugins show NAME`: every key of every built-in is documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from plm_core.plugin_info import describe_fields, render_show
from plm_core.registry import build_registry

REPO = Path(__file__).resolve().parents[2]


def test_every_builtin_config_key_has_type_default_and_description() -> None:
    registry = build_registry(autoload=False)
    undocumented = [
        f"{r.name}.{k.key}"
        for r in registry.all()
        for k in describe_fields(r.cls.Config)
        if not (k.description and k.type and k.default)
    ]
    assert undocumented == []


def test_show_bm25s_lists_every_key() -> None:
    registry = build_registry(autoload=False)
    reg = registry.get("bm25s")
    page = render_show(reg)
    for name, field in reg.cls.Config.model_fields.items():
        line = next(line for line in page.splitlines() if line.startswith(f"{name} : "))
        assert field.description and " ".join(field.description.split())[:30] in page, name
        assert "=" in line
    assert "k1 : float = 1.5 (>= 0)" in page


def test_nested_profiles_are_flattened() -> None:
    keys = {k.key for k in describe_fields(build_registry(autoload=False).get("rrf").cls.Config)}
    assert {"default.k", "default.weights", "expanded.candidates_factor"} <= keys


def test_plugins_piped_never_truncates_names() -> None:
    env = {**os.environ, "COLUMNS": "40"}
    res = subprocess.run(
        [sys.executable, "-m", "plm_core.cli", "plugins"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert res.returncode == 0 and "…" not in res.stdout
    names = {line.split()[0] for line in res.stdout.splitlines()[1:]}
    assert {"markdown_semantic", "sentence_transformers", "comparison_report"} <= names
    assert "plm_plugins.retrievers.bm25s" in res.stdout  # the module column
