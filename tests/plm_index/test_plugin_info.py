"""`plm plugins` and `plm plugins show NAME`: every key of every built-in is documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from plm_core.component import ComponentConfig
from plm_core.errors import PluginError
from plm_core.registry import Registration, Registry
from plm_index.plugin_info import attribute_docs, describe_fields, plugin_rows, render_show, toml_text, type_text
from plm_index.plugins import build_registry

REPO = Path(__file__).resolve().parents[2]


def _config(reg: Registration) -> type[BaseModel]:
    config: type[BaseModel] = reg.cls.Config  # type: ignore[attr-defined]
    return config


@pytest.fixture(scope="module")
def registry() -> Registry:
    return build_registry(autoload=False)


def test_every_builtin_config_key_has_type_default_and_description(registry: Registry) -> None:
    builtins = [r for r in registry.all() if r.package == "plm"]
    assert len(builtins) >= 19
    undocumented = [
        f"{r.cls.__module__}: {r.name}.{k.name}"
        for r in builtins
        for k in describe_fields(_config(r))
        if not (k.description.strip() and k.type and k.default)
    ]
    assert undocumented == [], "give these config keys a docstring under the field:\n" + "\n".join(undocumented)


def test_show_bm25s_lists_every_key_with_type_default_and_description(registry: Registry) -> None:
    reg = registry.get("bm25s")
    page = render_show(reg)
    header, blank, columns, *rows = page.splitlines()
    assert header.startswith("bm25s (retrievers), plm ") and "plm_plugins.retrievers.bm25s.BM25Retriever" in header
    assert header.endswith(": Sparse lexical retrieval; ranks by the full score vector like the POC.")
    assert blank == "" and columns.split() == ["key", "type", "default", "description"]
    fields = _config(reg).model_fields
    assert [row.split()[0] for row in rows] == list(fields)
    for row, (name, field) in zip(rows, fields.items(), strict=True):
        description = " ".join((field.description or attribute_docs(_config(reg)).get(name, "")).split())
        assert description, name
        assert row.startswith(f"{name} ") and row.endswith(description), row
        assert f"  {type_text(field.annotation)}" in row, row
        assert f"  {toml_text(field.get_default(call_default_factory=True))}  " in row, row
    line = {row.split()[0]: row for row in rows}
    assert line["k1"].split()[:4] == ["k1", "float", "(>=", "0)"] and "  1.5  " in line["k1"]
    assert "float (>= 0, <= 1)" in line["b"]
    assert "'float64' | 'float32'" in line["dtype"] and '"float64"' in line["dtype"]
    assert "(unset)" in line["drop_zero_scores"]


def test_nested_profiles_are_flattened_with_their_effective_defaults(registry: Registry) -> None:
    keys = {k.name: k for k in describe_fields(_config(registry.get("rrf")))}
    assert [n for n in keys if n.startswith("default")] == [
        "default",
        "default.k",
        "default.weights",
        "default.candidates_factor",
    ]
    assert keys["default"].default == "(table)" and keys["default"].type == "Profile"
    assert keys["default.k"].default == "60.0" and keys["default.k"].constraints == "> 0, <= 1000000000"
    assert keys["default.weights"].type == "dict[str, float]"
    assert keys["default.weights"].default == "{ dense = 1.0, bm25 = 1.0 }"
    assert keys["default.weights"].constraints.startswith("values >= 0")
    # `expanded` defaults to the POC's expanded profile, not to Profile's own defaults.
    assert keys["expanded"].type == "Profile | None"
    assert (keys["expanded.k"].default, keys["expanded.candidates_factor"].default) == ("10.0", "20")
    assert keys["expanded.weights"].default == "{ dense = 0.3, bm25 = 3.0 }"
    # A table of profiles: what a new one gets by leaving a key out.
    assert keys["profiles"].default == "{}"
    assert keys["profiles.<name>.k"].default == "60.0"
    assert all(k.description for k in keys.values())
    page = render_show(registry.get("rrf"))
    assert any(line.startswith("expanded.k ") and "  10.0  " in line for line in page.splitlines())


def test_required_keys_and_the_module_column(registry: Registry) -> None:
    keys = {k.name: k for k in describe_fields(_config(registry.get("hybrid")))}
    assert keys["retrievers"].default == "(required)"
    rows = {r["name"]: r for r in plugin_rows(registry)}
    assert rows["bm25s"] == {
        "name": "bm25s",
        "family": "retrievers",
        "package": "plm",
        "version": rows["bm25s"]["version"],
        "class": "BM25Retriever",
        "module": "plm_plugins.retrievers.bm25s",
    }
    assert {r.name for r in registry.all()} == set(rows)


def test_unknown_name_is_the_registrys_error(registry: Registry) -> None:
    with pytest.raises(PluginError, match=r"unknown component 'bm25'.*Known: .*bm25s"):
        registry.get("bm25")


def test_type_and_toml_text() -> None:
    assert type_text(Literal["float64", "float32"]) == "'float64' | 'float32'"
    assert type_text(str | None) == "str | None"
    assert type_text(list[str]) == "list[str]"
    assert type_text(dict[str, int]) == "dict[str, int]"
    assert toml_text('a "b"') == '"a \\"b\\""'
    assert toml_text(None) == "(unset)"
    assert (toml_text(True), toml_text(3), toml_text(0.5)) == ("true", "3", "0.5")
    assert toml_text(["x", 1]) == '["x", 1]'
    assert toml_text({"a b": 1, "c": {}}) == '{ "a b" = 1, c = {} }'


class Inner(BaseModel):
    depth: int = 2


class Thing:
    """A plugin
    whose summary is wrapped.

    Details nobody reads here."""

    class Config(ComponentConfig):
        size: int = Field(3, ge=1, le=9)
        names: list[Inner] = []
        mode: str


def test_a_third_party_config_without_descriptions_still_renders() -> None:
    page = render_show(Registration("thing", "stage", Thing, "acme-plm", "1.2", "thing"))
    lines = page.splitlines()
    assert lines[0].endswith(", acme-plm 1.2, " + f"{__name__}.Thing: A plugin whose summary is wrapped.")
    assert [line.split()[0] for line in lines[3:]] == ["size", "names", "names[].depth", "mode"]
    assert "int (>= 1, <= 9)" in lines[3] and lines[3].endswith("(no description)")
    assert "(required)" in lines[-1]

    class Bare:
        pass

    assert render_show(Registration("bare", "stage", Bare, "x", "", "bare")).splitlines()[-1] == "no config keys"


def test_plugins_piped_never_truncates_names() -> None:
    env = {**os.environ, "COLUMNS": "40"}
    res = subprocess.run(
        [sys.executable, "-m", "plm_index.cli", "plugins"],
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
