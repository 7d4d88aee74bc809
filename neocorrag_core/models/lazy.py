""":class:`LazyModels`: an engine's embedder and LM, resolved once on first use."""

from __future__ import annotations

from typing import Any

from neocorrag_core.once import LoadOnce

from .embedder import TextEmbedder
from .embedder_loading import resolve_embedder
from .language_model import LanguageModel
from .lm_loading import resolve_lm


class LazyModels:
    """An engine's embedder and LM: specs until first use, then resolved once and cached.

    Thread-safe (a model loads once even when several threads ask at the same time).
    Pickling keeps the specs but not the loaded models. Engines that should share
    models (a miner and a reformulator in one pipeline) share one instance.
    """

    def __init__(
        self, embedder: Any = None, lm: Any = None, *, show_progress: bool = False
    ) -> None:
        self.embedder_spec = embedder
        self.lm_spec = lm
        self.show_progress = show_progress
        self._embedder: LoadOnce[TextEmbedder] = LoadOnce()
        self._lm: LoadOnce[LanguageModel] = LoadOnce()

    @property
    def embedder_loaded(self) -> bool:
        """Whether the embedder has been resolved."""
        return self._embedder.loaded

    @property
    def lm_loaded(self) -> bool:
        """Whether the LM has been resolved (it never is for LM-free configurations)."""
        return self._lm.loaded

    @property
    def embedder(self) -> TextEmbedder:
        """The resolved :class:`TextEmbedder` (loaded on first use)."""
        return self._embedder.get(lambda: resolve_embedder(self.embedder_spec))

    @property
    def lm(self) -> LanguageModel:
        """The resolved :class:`LanguageModel` (loaded on first use)."""
        return self._lm.get(lambda: resolve_lm(self.lm_spec, show_progress=self.show_progress))
