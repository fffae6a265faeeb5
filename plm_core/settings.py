"""Runtime settings (not part of a recipe): read from `PLM_*` environment variables."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from plm_core.errors import ConfigError


class Settings(BaseSettings):
    """`PLM_DATA_DIR`, `PLM_DEVICE`, `PLM_LOG_LEVEL`, `PLM_OFFLINE`, `PLM_PROGRESS`, `PLM_CACHE`,
    `PLM_INGEST_BATCH`, `PLM_EMBED_WINDOW`."""

    model_config = SettingsConfigDict(env_prefix="PLM_", extra="ignore")

    data_dir: str = ".plm"
    """Index folders and the content cache; default: `.plm` beside the config file (a value set
    here is relative to the working directory)."""
    device: str = "cpu"
    """Where models run unless a stage names its own `device` (`cpu`, or a torch device such as `cuda`)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    """How much plm logs."""
    offline: bool = False
    """Never contact a model hub; models must be local paths, cached or packaged."""
    progress: bool = True
    """Progress bars on stderr when it is a terminal; off, or not on a terminal (a pipe, a log, a
    job in the background), a step longer than 10 s prints a line on stderr every 10 s instead."""
    cache: bool = True
    """Reuse keywords, entities and vectors across runs and jobs (PLM_DATA_DIR/cache.sqlite)."""
    ingest_batch: Annotated[int, Field(ge=1, le=100_000)] = 64
    """Documents processed and committed together (an interrupted ingest keeps finished batches;
    with an embedder, batches are stored once their window of chunks is embedded, docs/sync.md)."""

    embed_window: Annotated[int, Field(ge=1, le=1_000_000)] = 8192
    """Chunks embedded in one call across ingest batches, in corpus order (one call over a
    corpus gives the POC's vectors to the bit); the batches of a window are stored once it is
    embedded, so a smaller window stores sooner and holds less."""

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment; a bad `PLM_*` value is one clear error, not a traceback."""
    try:
        return Settings(**overrides)
    except ValidationError as err:
        bad = "; ".join(
            f"PLM_{str(e['loc'][0]).upper()}={e.get('input')!r}: {e['msg']}" if e["loc"] else e["msg"]
            for e in err.errors()
        )
        raise ConfigError(f"bad environment setting: {bad}") from None
