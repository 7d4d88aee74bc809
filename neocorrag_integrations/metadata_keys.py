"""Every ``neocorrag_*`` metadata key the LangChain and LlamaIndex adapters write, and
:func:`run_metadata`, which finds a refinement's run metadata in its output.

The adapters' users import a key from here instead of repeating the string::

    from neocorrag_integrations.metadata_keys import KEPT_REASON
    reasons = [doc.metadata[KEPT_REASON] for doc in refined]

Both are the core's (:mod:`neocorrag_core.records.keys`, where the keys are documented, and
:mod:`neocorrag_core.records.refinement`): the records every framework writes are built there.
"""

from __future__ import annotations

from neocorrag_core.records import keys as _keys
from neocorrag_core.records.keys import *  # noqa: F403
from neocorrag_core.records.refinement import run_metadata

__all__ = [*_keys.__all__, "run_metadata"]
