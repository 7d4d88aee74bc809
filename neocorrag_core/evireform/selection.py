"""Stage b: pick the propositions that help answer the question.

The LM chooses among the candidate texts only (trie-constrained beams or exact
ranking, the same decoders as chain mining), so it can never invent a fact.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neocorrag_core.chains.decoding import beam_decode, numbered_passages, rank_candidates
from neocorrag_core.lm.generation import chat_prompt_ids
from neocorrag_core.lm.prompt_budget import Clip
from neocorrag_core.models import LanguageModel
from neocorrag_core.text.relations import covers
from neocorrag_core.types import Passage

from .residual import fact_bridges, names_entity
from .types import Proposition

SELECTION_INSTRUCTION = (
    "Write one fact from the passages that helps answer the question, in the form "
    "`subject relation object`."
)


@dataclass(frozen=True)
class Selection:
    """Indices of the chosen candidates (best first) and the LM tokens it cost."""

    indices: list[int]
    prompt_tokens: int = 0
    generated_tokens: int = 0


def selection_prompt_text(
    question: str,
    passages: Sequence[Passage],
    max_passage_chars: int = 400,
    focus: Mapping[str, Sequence[str]] | None = None,
    clip: Clip | None = None,
) -> str:
    """The instruction, the question and the numbered, cut passages (with ``focus``: only
    the sentences that mention the entities of the candidates each passage supplied; with
    ``clip``: every piece cut to its token budget)."""
    asked = " ".join(question.split()) if clip is None else clip(question, "question")
    lines = [SELECTION_INSTRUCTION, "", f"Question: {asked}"]
    if passages:
        lines += ["", "Passages:", *numbered_passages(passages, max_passage_chars, focus, clip)]
    lines += ["", "Reply with the fact only."]
    return "\n".join(lines)


def evidence_order(
    question: str,
    candidates: Sequence[Proposition],
    passages: Sequence[Passage],
    similarities: np.ndarray,
    *,
    wanted: Sequence[str] = (),
    anchors: Sequence[str] = (),
    margin: float | None = None,
    first_hop: Collection[str] = (),
) -> list[int]:
    """Candidate indices in the order evidence is taken from them.

    Facts that state one of the ``wanted`` relation words and name a bridge to follow come
    first, one per passage in turn (two compared entities each get theirs), each passage's
    best by ``similarities`` (cosine to the question) first; then the rest by similarity,
    cut at ``margin`` below the best. Only facts of passages that name one of the
    ``anchors`` (the question's entities, the bridges already searched) count as stating:
    the chain must hang off what is known, not off a stray passage that happens to say
    "born in". Next come the facts that name a bridge from the ``first_hop`` passages
    (ids; the reformulator passes those whose title the question names), one per passage
    in turn, whatever their similarity: "Who is the sibling of the performer of Decade?"
    has no fact saying "performer", and the page "Decade (Neil Young album)" names the
    bridge (Neil Young) where facts of look-alike pages about music festivals are closer
    to the question's words (ours, not the paper's). With no ``wanted`` word and no
    ``first_hop`` this is the paper's order (similarity only).
    """
    sims = np.asarray(similarities, dtype=float)
    order: list[int] = np.argsort(-sims, kind="stable").tolist()
    anchored = {
        p.id
        for p in passages
        if not anchors or any(names_entity(f"{p.title} {p.text}", a) for a in anchors)
    }
    stating = {
        i
        for i, p in enumerate(candidates)
        if anchored.intersection(p.passage_ids)
        and covers(p.text, wanted)
        and fact_bridges(question, p)
    }
    first_ids = set(first_hop)
    hop_facts = {
        i
        for i, p in enumerate(candidates)
        if i not in stating and first_ids.intersection(p.passage_ids) and fact_bridges(question, p)
    }
    ahead = stating | hop_facts  # taken before the rest, past the margin
    if margin is not None and order:
        floor = float(sims[order[0]]) - margin
        order = [i for i in order if i in ahead or sims[i] >= floor]
    first = round_robin([i for i in order if i in stating], candidates)
    second = round_robin([i for i in order if i in hop_facts], candidates)
    return first + second + [i for i in order if i not in ahead]


def round_robin(indices: Sequence[int], candidates: Sequence[Proposition]) -> list[int]:
    """``indices`` reordered so that each source passage gives its best fact before any
    gives a second (order kept within a passage and among passages)."""
    per_passage: dict[str, list[int]] = {}
    for i in indices:
        source = candidates[i].passage_ids[0] if candidates[i].passage_ids else ""
        per_passage.setdefault(source, []).append(i)
    groups = list(per_passage.values())
    out: list[int] = []
    for depth in range(max((len(g) for g in groups), default=0)):
        out += [g[depth] for g in groups if depth < len(g)]
    return out


def top_by_similarity(
    question_vec: np.ndarray, candidate_vecs: np.ndarray, limit: int
) -> list[int]:
    """Indices of the ``limit`` candidates most similar to the question (ties: input order)."""
    if len(candidate_vecs) == 0 or limit <= 0:
        return []
    sims = np.asarray(candidate_vecs) @ np.asarray(question_vec)
    order: list[int] = np.argsort(-sims, kind="stable")[:limit].tolist()
    return order


def select_with_lm(
    lm: LanguageModel,
    prompt_ids: Sequence[int],
    candidates: Sequence[Proposition],
    *,
    mode: str,
    limit: int,
) -> Selection:
    """Up to ``limit`` distinct candidates chosen by ``beam`` search or exact ``rank``ing."""
    texts = [p.text for p in candidates]
    if mode == "beam":
        output = beam_decode(lm, prompt_ids, texts, num_beams=limit)
    elif mode == "rank":
        output = rank_candidates(lm, prompt_ids, texts, top_k=limit)
    else:
        raise ValueError(f"LM selection mode must be 'beam' or 'rank', got {mode!r}")
    return Selection(
        [c.index for c in output.choices], output.prompt_tokens, output.generated_tokens
    )


def selection_cost_bound(
    lm: LanguageModel,
    prompt_ids: Sequence[int],
    candidates: Sequence[Proposition],
    mode: str,
    limit: int,
) -> int:
    """Most tokens a selection call can spend: the prompt plus every token it may score or
    generate (each candidate once when ranking; the longest candidate per beam otherwise).
    Beam search that finds no exact candidate ranks them all as well, hence the sum."""
    lengths = [
        len(ids) + 1
        for ids in lm.tokenizer(
            [p.text for p in candidates], add_special_tokens=False, split_special_tokens=True
        )["input_ids"]
    ]
    ranked = len(prompt_ids) + sum(lengths)
    if mode == "rank":
        return ranked
    return len(prompt_ids) + max(2, limit) * max(lengths, default=0) + ranked


def build_selection_prompt(
    lm: LanguageModel,
    question: str,
    passages: Sequence[Passage],
    max_passage_chars: int,
    focus: Mapping[str, Sequence[str]] | None = None,
    clip: Clip | None = None,
) -> list[int]:
    """Chat-formatted selection prompt ids."""
    text = selection_prompt_text(question, passages, max_passage_chars, focus, clip)
    return chat_prompt_ids(lm, text, plain_suffix="\nFact:\n")


def proposition_focus(candidates: Sequence[Proposition]) -> dict[str, list[str]]:
    """Passage id -> the surface entities of the candidate propositions it supplied."""
    focus: dict[str, list[str]] = {}
    for proposition in candidates:
        for pid in proposition.passage_ids:
            names = focus.setdefault(pid, [])
            names.extend(e for e in proposition.surface_entities if e not in names)
    return focus


__all__ = [
    "SELECTION_INSTRUCTION",
    "Selection",
    "build_selection_prompt",
    "evidence_order",
    "proposition_focus",
    "round_robin",
    "select_with_lm",
    "selection_cost_bound",
    "selection_prompt_text",
    "top_by_similarity",
]
