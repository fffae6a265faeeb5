"""The face is one declared list (`plm/__init__.pyi`), grouped, and enough: every family's
base is on it, and a third party's stage never needs a private import."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import plm
from plm_index.plugins import build_registry

REPO = Path(__file__).resolve().parents[2]
STUB = REPO / "plm" / "__init__.pyi"
GROUPS = ["Contracts", "Records", "What the runtime hands a stage", "Errors", "Helpers for authors", "The library API"]


def _declared() -> dict[str, str]:
    return {
        alias.asname or alias.name: node.module or ""
        for node in ast.parse(STUB.read_text()).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_every_declared_name_is_the_object_it_names() -> None:
    for name, module in _declared().items():
        if module == "plm":
            assert getattr(plm, name) is importlib.import_module(f"plm.{name}"), name
        else:
            assert getattr(plm, name) is getattr(importlib.import_module(module), name), name
    assert sorted(plm.__all__) == sorted(n for n, m in _declared().items() if m != "plm")


def test_the_list_is_grouped_and_the_module_holds_no_other_list() -> None:
    text = STUB.read_text()
    positions = [text.index(f"# --- {group}") for group in GROUPS]
    assert positions == sorted(positions)
    # The module reads the stub: no name of the face is written in plm/__init__.py's code.
    code = ast.parse((REPO / "plm" / "__init__.py").read_text())
    strings = {n.value for n in ast.walk(code) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not strings & set(_declared()), strings & set(_declared())


def test_every_family_base_is_a_declared_contract() -> None:
    contracts = STUB.read_text().split("# --- Records")[0]
    for reg in build_registry().all():
        base = next(k for k in reg.cls.__mro__ if k.__module__.startswith(("plm_", "plm.")) and "family" in vars(k))
        if base.__module__.startswith(("plm_core", "plm_index", "plm.")):
            assert f"import {base.__name__} as {base.__name__}" in contracts, (reg.name, base.__name__)


def test_runtime_internals_are_not_on_the_face() -> None:
    for name in ("State", "Rows", "Picked", "inside", "IDS_FILE", "scrub", "check_id", "as_date"):
        assert name not in plm.__all__ and not hasattr(plm, name), name
    assert plm.indexes.State.__name__ == "State" and plm.documents.inside and plm.remote.scrub


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_third_party_stages_import_the_face_only() -> None:
    """The example plugins and the store written from the docs (tests/support/dict_store.py)
    import `plm` and its named submodules, nothing private."""
    paths = [
        *(REPO / "examples").glob("*/plm_example_*/*.py"),
        *(REPO / "examples").glob("*/plm_example_*.py"),
        REPO / "tests" / "support" / "dict_store.py",
    ]
    assert len(paths) >= 4
    private = {
        f"{p.relative_to(REPO)} -> {m}"
        for p in paths
        for m in _imports(p)
        if m.split(".")[0] in {"plm_core", "plm_index", "plm_plugins", "plm_eval", "plm_serve"}
    }
    assert private == set()


def test_every_family_refuses_a_stage_missing_a_method_when_it_is_defined() -> None:
    import pytest

    contracts = STUB.read_text().split("# --- Records")[0]
    names = [n for n, m in _declared().items() if f"import {n} as {n}" in contracts and n != "ComponentConfig"]
    families = [getattr(plm, n) for n in names if issubclass(getattr(plm, n), plm.BaseComponent)]
    assert len(families) >= 17
    for base in families:
        if base is plm.BaseComponent:
            continue
        with pytest.raises(TypeError, match=r"must implement \(the \w+ contract: docs/contracts/"):
            type("Empty", (base,), {"name": "empty", "__module__": "a_third_party"})
    for mixin in (plm.SavedIndex, plm.SegmentedIndex):  # an index a retriever keeps
        with pytest.raises(TypeError, match="must implement"):
            type("Empty", (mixin, plm.Retriever), {"name": "empty", "__module__": "a_third_party"})


def test_the_runtime_special_cases_no_component_by_name() -> None:
    """The runtime, evaluation and the server reach a stage by what a config names or by what
    it can do, never by testing for one name: a default may name one (`use = "sqlite"` when a
    config has no [store]), a branch may not."""
    import re

    branch = re.compile(r"""\.use\s*[!=]=\s*["']|registry\(\)\.get\(\s*["']|\b(?:executor|use)\s*[!=]=\s*["']\w+["']""")
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for package in ("plm_core", "plm_index", "plm_eval", "plm_serve")
        for path in (REPO / package).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if branch.search(line)
    ]
    assert found == []
