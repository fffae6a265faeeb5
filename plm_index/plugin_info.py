"""What `plm plugins` and `plm plugins show NAME` print: every registered component, and a
component's config keys with type, default, constraints and description, read from its
pydantic Config (a docstring under a field, or `Field(description=...)`), so a user never
reads code to write a config.

Nested config models are flattened the way a TOML file writes them: RRF's `default`
profile gives `default.k`, `default.weights`, ...; a `dict[str, Model]` gives
`profiles.<name>.k`. A nested key's default is the effective one (`expanded.k` is 10
because `expanded` defaults to a profile with k = 10), not the nested model's own.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import re
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from plm_core.registry import Registration, Registry

__all__ = [
    "FieldInfo",
    "class_summary",
    "config_keys",
    "describe_fields",
    "markdown_key_table",
    "plugin_rows",
    "render_markdown",
    "render_show",
    "toml_text",
    "type_text",
]

REQUIRED = "(required)"
UNSET = "(unset)"  # a None default: TOML has no null, so the key is simply left out
TABLE = "(table)"  # a nested model's default: its keys follow, each with its own default

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_CONSTRAINTS = (
    ("gt", ">"),
    ("ge", ">="),
    ("lt", "<"),
    ("le", "<="),
    ("multiple_of", "multiple of"),
    ("min_length", "min length"),
    ("max_length", "max length"),
)


@dataclass(frozen=True)
class FieldInfo:
    """One config key as a user writes it in TOML (not pydantic's FieldInfo)."""

    name: str
    """The key, dotted below a nested table: "k1", "default.k", "profiles.<name>.k"."""
    type: str
    """A readable type: `int`, `'float64' | 'float32'`, `list[str]`, `str | None`."""
    default: str
    """The default as TOML text, or "(required)", "(unset)" (None), "(table)" (a nested model)."""
    description: str
    """The field's description on one line ("" when it has none)."""
    constraints: str = ""
    """Bounds and patterns from the field's metadata, e.g. ">= 0, <= 1" ("" when none)."""


def type_text(tp: Any) -> str:
    """A readable type: `int`, `'a' | 'b'`, `list[str]`, `str | None`, `dict[str, Profile]`."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return type_text(args[0])
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is not None and args:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_text(a) for a in args)}]"
    if tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    return getattr(tp, "__name__", str(tp))


def toml_text(value: Any) -> str:
    """A value as TOML writes it: `"text"`, `true`, `1.5`, `["a", "b"]`, `{ k = 60.0 }`."""
    if value is None:
        return UNSET
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = (f"{_toml_key(str(k))} = {toml_text(v)}" for k, v in value.items())
        return "{ " + ", ".join(items) + " }"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() and abs(value) < 1e15 else str(value)


def _constraint_words(metadata: list[Any], prefix: str = "") -> list[str]:
    words = []
    for item in metadata:
        for attr, sign in _CONSTRAINTS:
            value = getattr(item, attr, None)
            if value is not None:
                words.append(f"{prefix}{sign} {_number(value)}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            words.append(f"{prefix}matches {pattern}")
    return words


def _constraints(metadata: list[Any], tp: Any) -> str:
    """The field's own bounds, then those on its items or values (`dict[str, Annotated[float, Field(ge=0)]]`)."""
    words = _constraint_words(metadata)
    for arg in get_args(tp):
        if get_origin(arg) is Annotated:
            inner = [m for extra in get_args(arg)[1:] for m in getattr(extra, "metadata", [extra])]
            words += _constraint_words(inner, "items " if get_origin(tp) in (list, set, tuple) else "values ")
    return ", ".join(words)


def _nested(tp: Any) -> tuple[type[BaseModel], str] | None:
    """The config model a field holds and the key part its keys go under: ("" for the model
    itself or `Model | None`, ".<name>" for `dict[str, Model]`, "[]" for `list[Model]`)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp, ""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        found = [n for n in (_nested(a) for a in args) if n is not None]
        return found[0] if found else None
    if origin is dict and len(args) == 2:
        inner = _nested(args[1])
        return (inner[0], ".<name>" + inner[1]) if inner else None
    if origin in (list, tuple, set) and args:
        inner = _nested(args[0])
        return (inner[0], "[]" + inner[1]) if inner else None
    return None


@functools.cache
def attribute_docs(model: type) -> dict[str, str]:
    """The docstring under each field of a config model (and of its bases), as pydantic's
    `use_attribute_docstrings` reads them: read here, when a key is described, and not when
    every plugin's class is defined (57 classes: 0.2 s of every command's start)."""
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):  # no source (a class made at run time)
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def describe_fields(config_cls: type[BaseModel], prefix: str = "", defaults: Any = None) -> list[FieldInfo]:
    """Every key of a config model in declaration order, nested models flattened (`default.k`).

    `defaults` is the instance a nested model's defaults come from (the parent's default
    value), so a key shows what a user actually gets by leaving it out.
    """
    keys: list[FieldInfo] = []
    docs = attribute_docs(config_cls)
    for name, field in config_cls.model_fields.items():
        tp = field.annotation
        required = field.default is PydanticUndefined and field.default_factory is None
        if isinstance(defaults, BaseModel):
            value, required = getattr(defaults, name), False
        else:
            value = None if required else field.get_default(call_default_factory=True)
        nested = _nested(tp)
        shown = REQUIRED if required else TABLE if isinstance(value, BaseModel) else toml_text(value)
        keys.append(
            FieldInfo(
                prefix + (field.alias or name),  # the key a config file uses
                type_text(tp),
                shown,
                " ".join((field.description or docs.get(name, "")).split()),
                _constraints(field.metadata, tp),
            )
        )
        if nested is not None:
            model, part = nested
            inner = value if part == "" and isinstance(value, BaseModel) else None
            keys.extend(describe_fields(model, f"{prefix}{name}{part}.", inner))
    return keys


def plugin_rows(registry: Registry) -> list[dict[str, str]]:
    """One row per registered component: name, family, package, version, class, module."""
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


def class_summary(cls: type) -> str:
    """A class docstring's first paragraph on one line (its summary, however wrapped)."""
    doc = (cls.__doc__ or "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split())


def config_keys(registration: Registration) -> list[FieldInfo]:
    """A component's config keys, as `plm plugins show` and the docs site list them ([] when
    its class has no pydantic `Config`)."""
    config = getattr(registration.cls, "Config", None)
    return describe_fields(config) if isinstance(config, type) and issubclass(config, BaseModel) else []


def _header(reg: Registration) -> str:
    package = f"{reg.package} {reg.version}".strip()
    return f"{reg.name} ({reg.family}), {package}, {reg.cls.__module__}.{reg.cls.__name__}"


def render_show(registration: Registration, max_width: int = 36) -> str:
    """The page `plm plugins show NAME` prints: a header line (name, family, package and
    version, module and class, the class docstring's summary), then one line per config key,
    `key  type  default  description`, columns aligned (a cell over `max_width` characters
    only pushes its own line)."""
    reg = registration
    header = _header(reg)
    summary = class_summary(reg.cls)
    lines = [f"{header}: {summary}" if summary else header, ""]
    keys = config_keys(reg)
    if not keys:
        lines.append("no config keys")
        return "\n".join(lines)
    rows = [("key", "type", "default", "description")]
    for k in keys:
        typ = f"{k.type} ({k.constraints})" if k.constraints else k.type
        rows.append((k.name, typ, k.default, k.description or "(no description)"))
    widths = [max(len(r[i]) for r in rows if len(r[i]) <= max_width) for i in range(3)]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        lines.append("  ".join([*cells, row[3]]).rstrip())
    return "\n".join(lines)


def _md_text(text: str) -> str:
    """Prose for a Markdown table cell: code spans kept, and outside them the characters that
    would end the cell or open an HTML tag escaped."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: no code spans at all
        parts = [text.replace("`", "\\`")]
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")
    return "`".join(parts)


def _md_code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def render_markdown(registration: Registration) -> str:
    """The same page as `render_show`, as Markdown for the documentation site: a title, the
    header line, the class docstring (every paragraph), then a table of the config keys."""
    reg = registration
    doc = (reg.cls.__doc__ or "").strip()
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n") if p.strip()] if doc else []
    lines = [f"# {reg.name}", "", f"`{_header(reg)}`", ""]
    for paragraph in paragraphs:
        lines += [_md_text(paragraph), ""]
    lines += [f'Use it with `use = "{reg.name}"`; `plm plugins show {reg.family}:{reg.name}` prints this page.', ""]
    keys = config_keys(reg)
    if not keys:
        return "\n".join([*lines, "No config keys.", ""])
    return "\n".join([*lines, "## Config keys", "", markdown_key_table(keys), ""])


def markdown_key_table(
    keys: list[FieldInfo], key_text: Callable[[str], str] | None = None, key_header: str = "key"
) -> str:
    """Config keys as a Markdown table: key, type (with its bounds), default, description.
    `key_text` turns a key's name into what the first column (`key_header`) shows."""
    lines = [f"| {key_header} | type | default | description |", "|---|---|---|---|"]
    for k in keys:
        typ = _md_code(k.type) + (f" ({_md_text(k.constraints)})" if k.constraints else "")
        default = k.default if k.default.startswith("(") else _md_code(k.default)
        name = key_text(k.name) if key_text else k.name
        lines.append(f"| {_md_code(name)} | {typ} | {default} | {_md_text(k.description) or '(no description)'} |")
    return "\n".join(lines)
