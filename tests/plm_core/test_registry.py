from __future__ import annotations

import types

import pytest

from plm_core.component import BaseComponent
from plm_core.errors import PluginError
from plm_core.hookspecs import hookimpl
from plm_core.registry import Registry
from plm_index.plugins import build_registry


class Thing(BaseComponent[object, object]):
    name = "thing"
    family = "fuser"


def _plugin(cls: type) -> types.ModuleType:
    mod = types.ModuleType(f"plugin_{cls.__name__}")

    @hookimpl
    def plm_register_components(registry: Registry) -> None:
        registry.add(cls)

    mod.plm_register_components = plm_register_components  # type: ignore[attr-defined]
    return mod


def test_builtins_are_registered_through_entry_points() -> None:
    reg = build_registry(autoload=False)
    names = {(r.family, r.name) for r in reg.all()}
    for expected in [("stores", "sqlite"), ("evaluators", "ir_metrics")]:
        assert expected in names
    assert {r.package for r in reg.all()} == {"plm"}


def test_direct_plugin_registers_and_is_found() -> None:
    reg = build_registry([_plugin(Thing)], autoload=False)
    assert reg.get("thing").cls is Thing
    assert reg.get("fuser:thing").cls is Thing


def test_duplicate_name_names_both_packages() -> None:
    class Other(Thing):
        pass

    with pytest.raises(PluginError) as info:
        build_registry([_plugin(Thing), _plugin(Other)], autoload=False)
    msg = str(info.value)
    assert "duplicate fuser name 'thing'" in msg
    assert msg.count("package") == 2


def test_unknown_name_lists_known_and_closest() -> None:
    reg = build_registry(autoload=False)
    with pytest.raises(PluginError) as info:
        reg.get("sqlit")
    msg = str(info.value)
    assert "Did you mean 'sqlite'?" in msg and "Known:" in msg and "ir_metrics" in msg


def test_same_name_in_two_families_is_ambiguous_until_qualified() -> None:
    class Twin(BaseComponent[object, object]):
        name = "thing"
        family = "reranker"

    reg = build_registry([_plugin(Thing), _plugin(Twin)], autoload=False)
    with pytest.raises(PluginError, match="ambiguous"):
        reg.get("thing")
    assert reg.get("reranker:thing").cls is Twin


def test_a_missing_dependency_says_how_to_install_it() -> None:
    from plm_core.errors import MissingDependencyError

    assert (
        str(MissingDependencyError("bm25s", "bm25"))
        == "bm25s is not installed. Install it with: pip install 'plm[bm25]'"
    )
    # a third party's stage names its own package, not a plm extra that does not exist
    third = MissingDependencyError("rapidfuzz", install="pip install 'my-package[fuzzy]'")
    assert str(third) == "rapidfuzz is not installed. Install it with: pip install 'my-package[fuzzy]'"
    assert str(MissingDependencyError("rapidfuzz")).endswith("Install it with: pip install rapidfuzz")
