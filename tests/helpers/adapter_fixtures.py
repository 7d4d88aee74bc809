"""Shared data for the adapter tests: a small multi-hop corpus and the settings it needs."""

from __future__ import annotations

QUERY = "What is the capital of the county where Van Hook Township is located?"
OTHER_QUERY = "Which lake borders Mountrail County?"

# (id, title, text, triples) in retrieval order. With top_n=2 and decoding="none", p1 and
# p2 stay by rank, p4 stays because it supplies the chain's second hop, p3 and p5 drop.
CORPUS: list[tuple[str, str, str, list[list[str]]]] = [
    (
        "p1",
        "Van Hook Township",
        "Van Hook Township is a township in Mountrail County, North Dakota.",
        [["Van Hook Township", "located in", "Mountrail County"]],
    ),
    (
        "p2",
        "Lake Sakakawea",
        "Lake Sakakawea borders Mountrail County to the south.",
        [["Lake Sakakawea", "borders", "Mountrail County"]],
    ),
    (
        "p3",
        "Paris",
        "Paris is the capital of France.",
        [["Paris", "capital of", "France"]],
    ),
    (
        "p4",
        "Mountrail County",
        "The county seat of Mountrail County is Stanley, a city of 2,321 people.",
        [["Mountrail County", "capital", "Stanley"], ["Stanley", "population", "2321"]],
    ),
    (
        "p5",
        "Berlin",
        "Berlin is the capital of Germany.",
        [["Berlin", "capital of", "Germany"]],
    ),
]
KEPT_IDS = ["p1", "p2", "p4"]
DROPPED_IDS = ["p3", "p5"]

# Loose thresholds suit the bag-of-words embedder; n-gram entities keep results identical
# whether or not spaCy is installed. The linking chain block (the default until miner-8,
# which hands the reader no block) so that the contract tests see a chain document.
MINER_CONFIG = {
    "tau_edge": 0.1,
    "tau_boost": 0.1,
    "query_entities": "ngram",
    "chain_format": "linking",
}


# ---- EviReform adapter tests

BRIDGE_QUESTION = "Where was the director of Film X born?"
BRIDGE_ENTITY = "Jane Roe"
BRIDGE_QUERY = "Jane Roe born"
"""The residual query EviReform writes for the bridge: the entity and the question's open
relation word ("born"; "director" is covered by the evidence's "directed")."""

# (id, title, text, triples). d2 holds the answer but shares almost no word with the
# question; the fake retriever returns it only to a query naming the bridge entity.
BRIDGE_CORPUS: list[tuple[str, str, str, list[list[str]]]] = [
    (
        "d1",
        "Film X",
        "Film X is a 1999 drama film directed by Jane Roe.",
        [["Film X", "directed by", "Jane Roe"], ["Film X", "released in", "1999"]],
    ),
    (
        "d2",
        "Jane Roe",
        "Jane Roe is a film director who was born in Oslo.",
        [["Jane Roe", "born in", "Oslo"], ["Jane Roe", "occupation", "film director"]],
    ),
    (
        "d3",
        "Film Y",
        "Film Y is a 2004 comedy film directed by John Smith.",
        [["Film Y", "directed by", "John Smith"]],
    ),
    ("d4", "John Smith", "John Smith was born in Leeds.", [["John Smith", "born in", "Leeds"]]),
    ("d5", "Oslo", "Oslo is the capital of Norway.", [["Oslo", "capital of", "Norway"]]),
    ("d6", "Bergen", "Bergen is a city in Norway.", [["Bergen", "located in", "Norway"]]),
]
BRIDGE_HIDDEN = "d2"

BRIDGE_NO_LM = {"selection": "embedding", "residual_queries": "entities", "residual_k": 3}
