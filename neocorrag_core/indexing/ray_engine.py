"""The ``ray`` engine: extraction on Ray Data actors, on this machine or a Ray cluster.

Per driver chunk, the passages to extract become a dataset
(``ray.data.from_items``), mapped by :class:`RayExtractor` actors
(``map_batches`` with an actor pool of ``workers``; each actor builds its extractor from
the spec in ``__init__`` and loads the model once); the results stream back to the
driver (``iter_batches``), which writes them to the store. Workers never open the
store: on a cluster they need neocorrag and the extractor's model installed, not
access to the store's file.

Ray is found at ``address``, else ``$RAY_ADDRESS``, else started here with
``ray.init(num_cpus=workers)``; a Ray already initialised in this process is reused
(and left running). Needs the ``ray`` extra: ``pip install 'neocorrag[ray]'``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any

from neocorrag_core import errors
from neocorrag_core.errors import MissingDependencyError
from neocorrag_core.indexing.base import (
    Batch,
    check_aligned,
    extract_size,
    extractor_for,
    one_thread,
    resolve_spec,
)
from neocorrag_core.triples.factory import make_extractor
from neocorrag_core.triples.store import ExtractorKey
from neocorrag_core.types import Passage, Triple

logger = logging.getLogger(__name__)


def import_ray() -> Any:
    """The ``ray`` module with Ray Data, or a :class:`MissingDependencyError` saying what
    to install."""
    try:
        import ray
        import ray.data  # the extra is ray[data]: plain ray lacks it
    except ImportError as exc:
        raise MissingDependencyError(
            f"neocorrag index --engine ray needs Ray Data ({exc}): pip install 'neocorrag[ray]'"
        ) from None
    return ray


class RayExtractor:
    """Ray Data callable class: one per actor, builds its extractor once from ``spec``.

    Failures are returned, not raised: Ray would wrap an exception raised here into its
    own types (and log its traceback from every actor), losing the neocorrag error that
    says what to fix. The driver raises it again (:func:`_raise_worker_error`).
    """

    def __init__(self, spec: str, batch_size: int) -> None:
        one_thread()  # each actor has one CPU
        self.extractor = extractor_for(spec, batch_size)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        """Rows ``i, id, title, text`` -> rows ``i, triples`` (JSON), ``error`` (JSON or "")."""
        passages = [
            Passage(id=str(pid), title=str(title), text=str(text))
            for pid, title, text in zip(batch["id"], batch["title"], batch["text"], strict=True)
        ]
        try:
            extracted = self.extractor.extract(passages)
            check_aligned(passages, extracted, f"{type(self.extractor).__name__}.extract")
            triples = [json.dumps([t.key() for t in found]) for found in extracted]
            error = ""
        except Exception as exc:  # returned to the driver, which raises it again
            triples = ["[]"] * len(passages)
            error = json.dumps({"type": type(exc).__name__, "message": str(exc)})
        return {"i": list(batch["i"]), "triples": triples, "error": [error] * len(passages)}


def _raise_worker_error(payload: str) -> None:
    """Raise the error an actor returned: the same neocorrag error class where it is one."""
    info = json.loads(payload)
    kind, message = str(info.get("type", "")), str(info.get("message", ""))
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, errors.NeocorragError):
        raise cls(message)
    raise RuntimeError(f"a Ray worker failed to extract triples: {kind}: {message}")


class RayEngine:
    """Extraction on Ray Data actors (see the module docstring).

    Args:
        spec: the extractor spec (``"spacy"``, ``"spacy:<pipeline>"``, ``"llm:<lm>"``).
        workers: actors (default: this machine's CPU count for a local Ray, the cluster's
            CPUs for a cluster); each takes one CPU and loads its own model.
        batch_size: passages per store batch; a ``map_batches`` batch (one ``extract``
            call, one write) holds at least that many
            (:func:`~neocorrag_core.indexing.base.extract_size`: 64 for spaCy).
        address: a Ray cluster (``ray://...`` or ``host:port``); default ``$RAY_ADDRESS``,
            else a local Ray started for this run.

    Raises :class:`MissingDependencyError` at construction when Ray Data is missing.
    """

    name = "ray"

    def __init__(
        self,
        spec: str,
        *,
        workers: int | None = None,
        batch_size: int = 16,
        address: str | None = None,
    ) -> None:
        self._ray = import_ray()
        self.spec = resolve_spec(spec)
        extractor = make_extractor(self.spec)
        self.key = ExtractorKey.of(extractor)
        self.workers = workers
        self.batch_size = batch_size
        self.extract_size = extract_size(extractor, batch_size)
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self._started = False  # whether this engine initialised Ray (and shuts it down)
        self._ready = False

    def describe(self) -> str:
        """One line for the CLI."""
        where = f"Ray at {self.address}" if self.address else "a local Ray"
        count = f"{self.workers} actors" if self.workers else "one actor per CPU"
        return f"ray engine ({count} on {where}, {self.spec})"

    def _start(self) -> None:
        if self._ready:
            return
        ray = self._ray
        if not ray.is_initialized():
            quiet = {"logging_level": logging.ERROR, "configure_logging": True}
            if self.address:
                ray.init(address=self.address, **quiet)
            else:
                ray.init(
                    num_cpus=self.workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    **quiet,
                )
            self._started = True
        if not self.workers:
            self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        context = ray.data.DataContext.get_current()
        # The driver draws its own progress bar; Ray Data's bars and per-run logs would
        # interleave with it.
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        context.enable_auto_log_stats = False
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        self._ready = True

    def run(self, batches: Sequence[Batch]) -> Iterator[tuple[Batch, list[list[Triple]]]]:
        """Each batch of results with its passages, as the actors return them."""
        passages = [p for batch in batches for p in batch]
        if not passages:
            return
        self._start()
        ray = self._ray
        assert self.workers is not None
        rows = [
            {"i": i, "id": p.id, "title": p.title, "text": p.text} for i, p in enumerate(passages)
        ]
        blocks = -(-len(rows) // self.extract_size)
        dataset = ray.data.from_items(rows, override_num_blocks=blocks).map_batches(
            RayExtractor,
            fn_constructor_kwargs={"spec": self.spec, "batch_size": self.batch_size},
            # compute= rather than concurrency=, which Ray 2.51 deprecated for actors.
            compute=ray.data.ActorPoolStrategy(size=min(self.workers, blocks)),
            batch_size=self.extract_size,
            num_cpus=1,
        )
        for out in dataset.iter_batches(batch_size=None, batch_format="numpy"):
            for error in out["error"]:
                if error:
                    _raise_worker_error(str(error))
            done = [passages[int(i)] for i in out["i"]]
            triples = [
                [Triple(s, r, o, (p.id,)) for s, r, o in json.loads(str(found))]
                for p, found in zip(done, out["triples"], strict=True)
            ]
            yield done, triples

    def close(self, *, abort: bool = False) -> None:
        """Shut down the Ray this engine started (a Ray found running is left as it is)."""
        if self._started:
            self._ray.shutdown()
            self._started = self._ready = False
