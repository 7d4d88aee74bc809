"""report.html: one self-contained page to browse a run question by question.

report.md gives the means; this page shows what is behind them: per question, the gold
answers and, per method, the reader's answer, its EM/F1, the documents handed to the
reader (title, an excerpt, a gold mark, why the method kept it), the retrieved ones it
dropped (and why, where the method says), EviReform's queries and what each found, and
the chain block. A select narrows the page to the questions where a method lost an answer
(its F1 below the plain top-k's, ``none``) or a gold passage (its Recall below
``none``'s), and to one method.

The page needs no server and loads nothing: its style and its small script are inline, a
Content-Security-Policy forbids every other source, and every text (questions, passages,
model answers: untrusted) is escaped with :func:`html.escape`. The script reads only
``data-`` attributes, never text, and the URL hash (``#lost``, ``#lost-gold``,
``#method=NAME``, joined by ``&``) sets the filter at load, so a filtered view is a link.

:func:`render_html_report` is pure (results and passages in, the page out);
:func:`write_html_report` finds the passages' texts and writes ``report.html``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from neocorrag_core.eval.datasets import QAExample
from neocorrag_core.types import KeepReason, LossStage, Passage

logger = logging.getLogger(__name__)

BASELINE = "none"
"""The method every other one is compared with (the retrieved top-k, unrefined)."""

EXCERPT_CHARS = 280
"""At most this many characters of a passage's text are shown (cut at a word)."""

_LOSS_LABELS = {
    LossStage.NO_TRIPLES.value: "no triple was extracted from it",
    LossStage.NOT_CONNECTED.value: "its triples are not within max_hops of a seed",
    LossStage.PRUNED.value: "reachable only through triples below tau_edge",
    LossStage.OUTSIDE_TOP_M.value: "reached, but outside the top-M candidate paths",
    LossStage.NO_CHOSEN_CHAIN.value: "in a candidate path, but in no chosen chain",
    LossStage.KEEP_RULE.value: "in a chosen chain, but dropped by the keep rule",
}

# Keys of a record's ``info`` that the page shows in their own place.
_SHOWN_INFO = frozenset(
    {
        "keep_reasons",
        "drop_stages",
        "queries",
        "query_results",
        "pool_ids",
        "first_pool_ids",
        "found_by",
        "provenance",
        "evidence",
    }
)

_STYLE = """
:root{--gold:#b7791f;--lost:#c53030;--muted:#666;--line:#ddd}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin:.2em 0}h4{margin:.6em 0 .2em;font-size:1em}
table{border-collapse:collapse;margin:.4em 0}
td,th{border:1px solid var(--line);padding:2px 6px;text-align:left;vertical-align:top}
td.n,th.n{text-align:right}
.controls{position:sticky;top:0;background:#f7f7f7;border:1px solid var(--line);
padding:.5em;z-index:1}
.controls label{margin-right:1em}
section.q{border-top:2px solid #999;margin-top:1.2em;padding-top:.4em}
.meta{color:var(--muted);margin:.2em 0}
details.method{border:1px solid var(--line);margin:.3em 0;padding:.2em .5em}
details.method>summary{cursor:pointer}
.badge{display:inline-block;border-radius:3px;padding:0 4px;font-size:.85em;margin-left:4px}
.gold{background:#fdf3d8;color:var(--gold);border:1px solid var(--gold)}
.lost{background:#fde8e8;color:var(--lost);border:1px solid var(--lost)}
.reader{background:#e6f0fa;color:#2b6cb0;border:1px solid #2b6cb0}
.why{color:var(--muted);font-size:.9em}
ol.docs,ul.docs{margin:.2em 0;padding-left:1.6em}
ol.docs li,ul.docs li{margin:.25em 0}
.excerpt{color:#333;margin:0}
.dropped .excerpt{color:var(--muted)}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.4em;margin:.2em 0;font-size:.9em}
code{font-size:.9em}
tr.lost-row td{background:#fff5f5}
[hidden]{display:none !important}
"""

