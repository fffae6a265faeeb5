"""The sample corpus's YAML cases as tests (one per case, marker `cases`), and `plm validate`.

All tests share one index folder, ingested once (~60 s: spaCy and MiniLM), and by
`plm validate` itself: the first CLI run meets an empty index, as on a fresh clone. The
Job's own ingest then finds the index up to date and skips.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plm_core.settings import Settings
from plm_eval.validation import Case, load_cases, run_case
from plm_index.job import Job

REPO = Path(__file__).resolve().parents[1]
POC = REPO / "configs" / "poc_parity.toml"
SAMPLE = REPO / "examples" / "sample_corpus"
CASES_FILE = SAMPLE / "cases.yaml"
CASES = load_cases(CASES_FILE)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cases-index")


def plm_validate(cases: Path, index_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "plm_index.cli",
            "validate",
            "--config",
            str(POC),
            "--cases",
            str(cases),
            "--index",
            str(index_dir),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        # wide enough that rich never wraps a message inside the table
        env={**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "COLUMNS": "300"},
    )


@pytest.fixture(scope="module")
def first_cli_run(index_dir: Path) -> subprocess.CompletedProcess[str]:
    return plm_validate(CASES_FILE, index_dir)


@pytest.fixture(scope="module")
def job(index_dir: Path, first_cli_run: subprocess.CompletedProcess[str]) -> Iterator[Job]:
    job = Job.from_config(POC, index_dir=index_dir, settings=Settings(progress=False))
    job.ingest([SAMPLE / "docs"])  # skipped when the CLI run built the same index
    yield job
    job.close()


@pytest.mark.cases
@pytest.mark.parametrize("case", CASES, ids=[str(c.name) for c in CASES])
def test_case(case: Case, job: Job) -> None:
    result = run_case(job, case)
    assert result.passed, result.report()


def test_cases_with_filters_keep_to_them(job: Job) -> None:
    def case(section: str) -> Case:
        return Case.model_validate(
            {
                "name": f"filtered-{section}",
                "query": "What RPO do Vault snapshots give?",
                "k": 5,
                "filters": {"section": section},
                "expect": {"doc_id": "disaster-recovery"},
            }
        )

    inside = run_case(job, case("operations"))
    assert inside.passed, inside.report()
    assert all(h.metadata["section"] == "operations" for h in inside.hits) and len(inside.hits) == 5
    outside = run_case(job, case("billing"))  # the expected page is not in that section
    assert outside.status == "fail" and all(h.metadata["section"] == "billing" for h in outside.hits)


def test_cli_ingests_an_empty_index_and_passes_on_the_shipped_cases(
    first_cli_run: subprocess.CompletedProcess[str], index_dir: Path
) -> None:
    res = first_cli_run
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"index at {index_dir} is empty: ingesting" in res.stderr
    assert f"{len(CASES)} passed, 0 failed" in res.stdout
    again = plm_validate(CASES_FILE, index_dir)
    assert again.returncode == 0 and "ingesting" not in again.stderr  # a built index is reused as is


def test_cli_fails_readably_on_a_broken_case(job: Job, index_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "cases:\n"
        "  - name: rpo of vault snapshots\n"
        "    query: What RPO do Vault snapshots give?\n"
        "    expect: {doc_id: disaster-recovery, rank_at_most: 1}\n"
        "  - name: rpo from the billing page\n"  # cannot hold: billing says nothing about RPO
        "    query: What RPO do Vault snapshots give?\n"
        "    expect: {doc_id: billing-and-invoices, text_contains: RPO of 99 minutes}\n"
    )
    res = plm_validate(broken, index_dir)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert "1 passed, 1 failed" in res.stdout
    assert "FAIL" in res.stdout and "rpo from the billing page" in res.stdout
    assert "doc_id: 'billing-and-invoices' is not in the top 5" in res.stdout
    assert "text_contains: no hit in the top 5 contains 'RPO of 99 minutes'" in res.stdout
