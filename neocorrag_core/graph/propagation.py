"""Personalized PageRank over the corpus graph: where a random walk that restarts at the
question's evidence spends its time.

A walk from a seed entity moves to a passage that names it, to an entity joined to it by a
fact, and so on; with probability ``1 - damping`` it jumps back to a seed. Passages where
the walk stays often are the ones the evidence connects to, whether or not a query
returned them.

Two ways to compute it, never a loop over the corpus in Python:

- :func:`local_pagerank` (the default of the graph stage): a vectorized forward push
  (Andersen, Chung and Lang, 2006). Mass spreads from the seeds only through nodes that
  hold enough of it, so the work depends on ``epsilon`` and on the graph around the seeds,
  not on the size of the corpus. Its scores are never above the exact ones, and the
  missing mass (the L1 error) is known exactly: see :class:`LocalWalk`.
- power iteration over all ``N`` nodes (:func:`personalized_pagerank` with
  ``epsilon=0``): a few dozen sparse matrix-vector products, each one touching the whole
  graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse

DEFAULT_EPSILON = 1e-7
"""Push threshold per column entry of the graph stage's walk
(:attr:`~neocorrag_core.graph.selection.GraphSettings.epsilon`): on the open corpus
(6,999 passages) the passages it ranks first are those of the global walk (3e-7 was
still identical on the tune halves, 1e-6 was not on 3 of 100 random seed sets)."""


@dataclass(frozen=True)
class LocalWalk:
    """The scores of :func:`local_pagerank`, over the nodes the walk reached.

    Error bound: every score is at most the exact one (the global walk's fixed point), and
    ``error`` is exactly the L1 distance to it, ``1 - scores.sum()``. Where the graph's
    adjacency is symmetric with weights of at least 1 (the corpus graph: a column ``v`` of
    the transition is ``A[:, v] / deg(v)``), each node's score is also low by at most
    ``damping * epsilon * deg(v) / (1 - damping)``, and by at most
    ``damping * epsilon * deg(v)`` when no seed is a node without edges (once the walk has
    ended, not stopped by ``max_iterations``): a passage's degree is the number of
    entities it names, so the ranking of passages is exact wherever neighbours' scores
    differ by more than that.
    """

    nodes: np.ndarray
    """Node indices with a positive score, ascending."""
    scores: np.ndarray
    """Their scores, aligned with :attr:`nodes`."""
    error: float
    """L1 distance to the exact scores (all of it missing mass)."""
    reached: int
    """How many nodes the walk reached (the support it touched)."""
    work: int
    """Transition entries read (at most ``1 / ((1 - damping) * epsilon)``)."""
    rounds: int
    """Push rounds run."""


def _columns(transition: Any) -> sparse.csc_matrix:
    """``transition`` by columns (converted, O(nnz), when given in another format)."""
    if not sparse.issparse(transition):
        return sparse.csc_matrix(np.asarray(transition, dtype=np.float64))
    if transition.format != "csc":
        return sparse.csc_matrix(transition)
    return transition


def local_pagerank(
    transition: Any,
    nodes: ArrayLike,
    weights: ArrayLike,
    *,
    damping: float = 0.5,
    epsilon: float = DEFAULT_EPSILON,
    max_iterations: int = 100,
) -> LocalWalk:
    """Personalized PageRank from a few seeds, computed near them (a vectorized push).

    Each node keeps a score and a residual (mass not yet spread). Every round, every node
    whose residual exceeds ``epsilon`` times the number of entries in its column is
    pushed: ``1 - damping`` of its residual becomes score, the rest moves along its column
    of ``transition`` (gathered by index arithmetic on the CSC arrays; the residual lives
    in arrays over the reached nodes only). A common entity, whose column spreads mass
    thinly over many passages, is pushed only when it holds much mass. Mass that reaches a
    column without edges restarts at the seeds, as in the global walk, and is added back
    exactly at the end. Each push removes at least ``(1 - damping) * epsilon`` per column
    entry read, so the work is at most ``1 / ((1 - damping) * epsilon)`` entries, whatever
    the size of the graph.

    Parameters
    ----------
    transition:
        Column-stochastic ``N x N`` sparse matrix; CSC keeps the walk local (another format
        is converted on every call).
    nodes, weights:
        The seeds: node indices and non-negative restart weights (normalised here;
        repeated nodes add up).
    damping:
        Probability of following an edge rather than restarting, in ``[0, 1)``.
    epsilon:
        Push threshold per column entry, relative to a restart mass of 1, ``> 0``:
        smaller is closer to the exact scores and reaches further.
    max_iterations:
        Most push rounds (the error stays exact when the walk stops early).

    Returns
    -------
    LocalWalk
        The reached nodes' scores, the L1 error (see :class:`LocalWalk` for its bounds)
        and the work done. Empty when all weights are zero.

    Examples
    --------
    >>> t = sparse.csc_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> walk = local_pagerank(t, [0], [1.0], epsilon=1e-9)
    >>> walk.nodes, walk.scores.round(3), walk.error < 1e-8
    (array([0, 1]), array([0.667, 0.333]), True)
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    if not epsilon > 0.0:
        raise ValueError(f"epsilon must be > 0 for the local walk, got {epsilon}")
    matrix = _columns(transition)
    size = matrix.shape[0]
    if matrix.shape != (size, size):
        raise ValueError(f"transition must be square, got shape {matrix.shape}")
    seeds = np.asarray(nodes, dtype=np.int64).ravel()
    mass = np.asarray(weights, dtype=np.float64).ravel()
    if seeds.shape != mass.shape:
        raise ValueError(f"{len(seeds)} seed nodes but {len(mass)} weights")
    if (mass < 0).any() or not np.isfinite(mass).all():
        raise ValueError("seed weights must be finite and non-negative")
    if len(seeds) and (seeds.min() < 0 or seeds.max() >= size):
        raise ValueError(f"seed nodes must be in [0, {size})")
    positive = mass > 0
    if not positive.any():
        return LocalWalk(np.zeros(0, dtype=np.int64), np.zeros(0), 0.0, 0, 0, 0)
    seeds, inverse = np.unique(seeds[positive], return_inverse=True)
    reached = _Reached(matrix, epsilon)
    reached.add(seeds)
    reached.residual[: len(seeds)] = np.bincount(inverse, weights=mass[positive]) / mass.sum()
    indices, data = matrix.indices, matrix.data
    lost = 0.0  # mass that left through columns without (all their) edges: restarts
    work = rounds = 0
    while rounds < max_iterations:
        n = reached.count
        residual = reached.residual[:n]
        pushed = np.flatnonzero(residual > reached.threshold[:n])
        if not len(pushed):
            break
        rounds += 1
        spread = residual[pushed]
        residual[pushed] = 0.0
        reached.score[pushed] += (1.0 - damping) * spread
        length = reached.lengths[pushed]
        total = int(length.sum())
        work += total
        ends = np.cumsum(length)
        entries = np.repeat(reached.starts[pushed] - ends + length, length) + np.arange(total)
        targets = indices[entries]
        moved = data[entries] * np.repeat(damping * spread, length)
        lost += damping * float(spread.sum()) - float(moved.sum())
        reached.add(reached.unseen(targets))
        where = reached.slot[targets] - 1
        reached.residual[: reached.count] += np.bincount(
            where, weights=moved, minlength=reached.count
        )
    # the lost mass restarts at the seeds, whose walk is the result itself:
    # exact = (score + walk of the residual) / (1 - lost); the residual's walk is at least
    # its own restart share, (1 - damping) * residual
    n = reached.count
    kept = 1.0 - max(lost, 0.0)
    residual = reached.residual[:n]
    score = (reached.score[:n] + (1.0 - damping) * residual) / kept
    error = float(damping * residual.sum() / kept)
    nodes = reached.nodes[:n]
    order = np.argsort(nodes)
    scored = order[score[order] > 0]
    return LocalWalk(
        nodes=nodes[scored],
        scores=score[scored],
        error=error,
        reached=n,
        work=work,
        rounds=rounds,
    )


class _Reached:
    """The nodes a local walk reached: their column ranges, push thresholds, residual and
    score, in arrays that grow (doubling) as the walk reaches more."""

    def __init__(self, matrix: sparse.csc_matrix, epsilon: float) -> None:
        size = matrix.shape[0]
        self.indptr: np.ndarray = matrix.indptr
        self.epsilon = epsilon
        # slot + 1 of each reached node (0: not reached); np.zeros maps untouched pages
        # lazily, so only the part of it the walk touches costs anything
        self.slot: np.ndarray = np.zeros(size, dtype=np.int32 if size < 2**31 - 1 else np.int64)
        self.count = 0
        self.nodes: np.ndarray = np.zeros(0, dtype=np.int64)
        self.starts: np.ndarray = np.zeros(0, dtype=np.int64)
        self.lengths: np.ndarray = np.zeros(0, dtype=np.int64)
        self.threshold: np.ndarray = np.zeros(0)
        self.residual: np.ndarray = np.zeros(0)
        self.score: np.ndarray = np.zeros(0)
        self._resize(1024)

    def _resize(self, capacity: int) -> None:
        for name in ("nodes", "starts", "lengths", "threshold", "residual", "score"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: self.count] = old[: self.count]
            setattr(self, name, new)

    def unseen(self, targets: np.ndarray) -> np.ndarray:
        """The distinct nodes of ``targets`` not reached yet (no sort: each marks its slot
        with its position, and the one position that stays names it)."""
        new: np.ndarray = targets[self.slot[targets] == 0]
        if not len(new):
            return new
        mark = -np.arange(1, len(new) + 1, dtype=self.slot.dtype)
        self.slot[new] = mark
        first: np.ndarray = new[self.slot[new] == mark]
        self.slot[new] = 0
        return first

    def add(self, nodes: np.ndarray) -> None:
        """Reach ``nodes`` (distinct, not reached yet), with no residual or score."""
        if not len(nodes):
            return
        end = self.count + len(nodes)
        if end > len(self.nodes):
            self._resize(max(end, 2 * len(self.nodes)))
        new = slice(self.count, end)
        self.nodes[new] = nodes
        starts = self.indptr[nodes]
        self.starts[new] = starts
        lengths = self.indptr[nodes + 1] - starts
        self.lengths[new] = lengths
        self.threshold[new] = self.epsilon * lengths
        self.slot[nodes] = np.arange(self.count + 1, end + 1)
        self.count = end


def personalized_pagerank(
    transition: Any,
    reset: np.ndarray,
    *,
    damping: float = 0.5,
    tolerance: float = 1e-7,
    max_iterations: int = 100,
    epsilon: float = 0.0,
) -> np.ndarray:
    """The stationary distribution of a walk on ``transition`` restarting at ``reset``.

    Parameters
    ----------
    transition:
        Column-stochastic ``N x N`` sparse matrix (a column of zeros: a node without
        edges; the walk restarts from it).
    reset:
        Non-negative restart weights over the ``N`` nodes (normalised here).
    damping:
        Probability of following an edge rather than restarting, in ``[0, 1)``.
    tolerance, max_iterations:
        Stop when the L1 change is below ``tolerance``, or after ``max_iterations``
        (push rounds for the local walk, which ignores ``tolerance``).
    epsilon:
        ``0`` (the default): power iteration over the whole graph. ``> 0``: the local walk
        (:func:`local_pagerank`, same scores less at most its ``error`` in L1, each one
        low, never high), written out over the ``N`` nodes.

    Returns
    -------
    numpy.ndarray
        ``N`` scores summing to 1 (to ``1 - error`` for the local walk; all zeros when
        ``reset`` is all zeros).

    Examples
    --------
    >>> t = sparse.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> personalized_pagerank(t, np.array([1.0, 0.0]), damping=0.5).round(3)
    array([0.667, 0.333])
    >>> personalized_pagerank(t, np.array([1.0, 0.0]), epsilon=1e-9).round(3)
    array([0.667, 0.333])
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    reset = np.asarray(reset, dtype=np.float64)
    if epsilon > 0:
        seeds = np.flatnonzero(reset)
        walk = local_pagerank(
            transition,
            seeds,
            reset[seeds],
            damping=damping,
            epsilon=epsilon,
            max_iterations=max_iterations,
        )
        out = np.zeros_like(reset)
        out[walk.nodes] = walk.scores
        return out
    total = reset.sum()
    if total <= 0:
        return np.zeros_like(reset)
    reset = reset / total
    scores: np.ndarray = reset.copy()
    for _ in range(max_iterations):
        walked: np.ndarray = np.asarray(transition @ scores)
        lost = 1.0 - walked.sum()  # mass at nodes without edges restarts too
        updated: np.ndarray = damping * walked + (1.0 - damping + damping * lost) * reset
        if np.abs(updated - scores).sum() < tolerance:
            return updated
        scores = updated
    return scores


__all__ = ["DEFAULT_EPSILON", "LocalWalk", "local_pagerank", "personalized_pagerank"]
