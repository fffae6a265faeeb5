"""Runtime settings (not part of a recipe): read from `PLM_*` environment variables."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """`PLM_DATA_DIR`, `PLM_DEVICE`, `PLM_LOG_LEVEL`, `PLM_OFFLINE`, `PLM_PROGRESS`, `PLM_CACHE`,
    `PLM_INGEST_BATCH`."""

    model_config = SettingsConfigDict(env_prefix="PLM_", extra="ignore")

    data_dir: str = ".plm"
    device: str = "cpu"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    # Never contact a model hub; models must be local paths, cached or packaged.
    offline: bool = False
    progress: bool = True
    # Reuse keywords, entities and vectors across runs and jobs (PLM_DATA_DIR/cache.sqlite).
    cache: bool = True
    # Documents processed and committed together: an interrupted ingest keeps every
    # finished batch; smaller batches lose less work, larger ones commit less often.
    ingest_batch: Annotated[int, Field(ge=1)] = 64
