"""What a refinement or a reformulation says about each document it hands on, as plain
metadata dicts under the ``neocorrag_*`` keys (:mod:`~neocorrag_core.records.keys`): built here
once, so the adapters only copy them onto their framework's objects. The adapters' documents
become passages here too (:mod:`~neocorrag_core.records.documents`), and a search call's
documents are remembered by passage id and handed back as copies
(:mod:`~neocorrag_core.records.calls`)."""
