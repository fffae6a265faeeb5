"""What `plm plugins` and `plm plugins show NAME` print: every registered component, and a
component's config keys with type, default, constraints and description, read from its
pydantic Config (a docstring under a field, or `Field(description=...)`), so a user never
reads code to write a config."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo as PydanticField
from pydantic_core import PydanticUndefined

from plm_core.registry import Registration, Registry


@dataclass(frozen=True)
class KeyInfo:
    """One config key as a user writes it in TOML."""

    key: str  # dotted for nested tables: "default.k"
    type: str
    default: str
    description: str
    constraints: str = ""


def type_text(tp: Any) -> str:
    """A readable type: `int`, `'a' | 'b'`, `list[str]`, `str | None`, `dict[str, Profile]`."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is not None and args:
        if getattr(origin, "__name__", "") == "Annotated":
            return type_text(args[0])
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_text(a) for a in args)}]"
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", str(tp))


def _default(field: PydanticField) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "(required)"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, default=str)


def _constraints(field: PydanticField) -> str:
    words = []
    for item in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("min_length", "min length")):
            value = getattr(item, attr, None)
            if value is not None:
                words.append(f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            words.append(f"matches {pattern}")
    return ", ".join(words)


def describe_fields(model: type[BaseModel], prefix: str = "") -> list[KeyInfo]:
    """Every key of a config model, nested models flattened (`default.k`)."""
    keys: list[KeyInfo] = []
    for name, field in model.model_fields.items():
        tp = field.annotation
        keys.append(
            KeyInfo(
                prefix + name,
                type_text(tp),
                _default(field),
                " ".join((field.description or "").split()),
                _constraints(field),
            )
        )
        nested = [a for a in (tp, *get_args(tp)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if nested:
            keys.extend(describe_fields(nested[0], f"{prefix}{name}."))
    return keys


def plugin_rows(registry: Registry) -> list[dict[str, str]]:
    """One row per registered component, with the module that defines it."""
    return [
        {
            "name": r.name,
            "family": r.family,
            "package": r.package,
            "version": r.version,
            "class": r.cls.__name__,
            "module": r.cls.__module__,
        }
        for r in registry.all()
    ]


def render_show(reg: Registration) -> str:
    """The page `plm plugins show NAME` prints."""
    doc = (reg.cls.__doc__ or "").strip().splitlines()
    lines = [
        f"{reg.name} ({reg.family}) from {reg.package} {reg.version}, {reg.cls.__module__}.{reg.cls.__name__}",
        *([doc[0]] if doc else []),
        "",
    ]
    config = getattr(reg.cls, "Config", None)
    keys = describe_fields(config) if isinstance(config, type) and issubclass(config, BaseModel) else []
    if not keys:
        lines.append("no config keys")
    for k in keys:
        extra = f" ({k.constraints})" if k.constraints else ""
        lines.append(f"{k.key} : {k.type} = {k.default}{extra}")
        lines.append(f"    {k.description or '(no description)'}")
    return "\n".join(lines)
