"""neocorrag's development lab: what the paper reproductions and the releases need, kept
out of the installed package.

Its ablations, paper variants and peer baselines (:mod:`neocorrag_lab.methods`; built by
``miner_variants``, ``free_decoding``, ``evireform_variants``, ``belief_variants`` and
``peers``), the selection and reports behind the shipped calibrator files
(:mod:`neocorrag_lab.fitting`), and the eval-cache versions of those methods. The scripts
beside this package (``benchmarks/*.py``) import it.

Importing the package registers its methods with ``neocorrag eval``'s registry; an
installed lab (``pip install -e benchmarks``) also registers them through its entry point,
so the ``neocorrag`` command knows them. The product never imports the lab.
"""

from __future__ import annotations

from neocorrag_core.eval.registry import register_methods
from neocorrag_lab.methods import LAB_METHODS

register_methods(LAB_METHODS)

__all__ = ["LAB_METHODS"]
