"""The search page `plm serve` shows at `/`, driven in a real headless Chromium against a real
server with PLM_API_KEY set: ask for the key, type a query, see the expected hit with its
terms marked, its per-retriever rank and the stage timings, apply a filter, take a screenshot."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plm_needs import needs

pytestmark = needs("fastapi", "bm25s")
webdriver = pytest.importorskip("selenium.webdriver")
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    pytest.skip(
        "Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KEY = "page-k3y"
CONFIG = """
[job]
name = "page"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
target_words = 40
min_words = 10
max_words = 60
[query.retrieve]
use = "hybrid"
[query.retrieve.retrievers.bm25]
use = "bm25s"
tokenizer = "bm25s_stem"
method = "lucene"
[query.retrieve.fuser]
use = "rrf"
order = ["bm25"]
"""
DOCS = {
    "alpha": "---\nteam: storage\n---\n# Alpha\n\n## Backup\n\nNightly backups of the alpha volume run at two.\n",
    "beta": "---\nteam: identity\n---\n# Beta\n\n## Tokens\n\nBeta tokens expire; backups of tokens never.\n",
    "gamma": "---\nteam: storage\n---\n# Gamma\n\n## Mirrors\n\nGamma mirrors replicate the archive weekly.\n",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("page")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / f"{name}.md").write_text(text)
    (root / "job.toml").write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if k != "PLM_SERVER"}
    env |= {"PLM_DATA_DIR": str(root / "data"), "PLM_PROGRESS": "0", "PLM_API_KEY": KEY}
    cli = [sys.executable, "-m", "plm_core.cli"]
    res = subprocess.run([*cli, "ingest", "docs", "-c", "job.toml"], cwd=root, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    port = free_port()
    log = (root / "serve.log").open("w")
    proc = subprocess.Popen([*cli, "serve", "-c", "job.toml", "--port", str(port)], cwd=root, env=env, stdout=log)
    url = f"http://127.0.0.1:{port}"
    res = subprocess.run([*cli, "status", "--server", url, "--wait", "60"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    yield url
    proc.terminate()
    proc.wait(timeout=60)
    log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


def search(driver, query: str, filters: str = "") -> None:  # type: ignore[no-untyped-def]
    for field, value in (("q", query), ("filters", filters)):
        box = driver.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    driver.find_element(By.ID, "go").click()


def wait_status(driver, text: str) -> str:  # type: ignore[no-untyped-def]
    wait = WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda d: text in d.find_element(By.ID, "status").text)
    return str(driver.find_element(By.ID, "status").text)


@pytest.mark.slow
def test_search_page_with_key_query_filter_and_screenshot(server: str, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    browser.get(server + "/")
    assert browser.title == "plm search"
    search(browser, "nightly backups")
    assert "API key" in wait_status(browser, "API key")  # the server wants PLM_API_KEY: the page asks
    browser.find_element(By.ID, "key").send_keys(KEY)
    search(browser, "nightly backups")
    wait_status(browser, "hit(s)")
    hits = browser.find_elements(By.CSS_SELECTOR, "li.hit")
    assert hits[0].find_element(By.CLASS_NAME, "doc").text == "alpha"
    assert {m.text.lower() for m in hits[0].find_elements(By.TAG_NAME, "mark")} >= {"nightly", "backups"}
    assert "bm25 #1" in hits[0].find_element(By.CLASS_NAME, "ranks").text
    assert "team: storage" in hits[0].find_element(By.CLASS_NAME, "meta").text
    assert "retrieve" in browser.find_element(By.ID, "timings").text
    assert "page · 3 documents" in browser.find_element(By.ID, "job").text
    search(browser, "backups", filters="team=identity")
    WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, "li.hit .doc")] == ["beta"]
    )
    shot = Path(os.environ.get("PLM_SCREENSHOT_DIR", tmp_path)) / "search_page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
