"""TOML job configs: load, override with `--set`, and validate every stage's parameters
against its component's pydantic model before anything runs. Tables (stages run in order):

    [job] name, dataset, ...; [store] use = "<store>"; [embedder] use = "<embedder>" (shared)
    [index.<label>] use = "<stage>" (documents -> chunks); [query.<label>] (query -> hits)

A table with a `use` key inside a stage's parameters is a nested component (e.g. the
`hybrid` stage's retrievers and fuser), validated the same way.
"""

from __future__ import annotations

import difflib
import functools
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from plm_core.errors import ConfigError, PlmUserError
from plm_core.interfaces import Embedder, Executor, Store
from plm_core.registry import Registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

log = logging.getLogger(__name__)


class JobSection(BaseModel):
    """The `[job]` table: what the job is called. Installed packages add keys
    (`Registry.add_job_settings`: plm_eval's dataset, query sets and evaluator)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("job", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    """Names the index folder PLM_DATA_DIR/<name>: letters, digits, '.', '_' and '-' only."""
    description: str = ""
    """One line saying what the recipe is (for people)."""


def job_section(registry: Registry) -> type[JobSection]:
    """The `[job]` model with every key the registry's packages add."""
    return _with(registry.job_settings())


@functools.cache
def _with(models: tuple[type, ...]) -> type[JobSection]:
    if not models:
        return JobSection
    return type("JobSection", (*models, JobSection), {"__doc__": JobSection.__doc__, "__module__": __name__})


@dataclass(frozen=True)
class StageSpec:
    """One component as the config names it, with validated parameters."""

    label: str  # dotted path of its table, e.g. "query.retrieve"
    use: str
    family: str
    cls: type
    config: Any  # the component's validated pydantic Config
    nested: dict[str, Any] = field(default_factory=dict)  # param -> StageSpec or {name: StageSpec}


@dataclass(frozen=True)
class JobConfig:
    path: Path
    raw: dict[str, Any]
    job: JobSection
    store: StageSpec
    embedder: StageSpec | None
    index: list[StageSpec]
    query: list[StageSpec]
    executor: StageSpec | None = None  # where an ingest processes documents; None: in this process


_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$")


def parse_cli_value(raw: str) -> Any:
    """A CLI value: int, float, true/false, else a string; quotes force a string ('"007"')."""
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    return value


