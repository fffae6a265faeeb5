"""The search page `plm serve` shows at `/`, driven in a real headless Chromium against a real
server with PLM_API_KEY set: ask for the key, type a query, see the expected hit with its
terms marked, its per-retriever rank and the stage timings, apply a filter, take a screenshot;
the URL holds the query (load it, reload it, Back), a hit opens its document rendered at the
hit's heading, snippets are plain text cut between words, the Filters box takes the CLI's
`--filter` syntax or says what it could not read, and only matching words are marked."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plm_needs import needs

httpx = pytest.importorskip("httpx")

pytestmark = [needs("fastapi", "bm25s"), pytest.mark.slow]  # a real Chromium: the full suite only
webdriver = pytest.importorskip("selenium.webdriver")
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    pytest.skip(
        "Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
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
    "alpha": "---\nteam: storage\nversion: 2\n---\n"
    "# Alpha\n\n## Backup\n\nNightly backups of the alpha volume run at two.\n",
    "beta": "---\nteam: identity\nversion: 3\n---\n"
    "# Beta\n\n## Tokens\n\nBeta tokens expire; backups of tokens never.\n",
    "gamma": "---\nteam: storage\nversion: 4\n---\n"
    "# Gamma\n\n## Mirrors\n\nGamma mirrors replicate the archive weekly.\n",
}
# Posted by the tests after the first (which counts 3 documents): an id with a `/`, as ids of
# files in subfolders are; sections long enough to put the last one far below the fold; a
# paragraph longer than a snippet, with Markdown in it, `do` and `down`, and a script tag.
FILLER = [f"lorem{i:02d}ipsum" for i in range(40)]
HANDBOOK = "\n\n".join(
    [
        "# Team A handbook",
        *(f"## Chapter {n}\n\n" + " ".join(f"{w}{n}" for w in FILLER[:30]) + "." for n in range(12)),
        "## Restore drill\n\n"
        + " ".join(FILLER[:20])
        + " when the disk is down, do restore the **zeppelin** archive"
        + " from the [nightly mirror](http://example.invalid/m) "
        + " ".join(FILLER[20:40])
        + ".",
        "## Notes\n\n<script>window.injected = 1</script> Scripts in a document are shown, never run.",
    ]
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CLI = [sys.executable, "-m", "plm_index.cli"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The ingested folder and the environment the CLI and the server run with."""
    root = tmp_path_factory.mktemp("page")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / f"{name}.md").write_text(text)
    (root / "job.toml").write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if k != "PLM_SERVER"}
    env |= {"PLM_DATA_DIR": str(root / "data"), "PLM_PROGRESS": "0", "PLM_API_KEY": KEY}
    res = subprocess.run([*CLI, "ingest", "docs", "-c", "job.toml"], cwd=root, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return root, env


@pytest.fixture(scope="module")
def server(corpus: tuple[Path, dict[str, str]]) -> Iterator[str]:
    root, env = corpus
    port = free_port()
    log = (root / "serve.log").open("w")
    proc = subprocess.Popen([*CLI, "serve", "-c", "job.toml", "--port", str(port)], cwd=root, env=env, stdout=log)
    url = f"http://127.0.0.1:{port}"
    res = subprocess.run([*CLI, "status", "--server", url, "--wait", "60"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    yield url
    proc.terminate()
    proc.wait(timeout=60)
    log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
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


def with_key(driver: WebDriver, server: str) -> None:
    """This tab holds the key, as after a user typed it once."""
    driver.get(server + "/")
    driver.execute_script("sessionStorage.setItem('plm-key', arguments[0])", KEY)


def wait_hits(driver: WebDriver, expected: list[str]) -> None:
    WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, "li.hit .doc")] == expected
    )


def url_params(driver: WebDriver) -> dict[str, list[str]]:
    from urllib.parse import parse_qs

    return parse_qs(str(driver.execute_script("return location.search")).lstrip("?"))


