"""report.html in a real headless browser: its inline script runs, shows every question and
method, and the filter (set by the URL hash, as a reader's link would) hides the questions
where no method lost anything.

Needs Chromium (Debian's ``chromium``; CI installs it in ``.ci/run``). Where it is missing
the test installs it with apt-get when it can (root), and skips only when it cannot (in
CI, where ``CI`` is set, it fails instead: there it must run)."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from html_report_fixtures import PASSAGES, results

from neocorrag_core.eval.html_report import render_html_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _find() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def browser() -> str:
    """The path of a Chromium; installed with apt-get when missing and this runs as root."""
    found = _find()
    if found:
        return found
    why = "chromium is not installed"
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        try:
            for args in (
                ["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "chromium"],
            ):
                subprocess.run(args, check=True, capture_output=True, timeout=600, env=env)
        except (subprocess.SubprocessError, OSError) as exc:
            why += f" and apt-get could not install it ({exc})"
        found = _find()
    else:
        why += " and cannot be installed here (no apt-get, or not root)"
    if not found:
        if os.environ.get("CI"):  # CI installs it (.ci/run): there the test must run
            pytest.fail(why)
        pytest.skip(why)
    return found


class Dom(HTMLParser):
    """The attributes of each question section and method panel of a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict[str, str | None]] = {}
        self.panels: dict[tuple[str, str], dict[str, str | None]] = {}
        self.count = ""
        self._qid = ""
        self._in_count = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("data-qid"):
            self._qid = a["data-qid"] or ""
            self.sections[self._qid] = a
        elif tag == "details" and a.get("data-method"):
            self.panels[(self._qid, a["data-method"] or "")] = a
        self._in_count = a.get("id") == "f-count"

    def handle_data(self, data: str) -> None:
        if self._in_count:
            self.count += data
            self._in_count = False


def dump(browser: str, page: Path, profile: Path, fragment: str = "") -> tuple[str, Dom]:
    """The DOM after the page's script ran (``--dump-dom``), raw and parsed."""
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    dom = Dom()
    dom.feed(done.stdout)
    return done.stdout, dom


def hidden(attrs: dict[str, str | None]) -> bool:
    return "hidden" in attrs


def test_the_page_runs_and_the_filters_apply_in_a_browser(browser: str, tmp_path: Path):
    page = tmp_path / "report.html"
    page.write_text(render_html_report(results(), PASSAGES), encoding="utf-8")
    profile = tmp_path / "profile"

    raw, dom = dump(browser, page, profile)
    assert "Question q2?" in raw and "Which &lt;script&gt;alert(1)&lt;/script&gt; county?" in raw
    for method in ("none", "neocorrag-recall", "evireform"):
        assert ("q1", method) in dom.panels and not hidden(dom.panels[("q1", method)])
    assert set(dom.sections) == {"q1", "q2"}
    assert not any(hidden(a) for a in dom.sections.values())
    assert dom.count == "2 of 2 questions shown"  # written by the script: it ran

    # Questions where a method lost an answer: only q1 (the refiner's F1 is below none's).
    _, dom = dump(browser, page, profile, "#lost")
    assert not hidden(dom.sections["q1"]) and hidden(dom.sections["q2"])
    assert dom.count == "1 of 2 questions shown"

    # One method: its panels and the baseline's stay, the others are hidden.
    _, dom = dump(browser, page, profile, "#lost-gold&method=neocorrag-recall")
    assert not hidden(dom.sections["q1"]) and hidden(dom.sections["q2"])
    assert not hidden(dom.panels[("q1", "neocorrag-recall")])
    assert not hidden(dom.panels[("q1", "none")])
    assert hidden(dom.panels[("q1", "evireform")])

    # EviReform lost nothing: filtered to it, no question is left.
    _, dom = dump(browser, page, profile, "#lost&method=evireform")
    assert all(hidden(a) for a in dom.sections.values())
    assert dom.count == "0 of 2 questions shown"
