"""The bundled MiniLM embedding the texts indexing stores, in float32 and in bfloat16.

Reads up to ``--texts`` node and triple texts from a triple store (``neocorrag index`` wrote
them), embeds them with the bundled model in float32 and under ``torch.autocast`` to
bfloat16, alternating the two ``--repeat`` times (the machine is shared: only ratios within
a round compare), and prints texts/s of each, their median ratio, and how far the
bfloat16 vectors are from the float32 ones (cosine: minimum, mean)::

    neocorrag index corpus.json --store /tmp/s.sqlite --no-vectors
    python benchmarks/bench_embed_dtype.py --store /tmp/s.sqlite
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import time

import numpy as np


def store_texts(path: str, limit: int) -> list[str]:
    """Subjects, objects and triple sentences of the store, each once, first seen first."""
    con = sqlite3.connect(path)
    texts: dict[str, None] = {}
    for s, r, o in con.execute("SELECT subject, relation, object FROM triples"):
        for text in (s, o, f"{s} {r} {o}"):
            texts.setdefault(text)
        if len(texts) >= limit:
            break
    return list(texts)[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True)
    parser.add_argument("--texts", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from neocorrag_core.models.embedder_loading import (
        _load_sentence_transformer,
        _sentence_transformer_encoder,
        bundled_embedder_path,
    )

    texts = store_texts(args.store, args.texts)
    model = _load_sentence_transformer(str(bundled_embedder_path()), "cpu")
    encoders = {
        "float32": _sentence_transformer_encoder(model, bf16=False),
        "bfloat16": _sentence_transformer_encoder(model, bf16=True),
    }
    rates: dict[str, list[float]] = {name: [] for name in encoders}
    vectors: dict[str, np.ndarray] = {}
    for round_ in range(args.repeat):
        order = list(encoders) if round_ % 2 == 0 else list(reversed(encoders))
        for name in order:
            started = time.perf_counter()
            out = encoders[name](texts)
            rates[name].append(len(texts) / (time.perf_counter() - started))
            vectors[name] = out / np.linalg.norm(out, axis=1, keepdims=True)
    cos = (vectors["float32"] * vectors["bfloat16"]).sum(axis=1)
    ratios = [b / f for f, b in zip(rates["float32"], rates["bfloat16"], strict=True)]
    result = {
        "texts": len(texts),
        "mean_chars": float(np.mean([len(t) for t in texts])),
        "texts_per_s": {name: statistics.median(r) for name, r in rates.items()},
        "bf16_over_fp32_median": statistics.median(ratios),
        "cosine_min": float(cos.min()),
        "cosine_mean": float(cos.mean()),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