@pytest.fixture(scope="module")
def handbook(server: str) -> str:
    record = {"id": "team-a/README", "text": HANDBOOK, "team": "a"}
    headers = {"Authorization": f"Bearer {KEY}"}
    res = httpx.post(server + "/documents", json={"records": [record]}, headers=headers, timeout=60)
    assert res.status_code == 200 and res.json()["added"] == ["team-a/README"], res.text
    return server


def test_the_url_holds_the_query_so_it_loads_reloads_and_goes_back(server: str, browser: WebDriver) -> None:
    with_key(browser, server)
    browser.get(server + "/?q=backups&k=1&filter=team%3Didentity")  # a link someone shared
    wait_hits(browser, ["beta"])
    assert browser.find_element(By.ID, "q").get_attribute("value") == "backups"
    assert browser.find_element(By.ID, "k").get_attribute("value") == "1"
    assert browser.find_element(By.ID, "filters").get_attribute("value") == "team=identity"
    search(browser, "gamma mirrors")
    wait_hits(browser, ["gamma"])
    assert url_params(browser) == {"q": ["gamma mirrors"], "k": ["1"]}
    browser.refresh()  # a reload (or a bookmark) shows the same results
    wait_hits(browser, ["gamma"])
    browser.back()
    wait_hits(browser, ["beta"])
    assert browser.find_element(By.ID, "q").get_attribute("value") == "backups"
    assert url_params(browser) == {"q": ["backups"], "k": ["1"], "filter": ["team=identity"]}
    browser.forward()
    wait_hits(browser, ["gamma"])


def test_the_filters_box_takes_the_cli_syntax_or_says_what_it_cannot_read(
    server: str, browser: WebDriver, corpus: tuple[Path, dict[str, str]]
) -> None:
    root, env = corpus
    cmd = [*CLI, "query", "backups", "-c", "job.toml", "--filter", "version>=3", "--json"]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    cli_ids = [hit["doc_id"] for hit in json.loads(res.stdout)["hits"]]
    assert cli_ids == ["beta"]  # alpha (version 2) also holds "backups"
    with_key(browser, server)
    for typed in ("version>=3", "version >= 3", "team=identity,storage version>2"):
        search(browser, "backups", filters=typed)
        wait_hits(browser, cli_ids)
        assert "filter" in url_params(browser)
    search(browser, "backups", filters="teem=identity")  # a misspelled field: the page says the rule
    assert "a chunk without a filtered field never matches" in wait_status(browser, "no match")
    search(browser, "backups", filters="version>>")
    message = wait_status(browser, "bad filter")
    assert "'version>>'" in message and "operator" in message
    assert browser.find_elements(By.CSS_SELECTOR, "li.hit") == []
    assert "error" in (browser.find_element(By.ID, "status").get_attribute("class") or "")


def test_snippets_are_plain_text_cut_between_words_and_only_matching_words_are_marked(
    handbook: str, browser: WebDriver
) -> None:
    with_key(browser, handbook)
    search(browser, "do zeppelin")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "li.hit .doc"))
    hit = browser.find_elements(By.CSS_SELECTOR, "li.hit")[0]
    assert hit.find_element(By.CLASS_NAME, "doc").text == "team-a/README"
    text = hit.find_element(By.CLASS_NAME, "text").text
    assert "#" not in text and "**" not in text and "](" not in text, text
    assert text.startswith("… ") and text.endswith(" …"), text  # longer than a snippet: cut at both ends
    source = {w.strip(".,*[]") for w in HANDBOOK.replace("](", " ").split()}
    words = [w.strip(".,") for w in text.removeprefix("… ").removesuffix(" …").split()]
    assert [w for w in words if w not in source] == [], text  # no word cut in two
    assert "do restore the zeppelin archive from the nightly mirror" in text
    marks = [m.text.lower() for m in hit.find_elements(By.TAG_NAME, "mark")]
    assert sorted(marks) == ["do", "zeppelin"], marks  # not "down"


