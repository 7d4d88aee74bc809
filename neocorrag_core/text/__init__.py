"""The shared text layer: word rules every part of the engine reads text with.

Below the triples and the three systems (NeocorRAG in ``chains``, EviReform in
``evireform``, BeliefRAG in ``belief``), so that each of them, and the triple store's keys,
use one copy of these rules and none has to import another system for them:

* ``entities.py``: :func:`~neocorrag_core.text.entities.normalize_entity`, the matching
  key of a name (the graph's nodes, the links between passages, the store's entity keys);
* ``capitals.py``: the capitalised spans of a question or passage (names), and whether a
  text is typed ALL IN CAPITALS;
* ``relations.py``: the question's relation words and what covers them.

Plain functions on strings, standard library only: nothing here imports another part of
``neocorrag_core`` (an architecture test holds it to that). Nothing is imported here, so
importing one module loads only what it needs.
"""
