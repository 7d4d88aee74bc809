"""Stages d-f: per-query normalization, mixing, entity propagation, passage aggregation.

All functions are pure and work on plain arrays, so each rule can be checked by hand.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from .types import Proposition


def normalize_scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """Min-max scale one query's scores to [0, 1], then make them sum to 1 (a unit of mass).

    Scaling first puts queries with different similarity ranges on one footing;
    constant scores (or a single proposition) become uniform.
    """
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low <= 1e-12:
        return np.full(values.shape, 1.0 / values.size)
    scaled = (values - low) / (high - low)
    return np.asarray(scaled / scaled.sum())


def softmax_scores(scores: Sequence[float] | np.ndarray, temperature: float) -> np.ndarray:
    """``exp(s / T)`` made to sum to 1: one query's unit of mass, concentrated on its best
    matches (a cosine 0.1 higher weighs e times more at ``T = 0.1``)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        return values
    # a tiny temperature sends the others to -inf, whose exp is the limit wanted: 0
    with np.errstate(over="ignore"):
        weights = np.exp((values - values.max()) / temperature)
    return np.asarray(weights / weights.sum())


def normalize_query_scores(
    scores: Sequence[float] | np.ndarray, temperature: float | None = None
) -> np.ndarray:
    """One query's unit of mass: softmax at ``temperature``, or min-max when it is ``None``."""
    if temperature is None:
        return normalize_scores(scores)
    return softmax_scores(scores, temperature)


def mix_query_scores(
    original: Sequence[float] | np.ndarray,
    residual: Sequence[Sequence[float] | np.ndarray],
    original_weight: float = 0.5,
    temperature: float | None = None,
) -> np.ndarray:
    """``w * norm(original) + (1 - w) * mean(norm(residual_j))``; all mass on the original
    question when there is no residual query. ``norm`` is :func:`normalize_query_scores`."""
    mixed = normalize_query_scores(original, temperature)
    if not residual:
        return mixed
    rest = np.mean([normalize_query_scores(r, temperature) for r in residual], axis=0)
    return np.asarray(original_weight * mixed + (1.0 - original_weight) * rest)


def shared_entity_neighbors(propositions: Sequence[Proposition]) -> list[list[int]]:
    """For each proposition, the other propositions that share at least one entity."""
    by_entity: dict[str, list[int]] = defaultdict(list)
    for index, prop in enumerate(propositions):
        for entity in set(prop.entities):
            by_entity[entity].append(index)
    neighbors: list[set[int]] = [set() for _ in propositions]
    for members in by_entity.values():
        for index in members:
            neighbors[index].update(members)
    return [sorted(n - {i}) for i, n in enumerate(neighbors)]


def propagate(
    scores: Sequence[float] | np.ndarray,
    neighbors: Sequence[Sequence[int]],
    propagation_weight: float = 0.5,
) -> np.ndarray:
    """One round of mass-preserving propagation over shared-entity links.

    Each proposition passes its score in equal shares to its neighbours (an isolated
    one keeps it); the result is ``(1 - w) * direct + w * received``.
    """
    direct = np.asarray(scores, dtype=float)
    if len(neighbors) != direct.size:
        raise ValueError(f"{len(neighbors)} neighbour lists for {direct.size} scores")
    received = np.zeros_like(direct)
    for index, linked in enumerate(neighbors):
        if linked:
            received[list(linked)] += direct[index] / len(linked)
        else:
            received[index] += direct[index]
    return (1.0 - propagation_weight) * direct + propagation_weight * received


def aggregate_to_passages(
    scores: Sequence[float] | np.ndarray,
    propositions: Sequence[Proposition],
    how: str = "max",
) -> dict[str, float]:
    """Passage id -> the max (or sum) of the scores of the propositions it states."""
    if how not in ("max", "sum"):
        raise ValueError(f"aggregation must be 'max' or 'sum', got {how!r}")
    values = np.asarray(scores, dtype=float)
    out: dict[str, float] = {}
    for score, prop in zip(values.tolist(), propositions, strict=True):
        for pid in prop.passage_ids:
            if pid not in out:
                out[pid] = score
            elif how == "max":
                out[pid] = max(out[pid], score)
            else:
                out[pid] += score
    return out


__all__ = [
    "aggregate_to_passages",
    "mix_query_scores",
    "normalize_query_scores",
    "normalize_scores",
    "propagate",
    "shared_entity_neighbors",
    "softmax_scores",
]
