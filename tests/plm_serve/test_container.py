"""The container files agree with plm: the Dockerfile's command is a valid `plm serve` over a
config that exists and passes `plm config check`, the health checks hit /health, and the
compose volumes are mounted where plm puts the SQLite store and the BM25 builds for that
config. No Docker engine is needed (none runs here): the files are parsed, not built."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from plm_core.config import load_job
from plm_core.settings import Settings
from plm_index.job import Job, index_dir_for
from plm_index.plugins import default_registry

REPO = Path(__file__).resolve().parents[2]
SQLITE_VOLUME, BM25_VOLUME = "plm-sqlite-data", "plm-bm25-index"


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: comments dropped, continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def instructions(name: str) -> list[str]:
    return [args for word, args in dockerfile() if word == name]


def exec_form(args: str) -> list[str]:
    """A JSON-array ("exec") form; the shell form would need a shell to run `plm`."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def env() -> dict[str, str]:
    found: dict[str, str] = {}
    for args in instructions("ENV"):
        for item in shlex.split(args):
            key, sep, value = item.partition("=")
            assert sep, f"ENV {args}: use KEY=value"
            found[key] = value
    return found


def command() -> list[str]:
    (entrypoint,), (cmd,) = instructions("ENTRYPOINT"), instructions("CMD")
    return exec_form(entrypoint) + exec_form(cmd)


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def repo_path(container_path: str) -> Path:
    """Where a path under the image's WORKDIR comes from in this checkout (`COPY . <workdir>`)."""
    (workdir,) = instructions("WORKDIR")
    assert any(shlex.split(args) in (["."], [".", workdir], [".", workdir + "/"]) for args in instructions("COPY"))
    relative = PurePosixPath(container_path).relative_to(workdir)
    return REPO / relative


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def service(compose: dict[str, Any]) -> dict[str, Any]:
    (svc,) = compose["services"].values()
    return svc


@pytest.fixture(scope="module")
def served_config() -> Path:
    return repo_path(option(command(), "--config"))


@pytest.fixture(scope="module")
def served_job(served_config: Path) -> Job:
    """The served config assembled as in the container (data dir from the image), without
    opening anything or loading a model (what `plm config check` does)."""
    settings = Settings(data_dir=env()["PLM_DATA_DIR"], cache=False, progress=False)
    config = load_job(served_config, default_registry(), [])
    return Job(config, index_dir_for(config.job.name, settings.data_dir, None), settings, default_registry())


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Named volume -> container path, from `volume:/path[:mode]` entries."""
    found = {}
    for entry in service["volumes"]:
        source, target = entry.split(":")[:2]
        found[source] = target
    return found


def test_base_image_torch_cpu_first_and_a_non_root_user() -> None:
    (base,) = instructions("FROM")
    assert base == "python:3.11-slim"
    runs = instructions("RUN")
    torch = next(i for i, r in enumerate(runs) if "torch==" in r)
    assert "--index-url https://download.pytorch.org/whl/cpu" in runs[torch]
    plm = next(i for i, r in enumerate(runs) if "[serve," in r)
    assert torch < plm and "bm25" in runs[plm] and "embed" in runs[plm]
    words = [w for w, _ in dockerfile()]
    (user,) = instructions("USER")
    assert user not in ("root", "0") and words.index("USER") < words.index("ENTRYPOINT")
    assert env()["PLM_DATA_DIR"] == "/data" and "8000" in instructions("EXPOSE")


def test_the_command_is_plm_serve_with_options_the_cli_accepts() -> None:
    import typer

    from plm_index.cli import register_commands

    argv = command()
    assert argv[:2] == ["plm", "serve"]
    assert option(argv, "--host") == "0.0.0.0" and option(argv, "--port") == "8000"
    cli = typer.Typer()  # plugin commands as `plm` gets them, on an app of this test's own
    register_commands(cli)
    serve = typer.main.get_command(cli).commands["serve"]  # type: ignore[attr-defined]
    ctx = serve.make_context("serve", argv[2:])  # parses the options, runs nothing
    assert str(ctx.params["config"]) == option(argv, "--config") and ctx.params["port"] == 8000
    assert ctx.params["create"]  # `docker compose up` comes before the README's ingest


def test_the_served_config_is_in_the_repo_and_passes_config_check(served_config: Path) -> None:
    assert served_config.is_file(), served_config
    res = subprocess.run(
        [sys.executable, "-m", "plm_index.cli", "config", "check", str(served_config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "is valid" in res.stdout


def test_healthchecks_hit_health_on_the_served_port(service: dict[str, Any]) -> None:
    port = option(command(), "--port")
    (check,) = instructions("HEALTHCHECK")
    options, _, cmd = check.partition(" CMD ")
    assert "--interval" in options and "--start-period" in options
    probe = exec_form(cmd)
    assert probe[:2] == ["python", "-c"] and f"http://127.0.0.1:{port}/health" in probe[2]
    compile(probe[2], "<healthcheck>", "exec")  # valid Python
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1:] == probe


def test_port_is_published_on_localhost_only(service: dict[str, Any]) -> None:
    port = option(command(), "--port")
    assert service["ports"] == [f"127.0.0.1:{port}:{port}"]


def test_volumes_are_where_plm_puts_the_store_and_the_bm25_builds(
    compose: dict[str, Any], service: dict[str, Any], served_job: Job
) -> None:
    assert set(compose["volumes"]) == {SQLITE_VOLUME, BM25_VOLUME}
    assert service["environment"]["PLM_DATA_DIR"] == env()["PLM_DATA_DIR"]
    where = mounts(service)
    data_dir = PurePosixPath(served_job.settings.data_dir)
    assert PurePosixPath(where[SQLITE_VOLUME]) == data_dir
    # The store file: PLM_DATA_DIR/<job name>/plm.sqlite, inside the data volume.
    sqlite_file = PurePosixPath(served_job.index_dir) / served_job.store.config.model_dump()["filename"]
    assert sqlite_file == data_dir / served_job.config.job.name / "plm.sqlite"
    assert sqlite_file.is_relative_to(data_dir)
    # The BM25 builds: <index folder>/bm25s-<settings hash>/, what the retriever computes.
    (bm25,) = [ix for ix in served_job.searcher.indexes if hasattr(ix, "index_base")]
    base = PurePosixPath(bm25.index_base(served_job.index_dir))
    assert base.parent == data_dir / served_job.config.job.name and base.name.startswith("bm25s-")
    assert PurePosixPath(where[BM25_VOLUME]) == base


def test_the_image_creates_the_mount_points_for_its_user(service: dict[str, Any]) -> None:
    """New named volumes copy the image's folder (owner included): both mount points must
    exist in the image, owned by the user plm runs as, or the volumes are root's."""
    (user,) = instructions("USER")
    runs = " && ".join(instructions("RUN"))
    for target in mounts(service).values():
        assert f"mkdir -p {target}" in runs or any(
            f"mkdir -p {other}" in runs and PurePosixPath(other).is_relative_to(target)
            for other in mounts(service).values()
        ), target
    assert f"chown -R {user}:{user} /data" in runs


def test_dockerignore_keeps_what_the_build_needs() -> None:
    patterns = [
        p.strip() for p in (REPO / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")
    ]
    assert {".git", ".venv", "tests"} <= set(patterns)
    needed = ["pyproject.toml", "README.md", "configs/poc_parity.toml", "plm_index/cli.py", "plm_serve/server.py"]
    needed += ["plm_plugins/expanders/poc_dictionary.toml", "examples/sample_corpus/docs"]
    for path in needed:
        assert (REPO / path).exists(), path
        assert not any(fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") for p in patterns), path
