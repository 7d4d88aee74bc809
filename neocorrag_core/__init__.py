"""neocorrag core: mine evidence chains from retrieved passages and refine the context.

Framework-free: imports neither LangChain nor LlamaIndex (a test walks every import to
enforce it). Heavy models load lazily.
"""

from importlib import metadata as _metadata

from neocorrag_core.belief import BeliefConfig, BeliefController, BeliefResult
from neocorrag_core.chains.config import MinerConfig
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import (
    ConfigError,
    EmbedderError,
    InputError,
    MissingDependencyError,
    ModelCallError,
    ModelLoadError,
    NeocorragError,
    RetrievalError,
    StoreError,
)
from neocorrag_core.evireform import (
    EvidenceReformulator,
    ReformulationConfig,
    ReformulationResult,
)
from neocorrag_core.triples import (
    ChainedTripleSource,
    MetadataTripleSource,
    OpenIETripleSource,
    TripleSource,
)
from neocorrag_core.types import (
    DroppedPassage,
    EvidenceChain,
    KeepReason,
    KeptPassage,
    MiningResult,
    Passage,
    Triple,
)

try:  # the version is defined once, in pyproject.toml
    __version__ = _metadata.version("neocorrag")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "BeliefConfig",
    "BeliefController",
    "BeliefResult",
    "ChainedTripleSource",
    "ConfigError",
    "DroppedPassage",
    "EmbedderError",
    "EvidenceChain",
    "EvidenceChainMiner",
    "EvidenceReformulator",
    "InputError",
    "KeepReason",
    "KeptPassage",
    "MetadataTripleSource",
    "MinerConfig",
    "MiningResult",
    "MissingDependencyError",
    "ModelCallError",
    "ModelLoadError",
    "NeocorragError",
    "OpenIETripleSource",
    "Passage",
    "ReformulationConfig",
    "ReformulationResult",
    "RetrievalError",
    "StoreError",
    "Triple",
    "TripleSource",
    "__version__",
]
