"""NeocorRAG: evidence chains mined from the retrieved passages, and what they keep.

One module per stage, in the order a call runs them (``miner.py`` only wires them):

* ``graph.py``: the passages' triples as a graph whose edges remember their passages;
* ``query_entities.py``: the question's entities (Eq. 2's E_q);
* ``path_search.py``: seed nodes, pruned path search and activated scoring (Eq. 2-5);
* ``decoding.py``: the LM's choice among candidate chains (opt-in: beam or rank);
* ``links.py`` and ``keep.py``: which passages stay (the keep modes; Eq. 8 as ``"paper"``);
* ``focus.py``: each kept passage cut to its evidence sentences;
* ``diagnosis.py``: where a dropped passage was lost (asked for by the benchmark);
* ``config.py``: ``MinerConfig`` (what a user chooses) and ``MinerTuning`` (the research
  settings); ``miner.py``: ``EvidenceChainMiner``.

Nothing is imported here, so importing one stage loads only what it needs.
"""
