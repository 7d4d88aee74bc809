"""report.html (``neocorrag_core.eval.html_report``): what the page shows per question and
method, that every untrusted text is escaped, that it loads nothing from elsewhere, and
that it is written by every ``neocorrag eval`` run.

The pages here are built from hand-made records (``html_report_fixtures``); the browser
test (``tests/integration/test_html_report_browser.py``) runs the page's script."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from eval_fixtures import QUESTIONS, run_without_reader, settings_for
from html_report_fixtures import HOSTILE, PASSAGES, results

from neocorrag_core.eval.datasets import QAExample
from neocorrag_core.eval.html_report import (
    EXCERPT_CHARS,
    excerpt,
    render_html_report,
    write_html_report,
)


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each script element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    tags.close()
    return tags


def section(page: str, qid: str) -> str:
    found = re.search(rf'<section class="q" id="q\d+" data-qid="{qid}".*?</section>', page, re.S)
    assert found, qid
    return found.group(0)


def panel(page: str, qid: str, method: str) -> str:
    found = re.search(
        rf'<details class="method" data-method="{method}">.*?</details>'
        r"(?=<details class|</section>)",
        section(page, qid),
        re.S,
    )
    assert found, (qid, method)
    return found.group(0)


def doc(html: str, pid: str) -> str:
    found = re.search(rf'<li data-pid="{pid}">(.*?)</li>', html, re.S)
    assert found, pid
    return found.group(1)


def test_every_question_and_method_is_on_the_page_with_answers_and_scores():
    page = render_html_report(results(), PASSAGES)
    assert page.startswith("<!DOCTYPE html>")
    for qid in ("q1", "q2"):
        sec = section(page, qid)
        for method in ("none", "neocorrag-recall", "evireform"):
            assert f'data-method="{method}"' in sec
    assert "Question q2?" in page
    assert "<b>Stanley</b> | <b>Stanley, ND</b>" in page  # gold answers, aliases too
    one = section(page, "q1")
    assert "F1" in one and "EM" in one
    assert "answer “Stanley &lt;script&gt;" in panel(page, "q1", "neocorrag-recall")
    assert "F1 0.0" in panel(page, "q1", "neocorrag-recall")
    assert "F1 100.0" in panel(page, "q1", "evireform")


def test_gold_marks_kept_and_dropped_reasons():
    page = render_html_report(results(), PASSAGES)
    refiner = panel(page, "q1", "neocorrag-recall")
    kept, dropped = refiner.split("<h4>Dropped")
    assert "badge gold" in doc(kept, "g1")
    assert "kept: top_n (top-N by retrieval rank)" in doc(kept, "g1")
    assert "kept: query_entity (about a query entity)" in doc(kept, "d2")
    assert "badge gold" not in doc(kept, "d2")
    # The gold passage it dropped, with the stage it was lost at; the distractor too.
    assert "badge gold" in doc(dropped, "g2")
    assert "dropped: pruned (reachable only through triples below tau_edge)" in doc(dropped, "g2")
    assert "dropped: no_triples" in doc(dropped, "d1")
    assert "lost the answer" in refiner and "lost gold" in refiner
    # Titles and excerpts (a long text is cut), and the chain block.
    assert "<b>Gold Two</b>" in doc(dropped, "g2")
    assert excerpt(PASSAGES["g2"].text) in doc(dropped, "g2")
    assert len(excerpt(PASSAGES["g2"].text)) <= EXCERPT_CHARS + 2
    assert "<h4>Chain text</h4><pre>Evidence chains:\n1. &lt;script&gt;" in refiner
    # A method that drops nothing lists no dropped documents.
    assert "<h4>Dropped" not in panel(page, "q2", "none")


def test_evireform_queries_what_they_found_and_why_a_passage_came():
    page = render_html_report(results(), PASSAGES)
    evi = panel(page, "q1", "evireform")
    assert "Queries (pool of 5 passages)" in evi
    assert "“Mountrail &lt;script&gt;alert(1)&lt;/script&gt;”" in evi
    assert "bridge: Mountrail County" in evi
    # What the second query found: a passage handed to the reader and a gold one.
    assert 'Second Hop<span class="badge reader">to reader</span>' in evi
    assert 'Gold Two<span class="badge gold">gold</span>' in evi
    assert "found by query 1: “Mountrail &lt;script&gt;" in doc(evi, "x9")
    assert "Evidence facts selected" in evi


def test_hostile_text_is_escaped_and_only_the_pages_own_script_runs():
    page = render_html_report(results(), PASSAGES)
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Title &quot;quoted&quot; &lt;b&gt;bold&lt;/b&gt;" in page
    tags = parse(page)
    assert [t for t, _ in tags.tags].count("script") == 1
    assert "alert" not in tags.scripts[0]
    assert not [t for t, _ in tags.tags if t in {"img", "iframe", "object", "embed", "link"}]


def test_the_page_loads_nothing_from_elsewhere():
    page = render_html_report(results(), PASSAGES)
    for _, attrs in parse(page).tags:
        for key in ("src", "href", "action", "srcset"):
            value = (attrs.get(key) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//")), (key, value)
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page  # a CSP: even a missed escape could load nothing
    # The one URL in the page is a passage's text, escaped as text.
    assert page.count("https://") == page.count("with https://evil.example/x.js") > 0


def test_lost_answer_and_lost_gold_are_marked_per_question():
    page = render_html_report(results(), PASSAGES)
    one, two = section(page, "q1"), section(page, "q2")
    assert 'data-lost-answer="neocorrag-recall"' in one
    assert 'data-lost-gold="neocorrag-recall"' in one
    # evireform's F1 is above none's on q2: no loss; equal scores are no loss either.
    assert 'data-lost-answer=""' in two and 'data-lost-gold=""' in two
    assert '<option value="lost">' in page and '<option value="lost-gold">' in page
    assert '<option value="neocorrag-recall">' in page
    assert '<option value="none">' not in page  # the baseline is always shown


def test_without_a_reader_there_are_no_answers_and_no_answer_filter():
    page = render_html_report(results(read=False), PASSAGES)
    assert 'data-lost-answer=""' in section(page, "q1")
    assert 'data-lost-gold="neocorrag-recall"' in section(page, "q1")
    assert '<option value="lost" disabled>' in page
    assert '<option value="lost-gold">' in page
    assert "no reader ran" in page
    assert '<th class="n">F1</th>' not in page and "answer “" not in page
    assert "lost the answer</span>" not in panel(page, "q1", "neocorrag-recall")


def test_without_gold_ids_there_are_no_gold_marks_and_no_gold_filter():
    page = render_html_report(results(gold=False), PASSAGES)
    assert 'class="badge gold"' not in page.split("<main>")[1]  # (the legend has one)
    assert "no gold passage ids in the data" in page
    assert '<option value="lost-gold" disabled>' in page
    assert 'data-lost-gold=""' in section(page, "q1")
    assert 'data-lost-answer="neocorrag-recall"' in section(page, "q1")  # F1 still compares
    # Reasons are shown all the same.
    assert "dropped: pruned" in panel(page, "q1", "neocorrag-recall")


def test_unknown_passages_and_missing_records_are_shown_not_fatal():
    data = results()
    data["per_question"]["evireform"].pop()  # q2 unfinished by evireform
    page = render_html_report(data, {})
    assert "<code>g1</code>" in page and "(text not in the loaded data)" in page
    assert "no record (not finished)" in panel(page, "q2", "evireform")


def test_written_from_the_runs_questions(tmp_path: Path):
    examples = [
        QAExample("q1", "Question q1?", ("Stanley",), tuple(PASSAGES.values()), frozenset({"g1"})),
    ]
    path = write_html_report(results(), tmp_path, examples)
    assert path == tmp_path / "report.html"
    text = path.read_text(encoding="utf-8")
    assert "<b>Second Hop</b>" in text and "Found by a second query." in text


def test_every_eval_run_writes_report_html(tmp_path: Path):
    settings = settings_for(tmp_path, ("none", "neocorrag-recall"), reader="none", plots=False)
    run_without_reader(settings)
    page = (Path(settings.out) / "report.html").read_text(encoding="utf-8")
    for _, question, _ in QUESTIONS:
        assert question in page
    assert 'data-method="neocorrag-recall"' in page
    assert "Van Hook Township is in Mountrail County." in page  # passage texts by id
