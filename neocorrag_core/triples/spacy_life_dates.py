"""The life-dates parenthesis of encyclopedic leads: "X (1 May 1900 – 2 June 1980)" ->
born / died, "X (born 1966 in Montreal, Quebec)" -> born / born in; the dates are the
title's after the lead's subject, else those of the person named right before them.
"""

from __future__ import annotations

import re
from typing import Any

from neocorrag_core.triples.spacy_mentions import _add, _Context, _phrase

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+{_MONTH}\s+\d{{3,4}}|{_MONTH}\s+\d{{1,2}},?\s+\d{{3,4}}|"
    rf"{_MONTH}\s+\d{{3,4}}|\d{{3,4}}(?:\s*(?:BC|BCE|AD|CE)\b)?)"
)
_RANGE_SPLIT = re.compile(r"\s*[–—]\s*|\s+-\s+|\s+to\s+")
_BORN_IN = re.compile(r"\bborn\b[^()]*?\bin\s+([A-Z][^();–—]*)")


def _dated_subject(
    paren: Any, ents: dict[int, Any], ctx: _Context, *, lead_dated: bool
) -> str | None:
    """Whose life dates the parenthesis opened at ``paren`` gives, or ``None``.

    A person named right before it, after the main verb of the lead sentence, is that
    person ("Casablanca is a film directed by Michael Curtiz (1886 – 1962)": Curtiz's).
    In a titled passage's lead sentence, a parenthesis before the main verb follows the
    lead subject however it is spelled ("Arthur John Hope, known as AJ (1875 – 1960)
    was"), and so is the title's, unless the name before it is an event or a date
    ("World War II (1939 – 1945) was"); after the main verb, only the first dated
    parenthesis, and only after a word with no entity label or a name of the title (spaCy
    misplaces the root of long leads; "King of Poland (1492 – 1501)" is a reign, "the 42nd
    President of the United States (1993 – 2001)" a term). Elsewhere only a person named
    right before it has life dates. ``lead_dated``: an earlier parenthesis of the lead
    sentence held a date. Version 1 of the extractor gave every lead parenthesis to the
    title. (spaCy's small model labels many people ORG, so the label is trusted only
    where it says person, event or date.)"""
    before = paren.doc[paren.i - 1]
    ent = ents.get(before.i)
    if ent is not None and ent.end != paren.i:
        ent = None  # an entity that runs on into the parenthesis names nobody reliably
    label = ent.label_ if ent is not None else ""
    name = _phrase(ent.root, ents, ctx) if ent is not None and label == "PERSON" else None
    sent = paren.sent
    if ctx.title and sent.start == 0:
        title = None if label in ("EVENT", "DATE") else ctx.title
        if paren.i < sent.root.i:
            return title
        if name is not None and name != ctx.title:
            return name
        if not lead_dated and not any(
            t.pos_ in ("VERB", "AUX") for t in sent[: paren.i - sent.start]
        ):
            # The first one, with no verb before it: spaCy cut the lead inside the
            # parenthesis ("Jean-Luc Vandenbroucke (born 31 | May 1955 in Mouscron) is"),
            # so the root it found is the name itself.
            return title
        if not lead_dated and (label == "" or name == ctx.title):
            return ctx.title
        return None
    return name


def _life_dates(doc: Any, ents: dict[int, Any], ctx: _Context) -> None:
    """Birth/death dates and birthplace from "Name (… – …)" parentheses after a name."""
    lead_dated = False
    for tok in doc:
        if tok.text != "(" or tok.i == 0:
            continue
        close = next((t for t in doc[tok.i + 1 : tok.i + 40] if t.text == ")"), None)
        if close is None:
            continue
        inner = doc[tok.i + 1 : close.i].text
        subject = _dated_subject(tok, ents, ctx, lead_dated=lead_dated)
        lead_dated = lead_dated or (tok.sent.start == 0 and _DATE.search(inner) is not None)
        if subject is None:
            continue
        sides = _RANGE_SPLIT.split(inner, maxsplit=1)
        born_date = _DATE.search(sides[0])
        if len(sides) == 2:
            died = _DATE.search(sides[1])
            if born_date and died:
                _add(ctx, subject, "born", born_date.group(0))
                _add(ctx, subject, "died", died.group(0))
        elif born_date and re.search(r"\b(?:born|b\.)", sides[0]):
            _add(ctx, subject, "born", born_date.group(0))
        elif born_date and re.search(r"\b(?:died|d\.)", sides[0]):
            _add(ctx, subject, "died", born_date.group(0))
        place = _BORN_IN.search(inner)
        if place:
            _add(ctx, subject, "born in", place.group(1).strip(" ,"))
