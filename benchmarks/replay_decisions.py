"""Replay the controller's ANSWER / RETRIEVE / STOP / ABSTAIN rules on recorded episodes.

Input: collection runs (``belief`` with ``answer_threshold=1.0`` and ``min_searches=1``,
so every round was searched and measured; docs/belief.md), each a ``results.json`` or a run
folder (its ``results.json``, else its ``cache/`` records; the committed runs under
``benchmarks/results/eval/`` keep neither: benchmarks/results/README.md). For each
question the recorded measured steps are walked in order with the given calibrator and
after-search model: the episode ANSWERs at the first step whose answerability reaches
``--answer-threshold``; otherwise it searches again while the retrieval value reaches
``--min-retrieval-value``, the workspace has room and a recorded later step exists; it
ends with STOP, or ABSTAIN below ``--abstain-below``. The answer is that step's recorded
draft, its cost the tokens recorded up to that step.

This approximates the live controller (it cannot take an action the recording did not:
a different query, a correction), and it is how the shipped thresholds were checked on
the tune half without rerunning the LM::

    python benchmarks/replay_decisions.py \\
        --results benchmarks/results/eval/belief-collect-musique \\
        --abstain-below 0 0.05 0.1 0.2
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from neocorrag_core.belief import (
    AFTER_SEARCH_FILE,
    AnswerabilityCalibrator,
    Belief,
    BeliefConfig,
    BeliefTuning,
    Diagnostics,
)
from neocorrag_core.belief.rules import Budget, decide
from neocorrag_core.belief.types import VERIFIER_NAMES
from neocorrag_core.eval.metrics import f1_score
from neocorrag_core.eval.splits import split_of

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab and the sibling scripts
from neocorrag_lab.fitting import calibration_split_of
from summarize_results import cached_results, missing_records


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--results",
        type=Path,
        action="append",
        required=True,
        help="a results.json, or an eval run folder (its results.json or cache/); repeatable",
    )
    parser.add_argument("--method", default="belief")
    parser.add_argument("--calibrator", type=Path, default=None, help="default: shipped")
    parser.add_argument("--after-search", type=Path, default=None, help="default: shipped")
    parser.add_argument("--prior-value", action="store_true", help="the unfitted value")
    parser.add_argument("--answer-threshold", type=float, default=0.5)
    parser.add_argument("--min-retrieval-value", type=float, default=0.1)
    parser.add_argument("--abstain-below", type=float, nargs="+", default=[0.05])
    parser.add_argument("--part", choices=("train", "dev", "tune"), default="tune")
    return parser.parse_args(argv)


def measured_steps(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps that measured a draft, each with the tokens spent up to and including it
    and the evidence it measured (``measured_ids``: a step's ``evidence_ids`` are those
    after its action, so the evidence measured is the previous step's)."""
    out, spent, before = [], 0, []
    for step in record["info"]["trajectory"]:
        spent += int(step["prompt_tokens"]) + int(step["generated_tokens"])
        if (step.get("draft_answer") or "").strip():
            out.append({**step, "spent": spent, "measured_ids": before})
        before = list(step.get("evidence_ids", ()))
    return out


