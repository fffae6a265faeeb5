"""Everything a plm stage needs, in one import: `import plm`.

A plugin is one module with one component class and a hook that registers it::

    import plm

    class Shout(plm.Reranker):
        name = "shout"

        class Config(plm.ComponentConfig):
            boost: float = 2.0

        def run(self, data: plm.Ranking) -> plm.Ranking:
            return plm.rescore(data, [self.config.boost * h.score for h in data.hits], self.label)

    @plm.hookimpl
    def plm_register_components(registry):
        registry.add(Shout)

plus an entry point in the package's pyproject (`[project.entry-points.plm] shout =
"my_package.shout"`). Then `use = "shout"` works in any config.

The face is one declared list, `plm/__init__.pyi`, in groups: the contracts (each family's
base class: `Loader`, `Converter`, `Chunker`, `ChunkTransform`, `Embedder`, `Tokenizer`,
`QueryExpander`, `Retrieval`, `Retriever`, `Fuser`, `RankingStage`, `Reranker`, `Store`,
`Executor`, `QueryGenerator`, `Evaluator`, `Reporter`, and `Index`, `SavedIndex`,
`SegmentedIndex` for a stage that keeps an index), the records they take and give, what the
runtime hands a stage and how a plugin registers, the errors, a few helpers for authors
(`top_n`, `rescore`, `fused_ranking`, `require_embedder`, `document_from_record`,
`compile_filters`) and the library API (`plm.Job.from_config(path)`, then `ingest`,
`retrieve`, `search`, `sync`, `close`). What only some stages need is in named submodules:
`plm.indexes`, `plm.documents`, `plm.filters`, `plm.remote`, `plm.models` (the model
locator), `plm.chat` (an LLM endpoint), `plm.synthetic` and `plm.testing` (the conformance
kit, for a plugin's own tests). Every built-in stage in `plm_plugins` imports plm's names
from here only, as a third party must: a test holds them to it.

Each name is imported on first use, so `import plm` loads neither the kernel's modules nor
the index runtime (`plm_index`) until a name needs them. Layers: plm_core < plm_index < plm <
plm_plugins (and plm_index, plm_eval, plm_serve never import `plm_plugins`).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any


def _declared() -> tuple[dict[str, str], tuple[str, ...]]:
    """The face as `__init__.pyi` declares it: name -> the module it comes from, and the
    named submodules."""
    names: dict[str, str] = {}
    submodules: list[str] = []
    for node in ast.parse(Path(__file__).with_name("__init__.pyi").read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module == __name__:
                    submodules.append(alias.name)
                else:
                    names[alias.asname or alias.name] = node.module
    return names, tuple(submodules)


_FROM, _SUBMODULES = _declared()
__all__ = sorted(_FROM)  # a submodule (plm.testing needs pytest) loads only when named


def __getattr__(name: str) -> Any:
    if name in _FROM:
        value = getattr(importlib.import_module(_FROM[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # found directly from now on: `plm.top_n` in a query path costs nothing
    return value


def __dir__() -> list[str]:
    """The face's names and its submodules (tab completion, `dir(plm)`)."""
    return sorted([*_FROM, *_SUBMODULES])
