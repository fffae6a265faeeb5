"""Errors: `PlmUserError` and its children are the user's to fix (shown without a traceback)."""

from __future__ import annotations


class PlmUserError(Exception):
    """Something the user can fix (bad config, missing file, missing model)."""


class ConfigError(PlmUserError):
    """A config file is missing, malformed, or fails validation."""


class PluginError(PlmUserError):
    """A plugin is unknown, duplicated, or failed to load."""


class TypeValidationError(PlmUserError):
    """Two adjacent pipeline stages do not fit together."""


class MissingDependencyError(PlmUserError):
    """A stage needs an optional dependency that is not installed."""

    def __init__(self, what: str, extra: str = "", *, install: str = "") -> None:
        """`extra`: plm's extra that brings it; a third-party stage says `install` (the
        command, "pip install my-package[fuzzy]"); with neither, "pip install WHAT"."""
        command = install or (f"pip install 'plm[{extra}]'" if extra else f"pip install {what}")
        super().__init__(f"{what} is not installed. Install it with: {command}")


class ModelNotFoundError(PlmUserError):
    """No model named in a config could be loaded."""


class StoreError(PlmUserError):
    """A stored index is missing, stale or corrupt."""


class StaleIndexError(StoreError):
    """A derived index (BM25) missing or built for another corpus version or settings: rebuild it, never use it."""


class IndexDamagedError(StaleIndexError):
    """A saved derived index is damaged (a file missing, truncated or overwritten) while the
    store holds everything it is made from: queries are answered from the store, and the
    damage is reported (log, `plm index stats`, `/status`) until `plm index rebuild`."""


class PipelineError(Exception):
    """A stage failed while running; names the stage. Wraps the original error."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"stage {stage!r} failed: {type(cause).__name__}: {cause}")
        self.stage = stage
        self.cause = cause