# Reads data- attributes only; builds no HTML from the page's text.
_SCRIPT = """
(function () {
  var show = document.getElementById("f-show");
  var pick = document.getElementById("f-method");
  var count = document.getElementById("f-count");
  var sections = document.querySelectorAll("section.q");
  function has(el, attr, method) {
    var names = (el.getAttribute(attr) || "").split(" ").filter(Boolean);
    return method ? names.indexOf(method) >= 0 : names.length > 0;
  }
  function apply(save) {
    var mode = show.value, method = pick.value, shown = 0;
    for (var i = 0; i < sections.length; i++) {
      var q = sections[i];
      var ok = mode === "all" || has(q, mode === "lost" ? "data-lost-answer" : "data-lost-gold",
        method);
      q.hidden = !ok;
      if (ok) { shown++; }
      var parts = q.querySelectorAll("[data-method]");
      for (var j = 0; j < parts.length; j++) {
        var name = parts[j].getAttribute("data-method");
        parts[j].hidden = !!method && name !== method && name !== "none";
      }
    }
    count.textContent = shown + " of " + sections.length + " questions shown";
    if (save) {
      var tags = [];
      if (mode !== "all") { tags.push(mode); }
      if (method) { tags.push("method=" + encodeURIComponent(method)); }
      try { history.replaceState(null, "", "#" + tags.join("&")); } catch (e) { /* file: */ }
    }
  }
  function choose(select, value) {
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === value && !select.options[i].disabled) {
        select.value = value;
        return;
      }
    }
  }
  function fromHash() {
    show.value = "all";
    pick.value = "";
    var tags = location.hash.replace(/^#/, "").split("&");
    for (var i = 0; i < tags.length; i++) {
      if (tags[i] === "lost" || tags[i] === "lost-gold") { choose(show, tags[i]); }
      else if (tags[i].indexOf("method=") === 0) {
        try { choose(pick, decodeURIComponent(tags[i].slice(7))); } catch (e) { /* bad hash */ }
      }
    }
    apply(false);
  }
  function openAll(open) {
    var all = document.querySelectorAll("details.method");
    for (var i = 0; i < all.length; i++) { all[i].open = open; }
  }
  show.addEventListener("change", function () { apply(true); });
  pick.addEventListener("change", function () { apply(true); });
  document.getElementById("f-open").addEventListener("click", function () { openAll(true); });
  document.getElementById("f-close").addEventListener("click", function () { openAll(false); });
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def _e(value: Any) -> str:
    """``value`` as text, escaped for element content and quoted attributes."""
    return escape(value if isinstance(value, str) else str(value), quote=True)


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of ``text`` (whitespace collapsed), cut at a word.

    The page shows excerpts, not whole passages, so a run of a hundred questions with a
    dozen methods stays a page a browser opens at once."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + " …"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.1f}"


def _methods(results: Mapping[str, Any]) -> list[str]:
    names = list(results.get("methods") or {})
    for name in results.get("per_question") or {}:
        if name not in names:
            names.append(name)
    return names


def _questions(
    results: Mapping[str, Any], methods: Sequence[str]
) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """Question ids in run order, each with its record per method."""
    by_question: dict[str, dict[str, dict[str, Any]]] = {}
    for name in methods:
        for record in (results.get("per_question") or {}).get(name, []):
            by_question.setdefault(str(record["qid"]), {})[name] = record
    return list(by_question.items())


def _below(records: Mapping[str, dict[str, Any]], key: str) -> list[str]:
    """Methods whose ``key`` score is below the baseline's on this question."""
    base = records.get(BASELINE)
    if base is None or base.get(key) is None:
        return []
    floor = float(base[key])
    return [
        name
        for name, r in records.items()
        if name != BASELINE and r.get(key) is not None and float(r[key]) < floor - 1e-9
    ]