def parse_override(assignment: str) -> tuple[list[str], Any]:
    """`a.b.c=VALUE` -> (["a","b","c"], VALUE): an array or table in TOML syntax, else a
    scalar read the one way every CLI value is read (`parse_cli_value`)."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. query.retrieve.fuser.k=30")
    key, value = assignment.split("=", 1)
    parsed: Any = parse_cli_value(value)
    if value.strip()[:1] in ("[", "{"):
        try:
            parsed = tomllib.loads(f"v = {value}")["v"]
        except (tomllib.TOMLDecodeError, RecursionError):
            raise ConfigError(f"--set {assignment!r}: the value is not a valid TOML array or table") from None
    return key.strip().split("."), parsed


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> None:
    for assignment in overrides:
        keys, value = parse_override(assignment)
        node = raw
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {assignment!r}: {k!r} is not a table")
        node[keys[-1]] = value


_URL_PASSWORD = re.compile(r"(://[^/@:\s'\"]*:)[^\s'\"]*@")


def format_validation(err: ValidationError, where: str, model: type[BaseModel]) -> str:
    """One line for a pydantic error: each bad key, what is wrong, and the allowed keys
    when a key is unknown (the one formatter for configs, job tables and case files)."""
    allowed = ", ".join(model.model_fields) or "(none)"
    parts = []
    for e in err.errors():
        key = ".".join(str(x) for x in e["loc"]) or "(table)"
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown key {key!r}; allowed keys: {allowed}")
        elif e["type"] == "missing":
            parts.append(f"missing required key {key!r}")
        else:
            shown = _URL_PASSWORD.sub(r"\1***@", repr(e.get("input")))  # never echo a URL's password
            parts.append(f"key {key!r} = {shown[:80] + '...' if len(shown) > 80 else shown}: {e['msg']}")
    return f"{where}: " + "; ".join(parts)


_LABEL = re.compile(r"\w[\w-]{0,63}")


def build_spec(table: Any, label: str, registry: Registry, path: Path, expect: type | None = None) -> StageSpec:
    """Validate one component table (and the component tables nested in it): its name is
    registered, it is the kind of component the slot takes (`expect`), its parameters fit
    its Config."""
    name = label.rsplit(".", 1)[-1]
    if not _LABEL.fullmatch(name):  # it names sources in hits, messages and logs
        shown = label.encode("unicode_escape").decode("ascii")
        raise ConfigError(
            f"{path} [{shown}]: a table name may hold letters, digits, '_' and '-' only (at most 64), "
            f"not {name.encode('unicode_escape').decode('ascii')!r}; rename the table"
        )
    where = f"{path} [{label}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table with a 'use' key, got {table!r}")
    if "use" not in table:
        raise ConfigError(f"{where}: missing 'use' (the registered component name); see `plm plugins`")
    params = dict(table)
    use = params.pop("use")
    reg = registry.get(str(use), where=where, among=expect)
    cls: Any = reg.cls
    if expect is not None and not (isinstance(cls, type) and issubclass(cls, expect)):  # before its parameters
        fitting = ", ".join(registry.names_of(expect)) or "(none)"
        raise ConfigError(
            f"{where}: {reg.name!r} is a {reg.family} component, not a {expect.__name__.lower()}; use one of: {fitting}"
        )
    parts: dict[str, type] = dict(getattr(cls, "parts", {}))
    for key in parts:  # a part by name alone: `tokenizer = "bm25s_stem"`
        if isinstance(params.get(key), str):
            params[key] = {"use": params[key]}
        elif isinstance(params.get(key), dict) and "use" not in params[key]:
            values = params[key].values()
            if not (params[key] and all(isinstance(v, dict) and "use" in v for v in values)):
                family = getattr(parts[key], "family", None) or parts[key].__name__.lower()
                raise ConfigError(
                    f"{path} [{label}.{key}]: missing 'use' (the registered {family} name); "
                    f'see `plm plugins`, or give the name alone: {key} = "..."'
                )
    nested: dict[str, Any] = {}
    for key, value in list(params.items()):
        if isinstance(value, dict) and "use" in value:
            nested[key] = build_spec(value, f"{label}.{key}", registry, path, parts.get(key))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) and "use" in v for v in value.values()):
            nested[key] = {
                n: build_spec(v, f"{label}.{key}.{n}", registry, path, parts.get(key)) for n, v in value.items()
            }
    try:
        config = cls.Config(**params)
    except ValidationError as err:
        raise ConfigError(format_validation(err, where, cls.Config)) from None
    return StageSpec(label, reg.name, reg.family, reg.cls, config, nested)


def _stage_tables(raw: dict[str, Any], section: str, path: Path, registry: Registry) -> list[StageSpec]:
    tables = raw.get(section, {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path} [{section}]: expected a table of stages")
    for label, table in tables.items():
        # `--set query.retreive.k=3` makes a new table without `use`: name the one meant.
        if isinstance(table, dict) and "use" not in table:
            staged = [n for n, t in tables.items() if isinstance(t, dict) and "use" in t]
            if close := difflib.get_close_matches(label, staged, n=1):
                raise ConfigError(
                    f"{path} [{section}.{label}]: missing 'use'; did you mean [{section}.{close[0]}]? "
                    "(a misspelt table name, or a misspelt --set key)"
                )
    specs = [build_spec(t, f"{section}.{label}", registry, path) for label, t in tables.items()]
    for spec in specs:
        label = spec.label.split(".", 1)[1]
        shortened = spec.use.startswith(label) or label.startswith(spec.use)  # `context` for contextual
        if not shortened and difflib.get_close_matches(label, [spec.use], n=1, cutoff=0.8):
            # a label is a free name, so `[query.colapse] use = "collapse"` runs; but a later
            # `--set query.collapse.per_doc=3` would make a second table: say it now
            log.warning(
                "%s [%s]: the label %r looks like a misspelling of its stage %r; labels are free names "
                "(it runs as written), but `--set %s.%s...` will not reach it",
                path, spec.label, label, spec.use, section, spec.use,
            )  # fmt: skip
    return specs


def load_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}" + (" (it is a folder)" if path.is_dir() else ""))
    try:
        data = path.read_bytes()
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {len(data):,} bytes is too large for a config (at most {MAX_CONFIG_BYTES:,})")
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}): save the config as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: malformed TOML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: malformed TOML: arrays or tables nested too deeply") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read: {err.strerror or err}") from None


MAX_CONFIG_BYTES = 1 << 20
# The store a job gets when its config has no [store] table: the embedded default.
DEFAULT_STORE = {"use": "sqlite"}
KNOWN_TABLES = {"job", "store", "embedder", "index", "query", "executor"}


def load_job(path: str | Path, registry: Registry, overrides: Sequence[str] = ()) -> JobConfig:
    """Read, override and validate a job config; raises ConfigError/PluginError on any problem."""
    path = Path(path)
    raw = load_toml(path)
    if "store" not in raw:
        raw["store"] = dict(DEFAULT_STORE)  # so `--set store.key=...` reaches the default store
    apply_overrides(raw, list(overrides))
    unknown = set(raw) - KNOWN_TABLES
    if unknown:
        raise ConfigError(f"{path}: unknown table(s) {sorted(unknown)}; allowed: {sorted(KNOWN_TABLES)}")
    if not isinstance(raw.get("job", {}), dict):
        raise ConfigError(f"{path}: [job] must be a table, got {raw['job']!r}")
    section = job_section(registry)
    try:
        job = section(**raw.get("job", {}))
    except ValidationError as err:
        raise ConfigError(format_validation(err, f"{path} [job]", section)) from None
    try:
        store = build_spec(raw["store"], "store", registry, path, Store)
        embedder = build_spec(raw["embedder"], "embedder", registry, path, Embedder) if "embedder" in raw else None
        # No [executor] table: documents are processed in this process (the job's own stages).
        executor = build_spec(raw["executor"], "executor", registry, path, Executor) if "executor" in raw else None
        index = _stage_tables(raw, "index", path, registry)
        query = _stage_tables(raw, "query", path, registry)
    except PlmUserError as err:
        raise ConfigError(str(err)) from None
    if not query:
        raise ConfigError(f"{path}: no [query.<stage>] tables; a job needs at least a retrieval stage")
    return JobConfig(path, raw, job, store, embedder, index, query, executor)