def test_a_hit_opens_its_document_rendered_at_the_hits_heading(handbook: str, browser: WebDriver) -> None:
    with_key(browser, handbook)
    search(browser, "do zeppelin")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "li.hit a.doc"))
    results = browser.current_url
    browser.find_elements(By.CSS_SELECTOR, "li.hit a.doc")[0].click()
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "article h2"))
    assert browser.execute_script("return new URLSearchParams(location.search).get('id')") == "team-a/README"
    assert browser.execute_script("return location.hash") == "#restore-drill"
    article = browser.find_element(By.TAG_NAME, "article")
    assert article.find_element(By.CSS_SELECTOR, "h1#team-a-handbook").text == "Team A handbook"
    assert len(article.find_elements(By.TAG_NAME, "h2")) == 14  # the whole document, headings as headings
    assert "#" not in article.text and "**" not in article.text
    assert article.find_element(By.TAG_NAME, "strong").text == "zeppelin"
    assert article.find_element(By.LINK_TEXT, "nightly mirror").get_attribute("href") == "http://example.invalid/m"
    assert "<script>window.injected = 1</script>" in article.text  # shown as text, not run
    assert browser.execute_script("return window.injected") is None
    assert "team\na" in browser.find_element(By.ID, "metadata").text
    top = browser.execute_script("return document.getElementById('restore-drill').getBoundingClientRect().top")
    assert browser.execute_script("return window.scrollY") > 500 and 0 <= top < 200  # scrolled to the heading
    browser.back()  # back to the same results
    WebDriverWait(browser, 30).until(lambda d: d.current_url == results and d.find_elements(By.CSS_SELECTOR, "li.hit"))
    assert browser.find_element(By.ID, "q").get_attribute("value") == "do zeppelin"


def test_a_documents_front_matter_is_shown_as_metadata_not_as_text(server: str, browser: WebDriver) -> None:
    with_key(browser, server)
    browser.get(server + "/doc?id=alpha")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "article h2#backup"))
    article = browser.find_element(By.TAG_NAME, "article").text
    assert article.startswith("Alpha\nBackup\nNightly backups") and "team" not in article and "---" not in article
    assert "team\nstorage\nversion\n2" in browser.find_element(By.ID, "metadata").text
    browser.get(server + "/doc?id=no/such/doc")
    assert "no document with id 'no/such/doc'" in wait_status(browser, "no document")


def test_the_pages_run_their_own_script_and_no_other(server: str, browser: WebDriver) -> None:
    # The Content-Security-Policy allows each page's own inline script (by hash) only: a
    # script element put in by anything else (an injection) does not run.
    inject = (
        "const s = document.createElement('script'); s.textContent = 'window.injected = 1'; document.body.append(s);"
    )
    for path, ready in (("/", "#q"), ("/doc?id=alpha", "article h2#backup")):
        with_key(browser, server)
        browser.get(server + path)
        WebDriverWait(browser, 30).until(lambda d, ready=ready: d.find_elements(By.CSS_SELECTOR, ready))  # it ran
        browser.execute_script(inject)
        assert browser.execute_script("return window.injected") is None, path


def test_text_without_spaces_is_marked_where_the_querys_characters_stand(server: str, browser: WebDriver) -> None:
    record = {"id": "zh/storage", "text": "# 卷\n\nqzhvolume 持久卷是集群中的一块存储，由管理员制备。\n"}
    res = httpx.post(server + "/documents", json={"records": [record]}, headers={"Authorization": f"Bearer {KEY}"},
                     timeout=60)  # fmt: skip
    assert res.status_code == 200, res.text
    with_key(browser, server)
    search(browser, "qzhvolume 存储")
    wait_hits(browser, ["zh/storage"])
    hit = browser.find_elements(By.CSS_SELECTOR, "li.hit")[0]
    marks = [m.text for m in hit.find_elements(By.CLASS_NAME, "text")[0].find_elements(By.TAG_NAME, "mark")]
    assert marks == ["qzhvolume", "存储"], marks  # the pair inside the run, not the whole run
    assert hit.find_element(By.CLASS_NAME, "text").get_attribute("dir") == "auto"