class _Page:
    """Renders one run; holds what every part needs (passage texts, whether a reader ran)."""

    def __init__(self, results: Mapping[str, Any], passages: Mapping[str, Passage]) -> None:
        self.results = results
        self.passages = passages
        self.settings: Mapping[str, Any] = results.get("settings") or {}
        self.read = self.settings.get("reader") != "none"
        self.methods = _methods(results)
        self.questions = _questions(results, self.methods)
        self.with_gold = any(
            r.get("gold_ids") for _, records in self.questions for r in records.values()
        )

    # -- passages ---------------------------------------------------------------------------

    def _title(self, pid: str) -> str:
        passage = self.passages.get(pid)
        return passage.title if passage is not None and passage.title else pid

    def _doc(
        self,
        pid: str,
        gold: frozenset[str],
        *,
        why: str = "",
        text: str | None = None,
        cut: bool = False,
    ) -> str:
        """One document: gold mark, title, why it is here (or not), an excerpt."""
        passage = self.passages.get(pid)
        if text is None and passage is not None:
            text = passage.text
        mark = '<span class="badge gold">gold</span>' if pid in gold else ""
        title = (
            f"<b>{_e(passage.title)}</b>"
            if passage is not None and passage.title
            else f"<code>{_e(pid)}</code>"
        )
        note = ' <span class="why">(cut to its evidence sentences)</span>' if cut else ""
        body = (
            f'<p class="excerpt">{_e(excerpt(text))}</p>'
            if text
            else '<p class="excerpt why">(text not in the loaded data)</p>'
        )
        reason = f' <span class="why">{why}</span>' if why else ""
        return f'<li data-pid="{_e(pid)}">{title}{mark}{reason}{note}{body}</li>'

    # -- one method on one question ---------------------------------------------------------

    def _kept_reason(self, pid: str, index: int, info: Mapping[str, Any]) -> str:
        """Why the method handed ``pid`` to the reader, from its record's ``info`` (escaped)."""
        parts = []
        reasons = info.get("keep_reasons") or {}
        if pid in reasons:
            value = str(reasons[pid])
            try:
                label = KeepReason(value).label
            except ValueError:
                label = ""
            parts.append(f"kept: {_e(value)}" + (f" ({_e(label)})" if label else ""))
        found_by, queries = info.get("found_by"), info.get("queries") or []
        if isinstance(found_by, list) and index < len(found_by):
            j = found_by[index]
            if isinstance(j, int) and 0 < j < len(queries):
                parts.append(f"found by query {j}: “{_e(_query_text(queries[j]))}”")
        provenance = (info.get("provenance") or {}).get(pid) or {}
        if isinstance(provenance, Mapping) and provenance.get("bridge"):
            parts.append(f"bridge: {_e(provenance['bridge'])}")
        return "; ".join(parts)

    def _dropped(self, record: Mapping[str, Any], gold: frozenset[str]) -> str:
        info = record.get("info") or {}
        stages = info.get("drop_stages") or {}
        shown = set(record.get("context_ids") or ())
        candidates = list(record.get("retrieved_ids") or ())
        for pid in [*stages, *(info.get("keep_reasons") or {})]:
            if pid not in candidates:
                candidates.append(pid)
        items = []
        for pid in candidates:
            if pid in shown:
                continue
            stage = stages.get(pid)
            if stage:
                label = _LOSS_LABELS.get(str(stage), "")
                why = f"dropped: {_e(stage)}" + (f" ({_e(label)})" if label else "")
            else:
                why = "dropped (the record gives no reason)"
            items.append(self._doc(pid, gold, why=why))
        if not items:
            return ""
        return (
            f"<h4>Dropped ({len(items)} of the retrieved or considered)</h4>"
            f'<ul class="docs dropped">{"".join(items)}</ul>'
        )

    def _queries(self, record: Mapping[str, Any], gold: frozenset[str]) -> str:
        """EviReform's queries: each one's text, source and bridge, and what it found."""
        info = record.get("info") or {}
        queries, found = info.get("queries"), info.get("query_results")
        if not queries:
            return ""
        shown = set(record.get("context_ids") or ())
        rows = []
        for i, query in enumerate(queries):
            ids = found[i] if isinstance(found, list) and i < len(found) else []
            kind = query[1] if isinstance(query, list) and len(query) > 1 else ""
            bridge = query[3] if isinstance(query, list) and len(query) > 3 else ""
            hits = []
            for pid in ids or ():
                badges = ""
                if pid in gold:
                    badges += '<span class="badge gold">gold</span>'
                if pid in shown:
                    badges += '<span class="badge reader">to reader</span>'
                hits.append(f"{_e(self._title(pid))}{badges}")
            where = f" · bridge: {_e(bridge)}" if bridge else ""
            rows.append(
                f"<li><b>“{_e(_query_text(query))}”</b> "
                f'<span class="why">{_e(kind)}{where}</span><br>'
                f"found: {', '.join(hits) or 'nothing'}</li>"
            )
        pool = info.get("pool_ids")
        size = f" (pool of {len(pool)} passages)" if isinstance(pool, list) else ""
        return f'<h4>Queries{size}</h4><ol class="docs" start="0">{"".join(rows)}</ol>'

    def _method(
        self,
        name: str,
        record: Mapping[str, Any] | None,
        lost_answer: Sequence[str],
        lost_gold: Sequence[str],
    ) -> str:
        if record is None:
            return (
                f'<details class="method" data-method="{_e(name)}"><summary><b>{_e(name)}'
                "</b>: no record (not finished)</summary></details>"
            )
        gold = frozenset(record.get("gold_ids") or ())
        info = record.get("info") or {}
        context = list(record.get("context_ids") or ())
        cut = record.get("context_texts") or {}
        badges = ""
        if name in lost_answer:
            badges += '<span class="badge lost">lost the answer</span>'
        if name in lost_gold:
            badges += '<span class="badge lost">lost gold</span>'
        got = sum(pid in gold for pid in context)
        gold_part = f", {got}/{len(gold)} gold" if gold else ""
        said = ""
        if self.read:
            answer = "abstained" if record.get("abstained") else record.get("prediction", "")
            said = (
                f" · answer “{_e(answer)}” · EM {_pct(record.get('em'))} "
                f"F1 {_pct(record.get('f1'))}"
            )
        summary = f"<b>{_e(name)}</b>{said} · {len(context)} docs{gold_part}{badges}"
        kept = "".join(
            self._doc(
                pid,
                gold,
                why=self._kept_reason(pid, i, info),
                text=cut.get(pid),
                cut=pid in cut,
            )
            for i, pid in enumerate(context)
        )
        parts = [
            f"<h4>Handed to the reader ({len(context)})</h4>",
            f'<ol class="docs kept">{kept}</ol>' if kept else "<p class='why'>nothing</p>",
            self._dropped(record, gold),
            self._queries(record, gold),
        ]
        evidence = info.get("evidence")
        if isinstance(evidence, list) and evidence:
            facts = "".join(f"<li>{_e(fact)}</li>" for fact in evidence)
            parts.append(f"<h4>Evidence facts selected</h4><ul>{facts}</ul>")
        if record.get("chain_text"):
            parts.append(f"<h4>Chain text</h4><pre>{_e(record['chain_text'])}</pre>")
        if self.read and record.get("raw_prediction") not in (None, record.get("prediction")):
            parts.append(f"<h4>Reader's raw output</h4><pre>{_e(record['raw_prediction'])}</pre>")
        rest = {k: v for k, v in info.items() if k not in _SHOWN_INFO and v not in (None, [], {})}
        if rest:
            text = json.dumps(rest, ensure_ascii=False, indent=1, default=str)
            if len(text) > 4000:
                text = text[:4000] + "\n…"
            parts.append(
                f"<details><summary>other record info</summary><pre>{_e(text)}</pre></details>"
            )
        return (
            f'<details class="method" data-method="{_e(name)}"><summary>{summary}</summary>'
            f"{''.join(parts)}</details>"
        )

    # -- one question -----------------------------------------------------------------------

    def _scores(
        self,
        records: Mapping[str, dict[str, Any]],
        lost_answer: Sequence[str],
        lost_gold: Sequence[str],
    ) -> str:
        head = "<tr><th>method</th>"
        if self.read:
            head += '<th>answer</th><th class="n">EM</th><th class="n">F1</th>'
        head += '<th class="n">Recall</th><th class="n">docs</th></tr>'
        rows = [head]
        for name in self.methods:
            record = records.get(name)
            if record is None:
                continue
            lost = name in lost_answer or name in lost_gold
            cls = ' class="lost-row"' if lost else ""
            row = f'<tr data-method="{_e(name)}"{cls}><td>{_e(name)}</td>'
            if self.read:
                answer = "abstained" if record.get("abstained") else record.get("prediction", "")
                row += (
                    f"<td>{_e(answer)}</td><td class='n'>{_pct(record.get('em'))}</td>"
                    f"<td class='n'>{_pct(record.get('f1'))}</td>"
                )
            recall = _pct(record.get("recall")) if record.get("gold_ids") else "–"
            row += (
                f"<td class='n'>{recall}</td>"
                f"<td class='n'>{len(record.get('context_ids') or ())}</td></tr>"
            )
            rows.append(row)
        return f'<table class="scores">{"".join(rows)}</table>'

    def _question(self, n: int, qid: str, records: Mapping[str, dict[str, Any]]) -> str:
        first = next(iter(records.values()))
        lost_answer = _below(records, "f1") if self.read else []
        lost_gold = _below(records, "recall") if first.get("gold_ids") else []
        answers = first.get("answers") or []
        gold_ids = first.get("gold_ids") or []
        gold_line = (
            "gold passage(s): " + ", ".join(_e(self._title(pid)) for pid in gold_ids)
            if gold_ids
            else "no gold passage ids in the data"
        )
        meta = (
            f'<p class="meta">id <code>{_e(qid)}</code> · gold answer(s): '
            f"{' | '.join(f'<b>{_e(a)}</b>' for a in answers) or '–'} · {gold_line}</p>"
        )
        methods = "".join(
            self._method(name, records.get(name), lost_answer, lost_gold) for name in self.methods
        )
        return (
            f'<section class="q" id="q{n}" data-qid="{_e(qid)}" '
            f'data-lost-answer="{_e(" ".join(lost_answer))}" '
            f'data-lost-gold="{_e(" ".join(lost_gold))}">'
            f"<h2>Q{n}. {_e(first.get('question', ''))}</h2>{meta}"
            f"{self._scores(records, lost_answer, lost_gold)}{methods}</section>"
        )

    # -- the page ---------------------------------------------------------------------------

    def _overview(self) -> str:
        lost_answer: dict[str, int] = {}
        lost_gold: dict[str, int] = {}
        for _, records in self.questions:
            for name in _below(records, "f1") if self.read else []:
                lost_answer[name] = lost_answer.get(name, 0) + 1
            if next(iter(records.values())).get("gold_ids"):
                for name in _below(records, "recall"):
                    lost_gold[name] = lost_gold.get(name, 0) + 1
        head = '<tr><th>method</th><th class="n">questions</th>'
        if self.read:
            head += '<th class="n">EM</th><th class="n">F1</th>'
        head += '<th class="n">Recall</th><th class="n">docs / q</th>'
        if self.read:
            head += '<th class="n">lost an answer</th>'
        head += '<th class="n">lost gold</th></tr>'
        rows = [head]
        baseline = BASELINE in self.methods
        for name in self.methods:
            agg = (self.results.get("methods") or {}).get(name) or {}
            row = f"<tr><td>{_e(name)}</td><td class='n'>{_e(agg.get('questions', '–'))}</td>"
            if self.read:
                row += f"<td class='n'>{_pct(agg.get('em'))}</td>"
                row += f"<td class='n'>{_pct(agg.get('f1'))}</td>"
            atd = agg.get("atd")
            row += f"<td class='n'>{_pct(agg.get('recall')) if self.with_gold else '–'}</td>"
            row += f"<td class='n'>{'–' if atd is None else f'{float(atd):.2f}'}</td>"
            compared = baseline and name != BASELINE
            if self.read:
                row += f"<td class='n'>{lost_answer.get(name, 0) if compared else '–'}</td>"
            gold_cell = lost_gold.get(name, 0) if compared and self.with_gold else "–"
            rows.append(f"{row}<td class='n'>{gold_cell}</td></tr>")
        return f"<table>{''.join(rows)}</table>"

    def _controls(self) -> str:
        can_compare = BASELINE in self.methods
        answer_ok = can_compare and self.read
        gold_ok = can_compare and self.with_gold
        off = " disabled"
        show = (
            '<select id="f-show"><option value="all">all questions</option>'
            f'<option value="lost"{"" if answer_ok else off}>questions where a method lost an '
            "answer (F1 below none's)</option>"
            f'<option value="lost-gold"{"" if gold_ok else off}>questions where a method lost '
            "a gold passage (Recall below none's)</option></select>"
        )
        pick = '<select id="f-method"><option value="">every method</option>' + "".join(
            f'<option value="{_e(name)}">{_e(name)}</option>'
            for name in self.methods
            if name != BASELINE
        )
        pick += "</select>"
        why = []
        if not can_compare:
            why.append("the baseline none was not run: nothing to compare with")
        elif not self.read:
            why.append("no reader ran (--reader none): no EM/F1 to compare")
        if not self.with_gold:
            why.append("the data has no gold passage ids")
        note = f' <span class="why">({_e("; ".join(why))})</span>' if why else ""
        return (
            f'<div class="controls"><label>Show {show}</label>'
            f"<label>Method {pick}</label>"
            '<button type="button" id="f-open">open all</button> '
            '<button type="button" id="f-close">close all</button> '
            f'<span id="f-count" class="why">{len(self.questions)} questions</span>{note}'
            '<div class="why">With a method chosen, its panels and the baseline '
            "none's stay visible. The URL hash sets the filter: #lost, #lost-gold, "
            "#method=NAME (joined by &amp;).</div></div>"
        )

    def render(self) -> str:
        data = self.results.get("data") or {}
        s = self.settings
        facts = [
            f"data <code>{_e(data.get('path', '?'))}</code>",
            f"{_e(len(self.questions))} questions",
            f"retrieval {_e(s.get('retriever', '?'))} top-{_e(s.get('top_k', '?'))} over the "
            f"{_e(s.get('pool', '?'))} pool",
            f"reader <code>{_e(s.get('reader', '?'))}</code>",
        ]
        legend = (
            '<span class="badge gold">gold</span> a gold passage of the question · '
            '<span class="badge reader">to reader</span> handed to the reader · '
            '<span class="badge lost">lost the answer</span> F1 below none\'s · '
            '<span class="badge lost">lost gold</span> Recall below none\'s'
        )
        body = "".join(
            self._question(n, qid, records)
            for n, (qid, records) in enumerate(self.questions, start=1)
        )
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>neocorrag eval: {_e(data.get('path', 'run'))}</title>"
            f"<style>{_STYLE}</style></head><body>"
            "<h1>neocorrag eval: question by question</h1>"
            f'<p class="meta">{" · ".join(facts)}</p>'
            f"{self._overview()}<p class='meta'>{legend}</p>{self._controls()}"
            f"<main>{body}</main>"
            f"<script>{_SCRIPT}</script></body></html>\n"
        )


