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
# whether or not spaCy is installed.
MINER_CONFIG = {"tau_edge": 0.1, "tau_boost": 0.1, "query_entities": "ngram"}
