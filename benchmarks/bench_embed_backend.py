"""The bundled MiniLM on PyTorch and on ONNX Runtime: speed and how far the vectors are.

Reads up to ``--texts`` node and triple texts from a triple store (``neocorrag index``
wrote them) and embeds them with each backend, alternating the two ``--repeat`` times (the
machine is shared: only ratios within a round compare): texts/s in batches (indexing), and
the median time of a query-sized call (one question; a question and five entity names)
over ``--queries`` calls, alternated call by call. Prints each, their ratios, and the
largest difference between the backends' unit vectors::

    neocorrag index corpus.json --store /tmp/s.sqlite --no-vectors
    python benchmarks/bench_embed_backend.py --store /tmp/s.sqlite \
        --out benchmarks/results/embed_backend.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from bench_embed_dtype import store_texts


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True)
    parser.add_argument("--texts", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", default=None, help="write the numbers as JSON here")
    args = parser.parse_args()
    os.environ["NEOCORRAG_EMBED_BACKEND"] = "auto"
    from neocorrag_core.models.embedder_loading import (
        _load_sentence_transformer,
        _sentence_transformer_encoder,
        bundled_embedder_path,
    )
    from neocorrag_core.models.onnx_encoder import onnx_encoder

    texts = store_texts(args.store, args.texts)
    model = _load_sentence_transformer(str(bundled_embedder_path()), "cpu")
    os.environ["NEOCORRAG_EMBED_BACKEND"] = "torch"
    encoders = {"torch": _sentence_transformer_encoder(model, bf16=False)}
    os.environ["NEOCORRAG_EMBED_BACKEND"] = "onnx"
    fast = onnx_encoder(model)
    if fast is None:
        raise SystemExit("ONNX Runtime is not usable here: pip install 'neocorrag[onnx]'")
    encoders["onnx"] = fast
    rates: dict[str, list[float]] = {name: [] for name in encoders}
    vectors: dict[str, np.ndarray] = {}
    for round_ in range(args.repeat):
        for name in list(encoders) if round_ % 2 == 0 else list(reversed(encoders)):
            started = time.perf_counter()
            vectors[name] = unit(np.asarray(encoders[name](texts)))
            rates[name].append(len(texts) / (time.perf_counter() - started))
    calls: dict[str, dict[str, list[float]]] = {"question": {}, "question+5": {}}
    for kind, size in (("question", 1), ("question+5", 6)):
        times: dict[str, list[float]] = {name: [] for name in encoders}
        for i in range(args.queries):
            batch = texts[i * size % len(texts) :][:size]
            for name in list(encoders) if i % 2 == 0 else list(reversed(encoders)):
                started = time.perf_counter()
                encoders[name](batch)
                times[name].append(time.perf_counter() - started)
        calls[kind] = times
    diff = float(np.abs(vectors["torch"] - vectors["onnx"]).max())
    cosine = float((vectors["torch"] * vectors["onnx"]).sum(axis=1).min())
    report = {
        "texts": len(texts),
        "batch_texts_per_s": {name: [round(r) for r in values] for name, values in rates.items()},
        "batch_speedup_median": statistics.median(
            o / t for o, t in zip(rates["onnx"], rates["torch"], strict=True)
        ),
        "query_ms_median": {
            kind: {name: 1000 * statistics.median(v) for name, v in times.items()}
            for kind, times in calls.items()
        },
        "max_abs_diff_unit_vectors": diff,
        "min_cosine": cosine,
        "machine_load": os.getloadavg(),
    }
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
