"""The `Component` protocol every stage follows, and the base class that implements it.

A component is built from a validated pydantic config and does its heavy work (loading
a model, opening an index) lazily, in `warm_up()` or on first `run()`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Protocol, TypeVar, get_args, get_origin, runtime_checkable

from pydantic import BaseModel, ConfigDict

In = TypeVar("In")
Out = TypeVar("Out")


class ComponentConfig(BaseModel):
    """Base for every component's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@runtime_checkable
class Component(Protocol):
    """What the pipeline needs from a stage."""

    family: ClassVar[str]
    input_type: ClassVar[Any]
    output_type: ClassVar[Any]

    def run(self, data: Any) -> Any: ...


class BaseComponent(Generic[In, Out]):
    """Convenience base: stores the config, warms up once, runs."""

    family: ClassVar[str] = "stage"
    Config: ClassVar[type[ComponentConfig]] = ComponentConfig
    input_type: ClassVar[Any] = object
    output_type: ClassVar[Any] = object

    def __init__(self, config: ComponentConfig | None = None, **params: Any) -> None:
        self.config = config if config is not None else self.Config(**params)
        self._warm = False
        self.context: Any = None

    def bind(self, context: Any) -> None:
        """Give the component the job's shared resources (store, embedder, settings)."""
        self.context = context

    def check(self) -> None:
        """Cross-stage checks once the job is assembled (cheap: loads and opens nothing)."""

    def warm_up(self) -> None:
        """Load models or open indexes; called once before the first run."""

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


def type_name(tp: Any) -> str:
    if get_origin(tp) is not None:
        args = ", ".join(type_name(a) for a in get_args(tp))
        return f"{getattr(get_origin(tp), '__name__', str(get_origin(tp)))}[{args}]"
    return getattr(tp, "__name__", str(tp))


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
