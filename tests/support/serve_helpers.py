"""tests/plm_serve/test_server.py as a module (its `Server`, `plm`, `CONFIG`, `DOCS`), for the
other server tests: loaded once a process, under one name, whichever test asks first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "plm_serve_test_server"


def server_helpers() -> ModuleType:
    if NAME in sys.modules:
        return sys.modules[NAME]
    spec = importlib.util.spec_from_file_location(NAME, Path(__file__).parents[1] / "plm_serve" / "test_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module
