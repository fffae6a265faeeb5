"""`needs(...)`: skip tests whose optional packages are not installed, without importing them.

A module-level `pytest.importorskip("spacy")` imports spaCy (and torch behind it) while
pytest collects, so every run pays for it, even one that selects none of the module's
tests; `find_spec` only looks the package up. `tests/conftest.py` puts this folder on
sys.path, so a test module writes `from plm_needs import needs`."""

from __future__ import annotations

import importlib.util

import pytest


def needs(*modules: str, extra: str | None = None) -> pytest.MarkDecorator:
    """A skipif mark: skip unless every one of `modules` can be imported."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    hint = f" (pip install 'plm[{extra}]')" if extra else ""
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}{hint}")