def read_results(path: Path) -> Any:
    """A ``results.json`` (the file, or a run folder holding it), or a run folder's cache
    records in its shape; ``ValueError`` saying how to get records that are not there."""
    if path.is_dir():
        if not (path / "results.json").is_file():
            cached = cached_results(path)
            if cached is None:
                raise ValueError(
                    f"{path}: no results.json or cache/*.jsonl there; {missing_records(path)}"
                )
            return cached
        path = path / "results.json"
    if not path.is_file():
        raise ValueError(f"{path}: no such file; {missing_records(path)}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None


def load_records(paths: Sequence[Path], method: str) -> list[dict[str, Any]]:
    """The ``method`` records of the eval results ``paths`` (:func:`read_results`);
    ``ValueError`` naming the file for one that is not an eval result, lacks the method, or
    holds records without the per-step token counts a replay sums (not a controller's
    trajectory)."""
    records: list[dict[str, Any]] = []
    for path in paths:
        results = read_results(path)
        found = results.get("per_question", {}) if isinstance(results, dict) else {}
        if method not in found:
            raise ValueError(f"{path}: no {method!r} records (a results.json of neocorrag eval?)")
        for record in found[method]:
            trajectory = record.get("info", {}).get("trajectory")
            if not isinstance(trajectory, list) or any(
                "prompt_tokens" not in step or "generated_tokens" not in step for step in trajectory
            ):
                raise ValueError(
                    f"{path}: the {method!r} record of {record.get('qid')!r} has no "
                    "trajectory with token counts (use --method with a controller method)"
                )
        records += found[method]
    return records


def recorded_diagnostics(values: dict[str, Any]) -> Diagnostics:
    """A trajectory step's ``diagnostics`` dict as the :class:`Diagnostics` it was.

    A step that skipped the verifier (``verify="auto"``, the default) records no verifier
    numbers; they are ``None`` here, as they were live."""
    known = {f.name for f in fields(Diagnostics)}
    kept = {name: value for name, value in values.items() if name in known}
    unverified = {name: None for name in VERIFIER_NAMES}
    return Diagnostics(**{**unverified, **kept, "drop_ids": tuple(kept.get("drop_ids", ()))})


def replay(
    steps: Sequence[dict[str, Any]],
    answers: Sequence[str],
    calibrator: AnswerabilityCalibrator,
    after_search: AnswerabilityCalibrator | None,
    args: argparse.Namespace,
    abstain_below: float,
) -> dict[str, Any]:
    """One question: the step the rules end at, its F1 (0 when abstaining) and cost.

    The controller's own :func:`~neocorrag_core.belief.rules.decide` takes each decision,
    with a round cap at the recorded rounds and no correction (a replay cannot follow
    one); any search it asks for (RETRIEVE or REWRITE) is stood in for by the recorded
    next step."""
    config = BeliefConfig(
        answer_threshold=args.answer_threshold,
        abstain_below=abstain_below,
        max_rounds=len(steps),
    )
    tuning = BeliefTuning(min_retrieval_value=args.min_retrieval_value, correct_problems=False)
    for position, step in enumerate(steps):
        diagnostics = recorded_diagnostics(step["diagnostics"])
        p = calibrator.predict(diagnostics)
        decision = decide(
            Belief(**step["belief"]),
            diagnostics,
            p,
            Budget(
                rounds_used=position + 1,
                tokens_used=0,
                corrections_used=0,
                searched=True,
                # As live: no search into a full workspace (its passages would not be kept).
                room=len(step["measured_ids"]) < config.max_evidence,
            ),
            config,
            search_cost=0,
            after_search=after_search.predict(diagnostics) if after_search else None,
            tuning=tuning,
        )
        if decision.action.terminal:
            action = decision.action.value
            f1 = 0.0 if action == "abstain" else f1_score(step["draft_answer"], answers)
            return {"action": action, "f1": f1, "tokens": step["spent"], "rounds": position + 1}
    raise AssertionError("unreachable: the round cap ends the replay at the last step")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    calibrator = AnswerabilityCalibrator.load(args.calibrator)
    after = (
        None
        if args.prior_value
        else AnswerabilityCalibrator.load(args.after_search, shipped=AFTER_SEARCH_FILE)
    )
    try:
        records = load_records(args.results, args.method)
    except (OSError, ValueError) as exc:  # the message names the file and what is wrong
        print(f"replay_decisions.py: error: {exc}", file=sys.stderr)
        return 2
    chosen = [
        r
        for r in records
        if split_of(r["qid"]) == "tune"
        and (args.part == "tune" or calibration_split_of(r["qid"]) == args.part)
    ]
    print(f"calibrator {calibrator.version}; after-search {after.version if after else 'prior'}")
    print(f"{len(chosen)} {args.part} questions of {len(records)} recorded")
    print("| abstain below | F1 | tokens / q | rounds / q | answer / stop / abstain |")
    print("|---:|---:|---:|---:|---|")
    for threshold in args.abstain_below:
        runs = []
        for record in chosen:
            steps = measured_steps(record)
            if steps:
                runs.append(replay(steps, record["answers"], calibrator, after, args, threshold))
        n = max(len(runs), 1)
        counts = [sum(r["action"] == a for r in runs) for a in ("answer", "stop", "abstain")]
        print(
            f"| {threshold:g} | {100 * sum(r['f1'] for r in runs) / n:.1f} "
            f"| {sum(r['tokens'] for r in runs) / n:.0f} "
            f"| {sum(r['rounds'] for r in runs) / n:.2f} | {' / '.join(map(str, counts))} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
