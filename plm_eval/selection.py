"""Which documents of a dataset an evaluation's index holds is part of that index's name: a
`--corpus` other than the config's own, or a loader's `pattern`, `ids` or `exclude` set on
the command line (`--set index.load.ids=stem`), gets an index folder of its own, so two
selections never share one (evaluating `--corpus md` then `--corpus html` had searched
both). The config's own selection keeps the plain name, so existing indexes stay found."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import tomllib

from plm_core.config import JobConfig
from plm_eval.settings import eval_settings

# The loader settings that choose which files become which documents.
SELECTION_KEYS = ("use", "pattern", "ids", "exclude", "include_title")


def _selection(load: dict[str, Any], corpus: str | None) -> dict[str, Any]:
    return {"corpus": corpus, "load": {k: load[k] for k in SELECTION_KEYS if k in load}}


def selection_suffix(config: JobConfig, corpus: str | None) -> str:
    """ "" for the config file's own selection, else ".sel-<digest>" naming the one in use."""
    load = dict(config.raw.get("index", {}).get("load", {}) or {})
    try:
        own = tomllib.loads(config.path.read_text(encoding="utf-8")).get("index", {}).get("load", {}) or {}
    except (OSError, tomllib.TOMLDecodeError):  # a config built in Python: its table is its own
        own = load
    if corpus is not None and corpus in list(eval_settings(config).corpus)[:1]:
        corpus = None  # the config's own first choice, named on the command line
    if corpus is None and _selection(load, None) == _selection(own, None):
        return ""
    key = json.dumps(_selection(load, corpus), sort_keys=True, default=str)
    return ".sel-" + hashlib.sha256(key.encode()).hexdigest()[:8]
