"""The adapter side of the two BeliefRAG adapters, written once: :class:`BeliefAdapter`.

LangChain's ``BeliefRAG`` and LlamaIndex's ``BeliefQueryEngine`` take the same keywords
(:class:`~neocorrag_core.belief.options.BeliefOptions`); the core checks them, builds the
controller and runs the episodes over the user's retriever
(:class:`~neocorrag_core.belief.options.BeliefSetup`). What the adapters share beyond that
is here once: translating the framework objects among the keywords into core objects, and
their properties. Imports neither framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from neocorrag_core.belief import BeliefConfig, BeliefController
from neocorrag_core.belief.options import BeliefSetup
from neocorrag_core.lm.chat import ChatModel

from ._common import RefinerSettings
from ._translate import engine_embedder, engine_lm


class BeliefAdapter:
    """What ``BeliefRAG`` and ``BeliefQueryEngine`` share: the core setup of their
    keywords (``_setup``, which also runs their episodes) and their properties."""

    _llm: Any
    _setup: BeliefSetup

    def _set_up(
        self, owner: str, llm: Any, wrap: Callable[[Any], ChatModel], options: Mapping[str, Any]
    ) -> None:
        """Translate the framework objects among the keywords (``llm`` by ``wrap``, the
        adapter's ``as_chat_model``, when no loaded framework claims it; the embedder; a
        refiner passed as ``models=``, by its miner), then have the core check and build."""
        given = dict(options)
        if given.get("embedder") is not None:
            given["embedder"] = engine_embedder(given["embedder"])
        if isinstance(given.get("models"), RefinerSettings):
            given["models"] = given["models"].miner
        self._llm = llm
        self._setup = BeliefSetup(owner, engine_lm(llm, wrap), given)

    @property
    def llm(self) -> Any:
        """The LLM the controller's LM components use, as it was given."""
        return self._llm

    @property
    def config(self) -> BeliefConfig:
        """The controller settings in force (``k`` included)."""
        return self._setup.config

    @property
    def controller(self) -> BeliefController:
        """The controller on ``llm``, or the one passed in (a LangChain call runs a copy
        whose model calls carry the run's callbacks)."""
        return self._setup.controller

    @property
    def chains_for_verifier(self) -> bool:
        """Whether the verifier also sees the evidence chains."""
        return self._setup.chains_for_verifier


__all__ = ["BeliefAdapter"]
