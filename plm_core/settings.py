"""Runtime settings (not part of a recipe): read from `PLM_*` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """`PLM_DATA_DIR`, `PLM_DEVICE`, `PLM_LOG_LEVEL`, `PLM_OFFLINE`, `PLM_PROGRESS`, `PLM_CACHE`."""

    model_config = SettingsConfigDict(env_prefix="PLM_", extra="ignore")

    data_dir: str = ".plm"
    device: str = "cpu"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    # Never contact a model hub; models must be local paths, cached or packaged.
    offline: bool = False
    progress: bool = True
    # Reuse keywords, entities and vectors across runs and jobs (PLM_DATA_DIR/cache.sqlite).
    cache: bool = True
