"""report.md: one table like the paper's Tables 1 and 3, costs, and the bootstrap intervals."""

from __future__ import annotations

from typing import Any

from neocorrag_core.eval.registry import method_descriptions
from neocorrag_core.types import KeepReason, LossStage


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _interval(ci: dict[str, Any], scale: float = 100.0, digits: int = 1) -> str:
    mark = "" if ci["excludes_zero"] else " (n.s.)"
    return (
        f"{scale * ci['mean']:+.{digits}f} "
        f"[{scale * ci['low']:+.{digits}f}, {scale * ci['high']:+.{digits}f}]{mark}"
    )


def answers_skipped(results: dict[str, Any]) -> bool:
    """Whether the run had no reader (``--reader none``): EM/F1 were not measured."""
    return bool(results["settings"].get("reader") == "none")


def quality_table(results: dict[str, Any]) -> str:
    """Markdown table: Recall@k, Hit, Chain, ATD, AID, empty share, EM, F1, RCR@k per method."""
    k = results["settings"]["top_k"]
    head = (
        f"| method | Recall@{k} | Hit@{k} | Chain@{k} | ATD | AID | empty % | EM | F1 | "
        f"RCR@{k} |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = [head]
    read = not answers_skipped(results)
    for name, agg in results["methods"].items():
        em, f1, rcr = (
            (_pct(agg["em"]), _pct(agg["f1"]), _pct(agg["rcr"])) if read else ("–", "–", "–")
        )
        if agg.get("with_gold", agg["questions"]) == 0:  # no question names a gold passage
            recall, hit, chain, aid, rcr = "–", "–", "–", "–", "–"
        else:
            recall, hit, chain = _pct(agg["recall"]), _pct(agg["hit"]), _pct(agg["chain"])
            aid = f"{agg['aid']:.2f}"
        rows.append(
            f"| {name} | {recall} | {hit} | {chain} | "
            f"{agg['atd']:.2f} | {aid} | {_pct(agg['empty'])} | {em} | {f1} | {rcr} |"
        )
    return "\n".join(rows)


def cost_table(results: dict[str, Any]) -> str:
    """Markdown table: tokens per question and seconds per stage per method."""
    rows = [
        "| method | method tokens / q | reader tokens / q | retrieve s | method s | read s | "
        "method / reader call | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, agg in results["methods"].items():
        s = agg["seconds"]
        read = s.get("read", 0)
        ratio = f"{s.get('method', 0) / read:.2f}" if read else "n/a"
        rows.append(
            f"| {name} | {agg['method_tokens']:.0f} | {agg['reader_tokens']:.0f} | "
            f"{s.get('retrieve', 0):.2f} | {s.get('method', 0):.2f} | {read:.2f} | {ratio} | "
            f"{agg['peak_rss_mb']:.0f} |"
        )
    return "\n".join(rows)


def comparison_table(results: dict[str, Any]) -> str:
    """Markdown table: paired bootstrap 95% intervals of differences against 'none'."""
    if not results["comparisons"]:
        if "none" in results["methods"]:
            return "_No comparison: the baseline `none` was the only method run._"
        return "_No comparison: the baseline `none` was not run._"
    rows = [
        "| method | ΔF1 (pt) | ΔEM (pt) | ΔRecall (pt) | ΔChain (pt) | ΔAID (passages) |",
        "|---|---|---|---|---|---|",
    ]
    read = not answers_skipped(results)
    for name, ci in results["comparisons"].items():
        f1, em = (_interval(ci["f1"]), _interval(ci["em"])) if read else ("–", "–")
        chain = _interval(ci["chain"]) if "chain" in ci else "–"  # older results.json: none
        rows.append(
            f"| {name} | {f1} | {em} | {_interval(ci['recall'])} | {chain} | "
            f"{_interval(ci['aid'], 1.0, 2)} |"
        )
    return "\n".join(rows)


def _rounds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def pool_table(results: dict[str, Any]) -> str:
    """Markdown table of candidate-pool completeness for methods that retrieve again."""
    rows = [
        "| method | pool complete before | pool complete after | residual rounds / q | "
        "LM tokens / q | method s / q |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, agg in results["methods"].items():
        if agg.get("pool_complete") is None:
            continue
        rows.append(
            f"| {name} | {_pct(agg['first_pool_complete'])} | {_pct(agg['pool_complete'])} | "
            f"{_rounds(agg.get('residual_rounds'))} | {agg['method_tokens']:.0f} | "
            f"{agg['seconds'].get('method', 0):.2f} |"
        )
    return "\n".join(rows) if len(rows) > 2 else ""


def source_table(results: dict[str, Any]) -> str:
    """Markdown table: residual queries per source, and how often each reached a gold
    passage the first search had missed."""
    rows = [
        "| method | source | queries / q | reached a missed gold passage | "
        "missed gold passages it found first |",
        "|---|---|---:|---:|---:|",
    ]
    for name, agg in results["methods"].items():
        sources = agg.get("query_sources")
        if not sources:
            continue
        n = max(agg["questions"], 1)
        for kind, row in sorted(sources.items()):
            sent = row.get("queries", 0)
            hit = row.get("found_missed_gold", 0)
            share = f"{hit} ({100 * hit / sent:.1f} %)" if sent else "0"
            rows.append(
                f"| {name} | {kind} | {sent / n:.2f} | {share} | {row.get('gold_first', 0)} |"
            )
    return "\n".join(rows) if len(rows) > 2 else ""


def answering_table(results: dict[str, Any]) -> str:
    """Markdown table of the methods that answer by themselves (the evidence-state
    controller and its baselines): abstentions, evidence, rounds and every model-facing
    token, against ``iterative`` where it was run."""
    rows = [
        "| method | EM | F1 | abstain % | evidence recall | rounds / q | total tokens / q | "
        "tokens / iterative | s / q | final actions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    methods = results["methods"]
    base = methods.get("iterative", {}).get("total_tokens")
    for name, agg in methods.items():
        if agg.get("retrieval_rounds") is None or agg.get("total_tokens") is None:
            continue
        ratio = f"{agg['total_tokens'] / base:.2f}" if base else "n/a"
        actions = ", ".join(f"{a} {n}" for a, n in sorted(agg.get("final_actions", {}).items()))
        rows.append(
            f"| {name} | {_pct(agg['em'])} | {_pct(agg['f1'])} | {_pct(agg['abstention'])} | "
            f"{_pct(agg['evidence_recall'] or 0.0)} | {agg['retrieval_rounds']:.2f} | "
            f"{agg['total_tokens']:.0f} | {ratio} | {agg['seconds'].get('method', 0):.2f} | "
            f"{actions} |"
        )
    return "\n".join(rows) if len(rows) > 2 else ""


def iterative_table(results: dict[str, Any]) -> str:
    """Markdown table: paired bootstrap 95% intervals of differences against ``iterative``."""
    against = results.get("comparisons_iterative") or {}
    if not against:
        return ""
    rows = [
        "| method | ΔF1 (pt) | ΔEM (pt) | Δevidence recall (pt) | Δtotal tokens / q |",
        "|---|---|---|---|---|",
    ]
    for name, ci in against.items():
        rows.append(
            f"| {name} | {_interval(ci['f1'])} | {_interval(ci['em'])} | "
            f"{_interval(ci['evidence_recall'])} | {_interval(ci['total_tokens'], 1.0, 0)} |"
        )
    return "\n".join(rows)


LOSS_STAGES = tuple(stage.value for stage in LossStage)
KEEP_REASONS = tuple(reason.value for reason in KeepReason)


def loss_table(results: dict[str, Any]) -> str:
    """Markdown table: where each method lost the retrieved gold passages it dropped, and
    which rule kept the ones it kept (methods that report per-passage reasons only)."""
    rows = [
        "| method | gold kept | "
        + " | ".join(f"kept: {r}" for r in KEEP_REASONS)
        + " | gold lost | "
        + " | ".join(f"lost: {s}" for s in LOSS_STAGES)
        + " |",
        "|---|" + "---:|" * (len(KEEP_REASONS) + len(LOSS_STAGES) + 2),
    ]
    for name, agg in results["methods"].items():
        lost, kept = agg.get("gold_lost_at"), agg.get("gold_kept_by")
        if lost is None or kept is None:
            continue
        cells = [str(sum(kept.values()))]
        cells += [str(kept.get(r, 0)) for r in KEEP_REASONS]
        cells += [str(sum(lost.values()))]
        cells += [str(lost.get(s, 0)) for s in LOSS_STAGES]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows) if len(rows) > 2 else ""


def _machine_lines(machine: dict[str, Any] | None) -> list[str]:
    if not machine:
        return []
    return [
        f"- machine: {machine.get('cpu')} ({machine.get('torch capability')}; bf16 flags: "
        f"{machine.get('bf16 flags')}; torch threads {machine.get('torch threads')}); "
        f"LM float format {machine.get('LM float format')}"
    ]


def render_report(results: dict[str, Any]) -> str:
    """The whole report.md for one run."""
    settings, data = results["settings"], results["data"]
    described = method_descriptions()
    skipped = ", ".join(f"{n} {why}" for why, n in data["skipped"].items()) or "none"
    fallbacks = [
        f"`{name}`: " + ", ".join(f"{why} {n}" for why, n in agg["fallbacks"].items())
        for name, agg in results["methods"].items()
        if agg["fallbacks"]
    ]
    lines = [
        "# neocorrag eval report",
        "",
        f"- data: `{data['path']}` ({data['format']}; {data['loaded']} of {data['rows_read']} "
        f"rows read loaded; skipped: {skipped})",
        f"- questions compared (finished by every method): {results['questions_compared']}",
        f"- retrieval: {settings['retriever']} top-{settings['top_k']} over the "
        f"{settings['pool']} pool; triples: {settings['triples'] or 'passage metadata'}",
        f"- reader: `{settings['reader']}` (greedy, max {settings['max_new_tokens']} new tokens); "
        f"decoding LM: `{settings['lm'] or 'default'}`",
        f"- bootstrap: {settings['bootstrap']} paired resamples, seed {settings['seed']}",
        *_machine_lines(results.get("machine")),
        "",
        "## Quality (percent; ATD/AID in passages)",
        "",
        quality_table(results),
        "",
        "Recall/Hit/Chain are measured on the passages each method hands to the reader "
        "(a subset of the retrieved top-k); RCR = mean F1 / mean Recall.",
        "",
        "## Differences against `none` (paired bootstrap 95% interval)",
        "",
        comparison_table(results),
        "",
        "(n.s.) marks an interval that contains 0: no difference is claimed there.",
        "",
        "## Cost per question",
        "",
        cost_table(results),
        "",
        "Seconds are wall time on this machine (noisy on a shared CPU); peak RSS is the "
        "whole process's peak when the method's last question finished.",
        "",
        "## Methods",
        "",
        *[f"- `{name}`: {described.get(name, '')}" for name in results["methods"]],
    ]
    pools = pool_table(results)
    if pools:
        lines += [
            "",
            "## Candidate pools (methods that retrieve again)",
            "",
            pools,
            "",
            "A pool is complete when it holds every gold passage of the question: before = "
            "the first retrieval's top-k, after = every passage any query returned.",
        ]
    sources = source_table(results)
    if sources:
        lines += [
            "",
            "## Residual queries by source",
            "",
            sources,
            "",
            "Sources: `question` = a name of the question that the first search's results "
            "did not name, with the open relation words; `template` = a bridge entity with "
            "the question's open relation words, "
            "`entities` = a bare bridge entity, `lm` = written by the LM, `repeat` = the "
            "question again. A query reached a missed gold passage when its results held a "
            "gold passage that the first search's top-k did not.",
        ]
    answering = answering_table(results)
    if answering:
        lines += [
            "",
            "## Methods that answer by themselves (evidence-state controller and baselines)",
            "",
            answering,
            "",
            "Abstentions score 0. Evidence recall: gold passages anywhere in the final "
            "evidence (which may hold more than k passages; a controller with `refine_answer` "
            "answers from a refined part of it). Total tokens: every prompt with "
            "its contexts, each time it was sent (verifier, query writer, answer), plus "
            "generated tokens.",
        ]
        against = iterative_table(results)
        if against:
            lines += [
                "",
                "Paired bootstrap 95% intervals against `iterative`:",
                "",
                against,
            ]
    losses = loss_table(results)
    if losses:
        lines += [
            "",
            "## Where gold passages were lost (counts over all questions)",
            "",
            losses,
            "",
            "Only retrieved gold passages are counted. A dropped passage is charged to the "
            "first chain stage it did not get through: no triples extracted; not within "
            "max_hops of a seed; reachable only through triples below tau_edge; reached but "
            "outside the top-M candidates; a candidate but in no chosen chain; chosen but "
            "dropped by the keep rule. Kept ones are counted by the first keep rule that "
            "applied.",
        ]
    if fallbacks:
        lines += [
            "",
            "Questions without a chain (no triples: input passed through; triples but no "
            "chain found: passed through under keep='paper', kept by rank and links under "
            "the other keep modes; ablation-no-filter passes everything through): "
            + "; ".join(fallbacks),
        ]
    return "\n".join(lines) + "\n"


__all__ = [
    "answering_table",
    "comparison_table",
    "cost_table",
    "iterative_table",
    "loss_table",
    "pool_table",
    "quality_table",
    "render_report",
    "source_table",
]
