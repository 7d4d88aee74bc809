"""The local relevance diagnostic: how relevant the kept evidence is to the question.

No LM: the shared embedder's cosine between the question and each passage, mapped to
``[0, 1]`` by a logistic prior (:func:`cosine_to_relevance`), then aggregated as the mean
of the best few passages (a multi-hop question needs two good passages, not all of them;
the rest of the workspace may be lesser hops or noise the verifier judges).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from neocorrag_core.models import LazyModels
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_int, check_number

DEFAULT_CENTER = 0.45
"""Cosine mapped to relevance 0.5 (see :class:`EmbeddingRelevance`: the fit there gave
0.44; 0.45 is what every shipped calibrator file was collected with, so it stays)."""
DEFAULT_SCALE = 0.14
"""Cosine distance over which the relevance moves by one logit."""
MAX_PASSAGE_CHARS = 2000


def cosine_to_relevance(
    cosine: float, center: float = DEFAULT_CENTER, scale: float = DEFAULT_SCALE
) -> float:
    """``sigmoid((cosine - center) / scale)``: increasing in the cosine, in ``[0, 1]``; a
    NaN cosine (a broken embedding) gives 0.5, no information."""
    if not math.isfinite(cosine):
        return 0.5
    z = (float(cosine) - center) / scale
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def passage_text(passage: Passage) -> str:
    """What is embedded for a passage: title line, then text (cut to 2,000 characters)."""
    text = f"{passage.title}\n{passage.text}" if passage.title.strip() else passage.text
    return text[:MAX_PASSAGE_CHARS]


class EmbeddingRelevance:
    """Calibrated relevance of the evidence to the question, from embedding cosines.

    Args:
        embedder: anything :func:`~neocorrag_core.models.resolve_embedder` accepts
            (``None`` = the bundled all-MiniLM-L6-v2).
        models: share the lazily loaded embedder of another engine (overrides ``embedder``).
        center / scale: the logistic prior from cosine to relevance. The defaults suit
            all-MiniLM-L6-v2 on Wikipedia-style passages: on the 100 questions of
            ``hotpotqa/hipporag_hotpotqa_train_100.json`` (title line + text embedded),
            question-to-gold-passage cosines have median 0.57 and question-to-distractor
            cosines (HotpotQA's retrieved, topically close distractors) median 0.34; a
            logistic fit of gold against distractor, classes weighted equally, gives
            center 0.44 (0.444) and scale 0.15 (0.151). The defaults, center 0.45 and
            scale 0.14, are close to it and are what the shipped calibrator files were
            fitted over (their episodes measured relevance with them), so they are kept.
            A prior (like the belief coefficients), not a fitted model of the user's
            data: the answerability calibrator fitted over the diagnostics decides what
            relevance is worth. Set both for another embedder.
        top: the relevance of the evidence is the mean over its ``top`` best passages.
    """

    def __init__(
        self,
        embedder: Any = None,
        *,
        models: LazyModels | None = None,
        center: float = DEFAULT_CENTER,
        scale: float = DEFAULT_SCALE,
        top: int = 2,
    ) -> None:
        check_number("EmbeddingRelevance", "center", center, low=-1.0, high=1.0)
        check_number("EmbeddingRelevance", "scale", scale, low=1e-6)
        check_int("EmbeddingRelevance", "top", top, minimum=1)
        self.models = models or LazyModels(embedder=embedder)
        self.center = float(center)
        self.scale = float(scale)
        self.top = top

    def cosines(self, question: str, passages: Sequence[Passage]) -> list[float]:
        """Cosine between the question and each passage, in passage order."""
        if not passages:
            return []
        vectors = np.asarray(
            self.models.embedder.embed([question, *(passage_text(p) for p in passages)]),
            dtype=np.float64,
        )
        norms = np.linalg.norm(vectors, axis=1)
        norms[norms == 0] = 1.0  # an all-zero embedding: cosine 0, not a division by zero
        unit = vectors / norms[:, None]
        return [float(c) for c in unit[1:] @ unit[0]]

    def scores(self, question: str, passages: Sequence[Passage]) -> list[float]:
        """Each passage's relevance in ``[0, 1]`` (:func:`cosine_to_relevance`)."""
        return [
            cosine_to_relevance(c, self.center, self.scale)
            for c in self.cosines(question, passages)
        ]

    def relevance(self, question: str, passages: Sequence[Passage]) -> float:
        """Mean relevance of the ``top`` best passages; 0.0 for no passage."""
        scores = sorted(self.scores(question, passages), reverse=True)[: self.top]
        return float(sum(scores) / len(scores)) if scores else 0.0


__all__ = [
    "DEFAULT_CENTER",
    "DEFAULT_SCALE",
    "EmbeddingRelevance",
    "cosine_to_relevance",
    "passage_text",
]
