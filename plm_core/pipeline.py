"""`Pipeline().add(a).add(b).run(x)`: a linear chain of stages, type-checked at assembly."""

from __future__ import annotations

import time
from typing import Any

from plm_core.component import Component, fits, output_problem, type_name
from plm_core.errors import PipelineError, TypeValidationError
from plm_core.records import PipelineResult, Ranking


def _label(stage: Component) -> str:
    return getattr(stage, "label", None) or type(stage).__name__


def check_output(stage: Any, data: Any) -> None:
    """Raise TypeValidationError naming the stage when `data`, what it returned, is not its
    declared `output_type`: a stage's bug, named where it returns, not as an AttributeError
    two stages on (the pipeline checks each stage; a wrapper checks the stage it wraps)."""
    problem = output_problem(data, stage.output_type)
    if problem is not None:
        raise TypeValidationError(
            f"{stage_name(stage)} returned {problem}, not the {type_name(stage.output_type)} it must return"
        )
    if isinstance(data, Ranking) and any(hit.rank != i for i, hit in enumerate(data.hits, 1)):
        shown = ", ".join(str(h.rank) for h in data.hits[:5]) + (", ..." if len(data.hits) > 5 else "")
        raise TypeValidationError(
            f"{stage_name(stage)} returned a Ranking whose hits are ranked {shown}: ranks count from 1, "
            "in the hits' order (plm.rescore reorders and renumbers)"
        )


def stage_name(stage: Any) -> str:
    """`'bad_words' (chunkers)`: a stage's registered name and family, as its errors name it."""
    family = getattr(stage, "family", "stage")
    return repr(getattr(stage, "name", type(stage).__name__)) + ("" if family == "stage" else f" ({family})")


def _named(stage: Component) -> str:
    """`'rerank' (blank_lines, chunkers)`: the table, and what is in it when that says more."""
    label, name, family = _label(stage), getattr(stage, "name", None), getattr(stage, "family", "stage")
    more = [x for x in (name if name != label else None, family if family != "stage" else None) if x]
    return f"{label!r}" + (f" ({', '.join(more)})" if more else "")


class Pipeline:
    """Runs stages in order; each stage's output is the next one's input."""

    def __init__(self) -> None:
        self.stages: list[Component] = []

    def add(self, stage: Component) -> Pipeline:
        if self.stages:
            prev = self.stages[-1]
            if not fits(prev.output_type, stage.input_type):
                raise TypeValidationError(
                    f"stage {_named(prev)} outputs {type_name(prev.output_type)} but the next "
                    f"stage {_named(stage)} expects {type_name(stage.input_type)}"
                )
        self.stages.append(stage)
        return self

    @property
    def output_type(self) -> Any:
        return self.stages[-1].output_type if self.stages else object

    def warm_up(self) -> None:
        for stage in self.stages:
            ensure = getattr(stage, "ensure_warm", None)
            if ensure is not None:
                ensure()

    def run(self, data: Any) -> PipelineResult:
        timings: dict[str, float] = {}
        for stage in self.stages:
            label = _label(stage)
            t0 = time.perf_counter()
            try:
                ensure = getattr(stage, "ensure_warm", None)
                if ensure is not None:
                    ensure()
                data = stage.run(data)
                check_output(stage, data)
            except PipelineError:
                raise
            except Exception as exc:  # noqa: BLE001 - re-raised with the stage named
                raise PipelineError(label, exc) from exc
            finally:
                timings[label] = timings.get(label, 0.0) + time.perf_counter() - t0
        return PipelineResult(output=data, timings=timings)

    def __repr__(self) -> str:
        return " -> ".join(_label(s) for s in self.stages) or "Pipeline()"
