"""LM speed per numeric format and backend on this machine, side by side in one run.

For the bundled Qwen2.5-Coder-0.5B (or ``--lm``) in each format (float32, bfloat16, and
dynamic int8 of the linear layers, ``torch.ao.quantization.quantize_dynamic``):

* prefill tokens/s: one forward pass over a ~400-token prompt, best of ``--repeats``;
* decode tokens/s: greedy generation of 16 tokens after a short prompt, prefill removed;
* one reader call (a ~500-token reader prompt, 16 new tokens) in seconds;
* exact-rank scoring of 20 candidate chains with the shared prompt cache, by batch size;
* the miner's decoding stage (beam and rank) on the bundled demo questions, as a ratio
  of one reader call in the same format (the issue's goal: default mining <= 1 reader call).

Prints the CPU's capability and the format ``dtype="auto"`` picks, and writes JSON and a
Markdown table to ``--out``. Every figure of one run comes from the same machine state.

    python benchmarks/bench_lm_formats.py --out benchmarks/results/lm_formats
    python benchmarks/bench_lm_formats.py --formats float32 bfloat16 --questions 2
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

FILLER = (
    "Van Hook Township is a township in Mountrail County, North Dakota, United States. "
    "Stanley is a city in and the county seat of Mountrail County. The population was "
    "1,458 at the 2010 census. The township was named for one of its early settlers. "
)


def _prompt_ids(lm: Any, tokens: int) -> list[int]:
    text = FILLER * (tokens // 40 + 2)
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    return list(ids[:tokens])


def load(spec: Any, fmt: str) -> Any:
    """The LM in ``fmt``: a float dtype, or ``int8-dynamic`` (float32 then quantized)."""
    import torch

    from neocorrag_core.models import resolve_lm

    if fmt != "int8-dynamic":
        return resolve_lm(spec, dtype=fmt, show_progress=False)
    lm = resolve_lm(spec, dtype="float32", show_progress=False)
    from torch.ao.quantization import quantize_dynamic

    lm.model = quantize_dynamic(lm.model, {torch.nn.Linear}, dtype=torch.qint8)
    return lm


def prefill_tokens_per_s(lm: Any, tokens: int, repeats: int) -> float:
    import torch

    ids = torch.tensor([_prompt_ids(lm, tokens)])
    times = []
    with torch.inference_mode():
        lm.model(input_ids=ids[:, :16])  # warm-up
        for _ in range(repeats):
            started = time.perf_counter()
            lm.model(input_ids=ids, use_cache=False)
            times.append(time.perf_counter() - started)
    return tokens / min(times)


def decode_tokens_per_s(lm: Any, new_tokens: int, repeats: int) -> float:
    import torch

    from neocorrag_core.lm.generation import neutral_settings

    ids = torch.tensor([_prompt_ids(lm, 32)])
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats):
            started = time.perf_counter()
            lm.model(input_ids=ids)
            prefill = time.perf_counter() - started
            started = time.perf_counter()
            lm.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=lm.end_of_turn_id,
                **{
                    k: v
                    for k, v in neutral_settings().items()
                    if k not in ("min_new_tokens", "min_length")
                },
            )
            best = min(best, time.perf_counter() - started - prefill)
    return new_tokens / best


def reader_seconds(lm: Any, repeats: int) -> float:
    from neocorrag_core.lm.generation import chat_prompt_ids, greedy_generate

    text = "Answer the question from the passages.\n\n" + FILLER * 8 + "\nQuestion: Where?"
    ids = chat_prompt_ids(lm, text)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        greedy_generate(lm, ids, 16)
        times.append(time.perf_counter() - started)
    return min(times)


def rank_seconds(lm: Any, batch_sizes: list[int]) -> dict[int, float]:
    from neocorrag_core.chains.decoding import rank_candidates
    from neocorrag_core.lm.generation import chat_prompt_ids

    prompt = chat_prompt_ids(lm, "Write the evidence chain.\n" + FILLER * 4)
    candidates = [
        f"Van Hook Township - located in -> Mountrail County - seat {i} -> Stanley {i}"
        for i in range(20)
    ]
    out = {}
    for size in batch_sizes:
        rank_candidates(lm, prompt, candidates[:2], batch_size=size)  # warm-up
        started = time.perf_counter()
        rank_candidates(lm, prompt, candidates, batch_size=size)
        out[size] = time.perf_counter() - started
    return out


def mining_seconds(lm: Any, questions: int) -> dict[str, float]:
    """Mean decode-stage seconds per demo question for beam and rank decoding."""
    from neocorrag_lab.demo_data import bundled_demo_questions, dense_top_k

    from neocorrag_core import EvidenceChainMiner, Passage

    miner = EvidenceChainMiner(lm=lm)
    out: dict[str, list[float]] = {"beam": [], "rank": [], "total_beam": []}
    for item in bundled_demo_questions()[:questions]:
        passages = [
            Passage(str(p["id"]), p["text"], p.get("title", ""),
                    metadata={"triples": p.get("triples", [])})
            for p in item["paragraphs"]
        ]  # fmt: skip
        top = dense_top_k(miner.embedder, item["question"], passages, 5)
        for mode in ("beam", "rank"):
            result = miner.mine(item["question"], top, decoding=mode)
            out[mode].append(result.timings.get("decode", 0.0))
            if mode == "beam":
                out["total_beam"].append(result.timings.get("total", 0.0))
    return {k: statistics.mean(v) for k, v in out.items() if v}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm", default=None, help="LM spec (default: the bundled 0.5B)")
    parser.add_argument("--formats", nargs="+", default=["float32", "bfloat16", "int8-dynamic"])
    parser.add_argument("--prefill-tokens", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--questions", type=int, default=2, help="demo questions for mining")
    parser.add_argument("--out", default="benchmarks/results/lm_formats")
    args = parser.parse_args()

    import torch

    from neocorrag_core.models.cpu import choose_cpu_dtype, cpu_info, describe

    info = cpu_info()
    choice = choose_cpu_dtype(info)
    machine = describe(choice, info)
    for key, value in machine.items():
        print(f"{key}: {value}")
    rows: list[dict[str, Any]] = []
    for fmt in args.formats:
        started = time.perf_counter()
        lm = load(args.lm, fmt)
        loaded = time.perf_counter() - started
        row: dict[str, Any] = {"format": fmt, "load_s": loaded}
        row["prefill_tok_s"] = prefill_tokens_per_s(lm, args.prefill_tokens, args.repeats)
        row["decode_tok_s"] = decode_tokens_per_s(lm, 16, args.repeats)
        row["reader_s"] = reader_seconds(lm, args.repeats)
        row["rank_s_by_batch"] = rank_seconds(lm, [1, 16])
        if args.questions:
            mined = mining_seconds(lm, args.questions)
            row.update({f"mining_{k}_s": v for k, v in mined.items()})
            row["beam_decode_per_reader"] = mined["beam"] / row["reader_s"]
            row["rank_decode_per_reader"] = mined["rank"] / row["reader_s"]
        rows.append(row)
        print(json.dumps(row))
        del lm
    fastest = max(r["prefill_tok_s"] for r in rows if r["format"] in ("float32", "bfloat16"))
    for row in rows:
        row["prefill_vs_best_float"] = row["prefill_tok_s"] / fastest
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    host = f"{platform.node() or 'machine'}-{info.torch_capability.lower()}"
    result = {"machine": machine, "auto_choice": choice.dtype, "torch": torch.__version__,
              "rows": rows}  # fmt: skip
    (out / f"{host}.json").write_text(json.dumps(result, indent=2, default=str))
    lines = [
        f"CPU: {machine['cpu']} ({machine['torch capability']}; bf16 flags: "
        f"{machine['bf16 flags']}; threads {machine['torch threads']}); auto picks "
        f"**{choice.dtype}** ({choice.source})",
        "",
        "| format | prefill tok/s | decode tok/s | reader call s | rank 20 (batch 1/16) s "
        "| beam decode / reader | rank decode / reader |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ranks = "/".join(f"{r['rank_s_by_batch'][b]:.2f}" for b in (1, 16))
        lines.append(
            f"| {r['format']} | {r['prefill_tok_s']:.0f} | {r['decode_tok_s']:.1f} | "
            f"{r['reader_s']:.2f} | {ranks} | {r.get('beam_decode_per_reader', float('nan')):.2f} "
            f"| {r.get('rank_decode_per_reader', float('nan')):.2f} |"
        )
    (out / f"{host}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