def _query_text(query: Any) -> str:
    """A recorded query's text (``[text, source, round, bridge]``, or a bare string)."""
    if isinstance(query, list | tuple):
        return str(query[0]) if query else ""
    return str(query)


def render_html_report(results: Mapping[str, Any], passages: Mapping[str, Passage]) -> str:
    """The whole report.html of one run, as a string.

    ``results`` is what :func:`~neocorrag_core.eval.summary.summarize` returns (results.json:
    ``settings``, ``data``, ``methods`` and the records in ``per_question``); ``passages``
    maps passage ids to passages, for titles and excerpts (records hold ids only; an id it
    lacks is shown as the id). Pure: no file is read or written, so it can be tested and
    rebuilt from a results.json."""
    return _Page(results, passages).render()


def _referenced_ids(results: Mapping[str, Any]) -> set[str]:
    ids: set[str] = set()
    for records in (results.get("per_question") or {}).values():
        for r in records:
            info = r.get("info") or {}
            ids.update(r.get("retrieved_ids") or ())
            ids.update(r.get("context_ids") or ())
            ids.update(r.get("gold_ids") or ())
            ids.update(info.get("drop_stages") or ())
            for found in info.get("query_results") or ():
                ids.update(found or ())
    return ids


def _corpus_passages(settings: Mapping[str, Any]) -> Iterable[Passage]:
    """The run's pooled corpus, where passages outside the run's questions came from: the
    ``--corpus`` file, or every question of the data file (``--limit`` shows only some)."""
    from neocorrag_core.eval.datasets import load_corpus, load_qa

    if settings.get("corpus"):
        return load_corpus(settings["corpus"])
    return (p for e in load_qa(settings["data"])[0] for p in e.passages)


def write_html_report(results: Mapping[str, Any], out: Path, examples: Sequence[QAExample]) -> Path:
    """Write ``out/report.html`` for a finished run and return its path.

    Titles and texts come from the run's questions; with ``--pool corpus`` the passages a
    search found outside them are read from the corpus (once, only when some are missing).
    A corpus that cannot be read any more leaves those passages shown by id: the page is
    written in any case."""
    passages = {p.id: p for e in examples for p in e.passages}
    settings = results.get("settings") or {}
    missing = _referenced_ids(results) - passages.keys()
    if missing and settings.get("pool") == "corpus":
        try:
            for p in _corpus_passages(settings):
                if p.id in missing:
                    passages[p.id] = p
        except (OSError, ValueError) as exc:
            logger.warning("report.html: corpus passages not read (%s); shown by id", exc)
    path = Path(out) / "report.html"
    path.write_text(render_html_report(results, passages), encoding="utf-8")
    return path


__all__ = ["excerpt", "render_html_report", "write_html_report"]
