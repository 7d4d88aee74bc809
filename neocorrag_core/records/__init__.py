"""What a refinement or a reformulation says about each document it hands on, as plain
metadata dicts under the ``neocorrag_*`` keys (:mod:`~neocorrag_core.records.keys`): built here
once, so the adapters only copy them onto their framework's objects."""
