"""The CLI as a user meets it: real `plm` processes, exit codes, messages, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
POC = REPO / "configs" / "poc_parity.toml"


def plm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=REPO,
        timeout=120,
    )


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "broken.toml"
    path.write_text(POC.read_text().replace(old, new, 1))
    return path


def test_plugins_lists_every_builtin_family() -> None:
    res = plm("plugins", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    families = {r["family"] for r in rows if r["package"] == "plm"}
    assert {
        "loaders",
        "chunkers",
        "enrichers",
        "embedders",
        "retrieval",
        "retrievers",
        "expanders",
        "rankers",
        "rerankers",
        "fusers",
        "stores",
        "evaluators",
    } <= families
    assert all(r["version"] for r in rows)


def test_plugins_list_is_plugins() -> None:
    """Issue 45 item 17: `plm plugins list` was "No such command"."""
    listed, plain = plm("plugins", "list", "--json"), plm("plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == json.loads(plain.stdout)


def test_config_check_accepts_poc_parity() -> None:
    res = plm("config", "check", str(POC))
    assert res.returncode == 0, res.stderr
    assert "hybrid" in res.stdout and "rrf" in res.stdout and "ok" in res.stdout


def test_config_check_prints_the_fusers_settings_for_the_retrievers_configured(tmp_path: Path) -> None:
    # with bm25 alone, the class defaults (order dense, bm25; the POC's expanded profile) do not apply
    config = tmp_path / "bm25.toml"
    config.write_text(
        "[job]\nname = 'b'\n[store]\nuse = 'sqlite'\n[index.load]\nuse = 'markdown_dir'\n[index.chunk]\n"
        "use = 'markdown_semantic'\n[query.retrieve]\nuse = 'hybrid'\n[query.retrieve.retrievers.bm25]\n"
        "use = 'bm25s'\n[query.retrieve.fuser]\nuse = 'rrf'\n"
    )
    res = plm("config", "check", str(config))
    assert res.returncode == 0, res.stderr
    (fuser,) = [line for line in res.stdout.splitlines() if "fuser: rrf" in line]
    assert "'order': ['bm25']" in fuser and "'weights': {'bm25': 1.0}" in fuser and "'expanded': None" in fuser
    assert "dense" not in fuser
    # the POC's pair keeps them
    (poc,) = [line for line in plm("config", "check", str(POC)).stdout.splitlines() if "fuser: rrf" in line]
    assert "'order': ['dense', 'bm25']" in poc and "'weights': {'dense': 0.3, 'bm25': 3.0}" in poc


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ('use = "rrf"', 'use = "rff"', "Did you mean 'rrf'?"),
        ("target_words = 400", "target_wrds = 400", "unknown key 'target_wrds'"),
        ("target_words = 400", 'target_words = "lots"', "target_words"),
        ("[index.chunk]", "[index.chunk", "malformed TOML"),
        # a ranking stage first is named from its own side, not the retrieval's after it
        ('use = "dictionary"', 'use = "collapse"', "'collapse' (rankers) takes Ranking, but the [query] stages start"),
        # a slot that takes one kind lists that kind's names alone
        (
            'use = "sqlite"',
            'use = "sqlit"',
            "unknown stores component 'sqlit'. Did you mean 'sqlite'? Known: postgres, sqlite.",
        ),
    ],
)
def test_broken_configs_fail_with_one_clear_message(tmp_path: Path, old: str, new: str, expect: str) -> None:
    res = plm("config", "check", str(_broken(tmp_path, old, new)))
    assert res.returncode != 0
    assert expect in res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert res.stderr.strip().startswith("error:")


def test_missing_config_file_fails_cleanly(tmp_path: Path) -> None:
    res = plm("config", "check", str(tmp_path / "missing.toml"))
    assert res.returncode != 0 and "not found" in res.stderr and "Traceback" not in res.stderr


def test_set_override_is_validated() -> None:
    res = plm("config", "check", str(POC), "--set", "query.retrieve.fuser.default.k=-3")
    assert res.returncode != 0 and "[query.retrieve.fuser]" in res.stderr
    # a misspelt stage in a --set key makes a new table without `use`: the one meant is named
    res = plm("config", "check", str(POC), "--set", "query.retreive.fuser.default.k=30")
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "[query.retreive]: missing 'use'; did you mean [query.retrieve]?" in " ".join(res.stderr.split())


@pytest.mark.slow
def test_every_command_has_help() -> None:
    for cmd in (
        ["--help"],
        ["run", "--help"],
        ["ingest", "--help"],
        ["query", "--help"],
        ["plugins", "--help"],
        ["config", "check", "--help"],
        ["index", "stats", "--help"],
        ["index", "rebuild", "--help"],
        ["eval", "--help"],
        ["validate", "--help"],
    ):
        res = plm(*cmd)
        assert res.returncode == 0 and "Usage" in res.stdout, cmd


def test_help_loads_every_plugin_and_no_array_or_model_library() -> None:
    """`plm --help` registers every installed plugin's stages and commands, and imports none
    of numpy, scipy, torch, onnxruntime or faiss: a stage module imports those when it runs
    (numpy alone is 0.07 s of every start)."""
    code = (
        "import sys; from plm_index import cli; sys.argv = ['plm', '--help']\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted({'numpy', 'scipy', 'torch', 'onnxruntime', 'faiss'} & set(sys.modules))\n"
        "print('heavy:', heavy, file=sys.stderr)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "Usage" in res.stdout and "ingest" in res.stdout and "serve" in res.stdout, res.stderr[-2000:]
    assert "heavy: []" in res.stderr, res.stderr[-2000:]


def test_autoload_off_hides_third_party_plugins() -> None:
    res = plm("plugins", "--json", env={"PLM_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert res.returncode == 0
    assert {r["package"] for r in json.loads(res.stdout)} == {"plm"}


@pytest.mark.parametrize(
    ("override", "expect"),
    [
        ("query.retrieve.fuser.expanded.weights.lexical=1.0", "unknown ['lexical']"),
        ("job.queries=[]", "queries"),
        ("job=5", "[job] must be a table"),
        ("query.embed.use=yake", "expects"),  # a chunk stage in the query pipeline: types do not fit
    ],
)
def test_config_check_assembles_the_pipelines(override: str, expect: str) -> None:
    res = plm("config", "check", str(POC), "--set", override)
    assert res.returncode == 2, res.stdout
    assert expect in res.stderr and "Traceback" not in res.stderr


def test_a_failed_line_holds_a_hostile_file_name_on_one_line(tmp_path: Path) -> None:
    """Issue 45 E14: a file name with a newline or ESC printed raw forged a second line
    (`failed: ...` then a fake summary) and reached the terminal; now escaped, and cut."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nThe osprey dives.\n")
    (docs / "evil\nadded 99, updated 0\x1b[31m.md").write_bytes(b"\0binary")
    (docs / ("long" * 60 + ".md")).write_bytes(b"\0binary")
    config = tmp_path / "job.toml"
    config.write_text(
        '[job]\nname = "hostile"\n[store]\nuse = "sqlite"\n[index.load]\nuse = "markdown_dir"\n'
        '[index.chunk]\nuse = "markdown_semantic"\n[query.retrieve]\nuse = "bm25s"\n'
    )
    res = plm("ingest", str(docs), "--config", str(config), env={"PLM_DATA_DIR": str(tmp_path / "data")})
    assert res.returncode == 1, res.stderr
    failed = [line for line in res.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 2 and "\x1b" not in res.stderr
    assert any("evil\\nadded 99, updated 0\\x1b[31m.md: binary, not text" in line for line in failed)
    assert not any(line.startswith("added 99") for line in res.stderr.splitlines() + res.stdout.splitlines())
