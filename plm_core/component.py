"""The `Component` protocol every stage follows, and `BaseComponent`, which implements it: a
stage is built from a validated pydantic config and does its heavy work (loading a model,
opening an index) lazily, in `warm_up()` or on first `run()`."""

from __future__ import annotations

from abc import ABCMeta
from collections.abc import Iterator, Mapping
from types import UnionType
from typing import Any, ClassVar, Generic, Protocol, TypeVar, Union, get_args, get_origin, runtime_checkable

from pydantic import BaseModel, ConfigDict

In = TypeVar("In")
Out = TypeVar("Out")


class ComponentConfig(BaseModel):
    """Base for every component's parameters: unknown keys are errors. A docstring under a
    field is its description (`plm plugins show NAME` prints it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@runtime_checkable
class Component(Protocol):
    """What the pipeline needs from a stage."""

    family: ClassVar[str]
    input_type: ClassVar[Any]
    output_type: ClassVar[Any]

    def run(self, data: Any) -> Any: ...


class BaseComponent(Generic[In, Out], metaclass=ABCMeta):
    """Convenience base: stores the config and what the assembly hands it, warms up once, runs.
    A component receives everything it uses through its constructor, never by reaching
    into the job: `needs` names the shared resources it takes (from `RESOURCES`), `parts`
    the nested components its config names (e.g. hybrid's retrievers and fuser), each with
    the base class the assembly checks before building it."""

    family: ClassVar[str] = "stage"
    Config: ClassVar[type[ComponentConfig]] = ComponentConfig
    input_type: ClassVar[Any] = object
    output_type: ClassVar[Any] = object
    needs: ClassVar[tuple[str, ...]] = ()
    parts: ClassVar[Mapping[str, type]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A family is its base class: what `plm plugins` lists under a family is what a slot
        # of that family takes. A new family is a new base (a direct subclass of this one);
        # only the kernel nests one family in another (`Reranker` in `RankingStage`).
        own = cls.__dict__.get("family")
        bases = [(b, b.__dict__["family"]) for b in cls.__mro__[1:] if b.__dict__.get("family", "stage") != "stage"]
        if own is not None and bases and own != bases[0][1] and not cls.__module__.startswith("plm_core."):
            raise TypeError(
                f"{cls.__qualname__}: family {own!r}, but it is a {bases[0][0].__name__} (family "
                f"{bases[0][1]!r}); a family is its base class: drop `family = {own!r}`"
            )
        if "name" in cls.__dict__:  # registrable: it must write every abstract method of its base
            abstract = [a for a in sorted(dir(cls)) if getattr(getattr(cls, a, None), "__isabstractmethod__", False)]
            refuse_missing(cls, abstract)
        config = cls.__dict__.get("Config")
        if config is not None and not (isinstance(config, type) and issubclass(config, BaseModel)):
            raise TypeError(
                f"{cls.__qualname__}.Config must subclass plm.ComponentConfig (a pydantic model: "
                "its fields are the stage's TOML keys, checked and typed, unknown keys refused); write "
                "`class Config(plm.ComponentConfig):`"
            )
        unknown = set(cls.needs) - RESOURCES
        if unknown:
            raise TypeError(
                f"{cls.__qualname__}.needs: unknown resource(s) {sorted(unknown)}; known: {sorted(RESOURCES)}"
            )

    def __init__(self, config: ComponentConfig | None = None, /, *, label: str | None = None, **kwargs: Any) -> None:
        # A part given by name or table (tokenizer="snowball") stays config: the component resolves it.
        given = {k: kwargs.pop(k) for k in (*self.needs, *self.parts) if k in kwargs and not _names(kwargs[k])}
        self.config = config if config is not None else self.Config(**kwargs)
        if config is not None and kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        for key in (*self.needs, *self.parts):
            setattr(self, key, given.get(key))
        # The config table's name ("bm25" for [query.retrieve.retrievers.bm25]); names results.
        self.label: str = label or str(getattr(type(self), "name", type(self).__name__))
        self._warm = False

    def components(self) -> Iterator[BaseComponent[Any, Any]]:
        """This component and every part inside it (depth first)."""
        yield self
        for key in self.parts:
            value = getattr(self, key, None)
            for part in value.values() if isinstance(value, Mapping) else [value]:
                if isinstance(part, BaseComponent):
                    yield from part.components()

    def resolved_config(self) -> dict[str, Any] | None:
        """The settings this stage runs with, where they differ from its config as written
        (defaults that follow the rest of the recipe, once `check` ran); None: the config.
        `plm config check` prints them."""
        return None

    def check(self) -> None:
        """Cross-stage checks once the job is assembled (cheap: loads and opens nothing
        heavy); raise ConfigError with what to change."""

    def warm_up(self) -> None:
        """Load models or open indexes; called once before the first run."""

    @property
    def is_warm(self) -> bool:
        """Whether `warm_up` has run (a model loaded, an index opened)."""
        return self._warm

    def ensure_warm(self) -> None:
        if not self._warm:
            self.warm_up()
            self._warm = True

    def reset(self) -> None:
        """Forget the warm state (e.g. the index changed); the next run warms up again."""
        self._warm = False

    def run(self, data: In) -> Out:
        raise NotImplementedError

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.config.model_dump().items())
        return f"{type(self).__name__}({params})"


# What a component may declare in `needs`: the job's settings (`plm_core.settings.Settings`),
# its shared embedder (or None), the folder of its config file (for relative paths),
# the live corpus view (`plm_index.search.CorpusView`: filter masks and hit lookup), and
# every installed converter (name -> its `Registration`: class, package and version).
RESOURCES = frozenset({"settings", "embedder", "config_dir", "corpus", "converters"})


def refuse_missing(cls: type, missing: list[str]) -> None:
    """A registrable class lacking methods of its family's contract fails when the plugin is
    imported, not mid-ingest: the error shows each as its base declares it, and the page
    where the contract is written down (generated from the base by docs/contracts.py)."""
    if missing:
        family = getattr(cls, "family", "stage")
        raise TypeError(
            f"{cls.__qualname__} ({cls.__dict__['name']!r}) must implement (the {family} contract: "
            f"docs/contracts/{family}.md):" + "".join(f"\n  {signature(cls, attr)}" for attr in missing)
        )


def signature(cls: type, attr: str) -> str:
    """`attr` as the base that declares it writes it: `search(self, query: ExpandedQuery, n: int,
    allowed: Any = None) -> list[ScoredChunk]` (from Retriever)."""
    import inspect

    owner = next((k for k in cls.__mro__ if attr in vars(k)), cls)
    member = vars(owner).get(attr)
    func = member.fget if isinstance(member, property) else member
    try:
        sig = inspect.signature(func)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"{attr} (from {owner.__name__})"

    def text(annotation: Any) -> str:
        return annotation if isinstance(annotation, str) else type_name(annotation)

    params = []
    for p in sig.parameters.values():
        star = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        part = star + p.name + ("" if p.annotation is p.empty else f": {text(p.annotation)}")
        params.append(part + ("" if p.default is p.empty else f" = {p.default!r}"))
    returns = "" if sig.return_annotation is sig.empty else f" -> {text(sig.return_annotation)}"
    if isinstance(member, property):
        return f"{attr} (a property){returns} (from {owner.__name__})"
    return f"{attr}({', '.join(params)}){returns} (from {owner.__name__})"


def _names(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, dict) and "use" in value)


def type_name(tp: Any) -> str:
    if get_origin(tp) is not None:
        args = ", ".join(type_name(a) for a in get_args(tp))
        return f"{getattr(get_origin(tp), '__name__', str(get_origin(tp)))}[{args}]"
    return getattr(tp, "__name__", str(tp))


def output_problem(value: Any, declared: Any) -> str | None:
    """What a stage returned instead of its declared `output_type` ("a str", "a list holding
    a str at 0"); None when it fits, or when the type cannot be checked at run time (a Union,
    a Protocol that is not runtime-checkable, Any). The container is checked, and each item of
    a list or tuple of one class (a chunker's list[Chunk]): an isinstance each, nothing deeper."""
    if declared is object or declared is Any:
        return None
    origin = get_origin(declared)
    if origin is Union or origin is UnionType:
        return None
    container = declared if origin is None else origin
    try:
        if isinstance(container, type) and not isinstance(value, container):
            return f"a {type(value).__name__}"
        args = get_args(declared)
        item = args[0] if origin in (list, tuple) and len(args) == 1 else None
        if isinstance(item, type) and item is not object:
            for i, x in enumerate(value):
                if not isinstance(x, item):
                    return f"a {origin.__name__} holding a {type(x).__name__} at {i}"
    except TypeError:  # isinstance refuses the type (a Protocol, a subscripted generic): not checked
        return None
    return None


def fits(produced: Any, accepted: Any) -> bool:
    """True when a value of type `produced` can be passed where `accepted` is expected."""
    if accepted is object or accepted is Any:
        return True
    p_origin, a_origin = get_origin(produced), get_origin(accepted)
    if p_origin is None and a_origin is None:
        return isinstance(produced, type) and isinstance(accepted, type) and issubclass(produced, accepted)
    if p_origin is None or a_origin is None or p_origin is not a_origin:
        return False
    p_args, a_args = get_args(produced), get_args(accepted)
    return len(p_args) == len(a_args) and all(fits(p, a) for p, a in zip(p_args, a_args, strict=True))
