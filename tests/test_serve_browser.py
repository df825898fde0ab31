"""The web page in a real browser: headless Chromium (Debian's ``chromium``, installed by .ci/run)
driven by Playwright with ``executable_path`` (Playwright's own browser downloads are never used).

Ask the epoch question about the test paper, watch the answer arrive, click its citation, and
read the highlighted passage in its section. The screenshot is kept as a test artifact
(``test-artifacts/serve_page.png``, or under ``$TREERAG_TEST_ARTIFACTS``).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.serve_process import running_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _browser_or_skip():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    return sync_playwright, CHROMIUM


def test_ask_read_the_answer_and_open_its_citation(paper_index_dir: Path, tmp_path: Path) -> None:
    sync_playwright, chromium = _browser_or_skip()
    artifacts = Path(os.environ.get("TREERAG_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "serve_page.png"
    with running_server("--index", str(paper_index_dir), "--log", str(tmp_path / "runs.sqlite3")) as srv, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            external: list[str] = []
            page.on("request", lambda r: None if r.url.startswith(srv.url) or r.url.startswith("data:")
                    else external.append(r.url))
            page.goto(srv.url + "/")
            page.wait_for_function("document.querySelector('#index-info').textContent.includes('1 document')")
            page.fill("#question", "How many epochs was the model trained for?")
            page.click("#ask-button")

            page.wait_for_selector("#answer .cite", timeout=60_000)
            assert "50 epochs" in page.inner_text("#answer")
            assert page.is_hidden("#not-found")  # the evidence was found
            for step in ("step1", "step2", "context", "answer"):
                assert page.get_attribute(f'#steps li[data-step="{step}"]', "class") == "done"
            located = page.locator("#tree .node.located")
            assert located.count() >= 1 and "3.3 Training Procedure" in page.inner_text("#tree")

            # the citation of the sentence that answers: its passage opens highlighted in its section
            cite = page.locator("#answer .cite").first
            n = cite.get_attribute("data-n")
            cite.click()
            mark = page.wait_for_selector("#viewer mark.quote")
            assert "50 epochs" in mark.inner_text()
            section = page.inner_text("#viewer")
            assert len(section) >= len(mark.inner_text())  # the quote sits inside its section's text
            assert f"[{n}]" in page.inner_text("#viewer-title")
            assert page.inner_text("#viewer-cite").startswith("test_paper.md:L")
            assert page.locator("#tree .node.current").count() == 1

            # the run is listed among the recent runs
            page.wait_for_selector("#runs li .q")
            assert "epochs" in page.inner_text("#runs")
            page.screenshot(path=str(shot), full_page=False)
            assert shot.stat().st_size > 10_000
            assert errors == [] and external == []
        finally:
            browser.close()


def test_with_a_token_and_a_question_the_documents_cannot_answer(paper_index_dir: Path) -> None:
    sync_playwright, chromium = _browser_or_skip()
    token = "page-token-" + "y" * 16
    with running_server("--index", str(paper_index_dir), "--no-log", env={"TREERAG_SERVE_TOKEN": token}) as srv, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(srv.url + "/")
            page.wait_for_selector("#token-form:not([hidden])")  # the API said 401: the page asks for the token
            page.fill("#token", token)
            page.click("#token-form button")
            page.wait_for_function("document.querySelector('#index-info').textContent.includes('1 document')")
            page.fill("#question", "What is the boiling point of tungsten hexafluoride in Antarctica?")
            page.keyboard.press("Enter")
            page.wait_for_selector("#answer-card:not([hidden])", timeout=60_000)
            page.wait_for_selector('#steps li[data-step="answer"].done')
            assert page.is_visible("#not-found")
            assert "Not in these documents" in page.inner_text("#not-found")
        finally:
            browser.close()
