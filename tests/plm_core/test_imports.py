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
    assert _loaded_after("import plm_core, plm_index.cli, plm_index.job, plm_core.config") == []


def test_loading_every_plugin_imports_no_heavy_model_library() -> None:
    loaded = _loaded_after("from plm_index.plugins import build_registry; build_registry()")
    assert not {"torch", "sentence_transformers", "spacy", "gliner", "transformers"} & set(loaded)


def test_the_kernel_and_the_plugin_face_load_no_runtime_module() -> None:
    runtime = "' '.join(m for m in sys.modules if m.startswith(('plm_index', 'plm_plugins')))"
    probe = f"import sys, plm, plm_core\nprint({runtime})"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == []


FIRST_PARTY = ("plm", "plm_core", "plm_index", "plm_plugins", "plm_eval", "plm_serve")


def _import_graph() -> dict[str, set[str]]:
    """module -> the first-party modules it imports anywhere in its text (top level, inside
    functions, under TYPE_CHECKING alike: each is a tie between the two)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    modules = {}
    for package in FIRST_PARTY:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                    for a in node.names
                ]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found


# package -> the first-party packages its modules may import (besides its own). The face
# `plm` re-exports the kernel and, lazily, the runtime's helpers and `Job`, so it sits above
# both; plugins see plm through its face only; eval and serve are applications of the runtime.
LAYERS = {
    "plm_core": set(),
    "plm_index": {"plm_core"},
    "plm": {"plm_core", "plm_index"},
    "plm_plugins": {"plm"},
    "plm_eval": {"plm_core", "plm_index", "plm"},
    "plm_serve": {"plm_core", "plm_index", "plm"},
}


def test_no_import_circle_and_layers_point_down() -> None:
    graph = _import_graph()
    assert set(LAYERS) == set(FIRST_PARTY)
    assert _circles(graph) == []
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if target.split(".")[0] != module.split(".")[0] and target.split(".")[0] not in LAYERS[module.split(".")[0]]
    )
    assert wrong == []


def test_the_layers_are_an_order() -> None:
    """Every allowed arrow points down a single order (no two packages may import each other)."""
    order = ["plm_core", "plm_index", "plm", "plm_plugins", "plm_eval", "plm_serve"]
    for package, below in LAYERS.items():
        assert all(order.index(b) < order.index(package) for b in below), package


def test_built_in_plugins_import_plm_names_from_the_face_only() -> None:
    """A built-in stage imports what a third party can: `plm` (and its own package's helpers),
    never the kernel or the runtime behind it."""
    graph = _import_graph()
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("plm_plugins")
        for target in targets
        if not (target == "plm" or target.startswith(("plm.", "plm_plugins")))
    )
    assert wrong == []


def test_library_users_find_job_on_the_face() -> None:
    import plm
    import plm_core
    from plm_index.job import Job

    assert plm.Job is Job
    assert not hasattr(plm_core, "Job")  # the kernel names nothing above it


def test_every_name_the_face_lists_is_there() -> None:
    import plm

    assert sorted(n for n in plm.__all__ if not hasattr(plm, n)) == []
    # dir() shows the names loaded on first use (tab completion), not the module's own imports
    assert {"rescore", "top_n", "Job", "testing"} <= set(dir(plm)) and "TYPE_CHECKING" not in dir(plm)
