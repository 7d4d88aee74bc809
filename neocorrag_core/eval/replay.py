"""``--contexts-from``: replay the method contexts of an earlier run, so only the reader
runs. The replayed run must have matching settings (all but the reader) and a record, of
the method's current version, for every (question, method) left to do.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from neocorrag_core.eval.datasets import QAExample
from neocorrag_core.eval.protocol import MethodInput, MethodOutput
from neocorrag_core.eval.records import ResultCache, _stored
from neocorrag_core.eval.settings import EvalSettings
from neocorrag_core.formats import read_json_or_lines
from neocorrag_core.types import Passage

# Settings that must match for another run's method contexts to be valid here.
_REPLAY_KEYS = (
    "data",
    "top_k",
    "pool",
    "corpus",
    "retriever",
    "lm",
    "embedder",
    "triples",
    "embeddings_threshold",
    "miner_overrides",
    "evireform_overrides",
    "belief_overrides",
)


def replay_source(settings: EvalSettings) -> ResultCache:
    """The cache of the run named by ``contexts_from``, checked to have matching settings."""
    folder = Path(settings.contexts_from or "")
    path = folder / "run.json"
    if not path.is_file():
        raise ValueError(f"--contexts-from {folder}: no run.json there (not an eval out folder)")
    stored = read_json_or_lines(path, what="eval settings file")
    wanted = json.loads(json.dumps(settings.signature()))
    changed = [k for k in _REPLAY_KEYS if _stored(stored, k) != wanted.get(k)]
    if changed:
        raise ValueError(
            f"--contexts-from {folder} ran with other settings ({', '.join(changed)}); "
            "only the reader may differ"
        )
    return ResultCache(folder / "cache")


def check_replay(
    source: ResultCache,
    todo: Sequence[tuple[QAExample, Sequence[str]]],
    versions: dict[str, str],
    folder: str,
) -> None:
    """Before anything runs: every (question, method) left to do has a record in the
    replayed run ``source``, made by the method's current version (``versions``, the
    versions a resumed run checks; a record of another version is stale there and would be
    run again) and read by that run's reader (a method that answered by itself left no
    context for another reader)."""
    for example, missing in todo:
        for name in missing:
            record = source.load(name).get(example.id)
            if record is None:
                raise ValueError(
                    f"--contexts-from {folder} has no {name!r} record for question "
                    f"{example.id!r}; finish that run first or lower --limit"
                )
            if name in versions and record.get("method_version") != versions[name]:
                raise ValueError(
                    f"--contexts-from {folder}: its {name!r} records were made by version "
                    f"{record.get('method_version')!r} of the method, the current one is "
                    f"{versions[name]!r}; resume that run first, which runs them again"
                )
            if _answered_itself(record):
                raise ValueError(
                    f"--contexts-from {folder}: method {name!r} answered by itself there "
                    "(no reader read its context); leave it out of --methods"
                )


def _answered_itself(record: dict[str, Any]) -> bool:
    """Whether a record's answer came from its method, not the reader (which always reads
    a prompt): an abstention, or a prediction with no reader tokens."""
    no_reader = not record.get("reader_prompt_tokens")
    return bool(record.get("abstained")) or (no_reader and bool(record.get("prediction")))


class ReplayedMethod:
    """A method's context replayed from an earlier run's records, so a new reader sees
    exactly what that run's reader saw; its method cost is the recorded one."""

    def __init__(self, name: str, source: ResultCache, known: Sequence[Passage] = ()) -> None:
        self.name = name
        self.records = source.load(name)  # the replayed run's records, by question id
        texts = Counter(r["question"] for r in self.records.values())
        # Found by text only for a caller that gives no id, and only where the text is
        # unique: two questions may share a text but not their passages or answers.
        self.by_question = {
            r["question"]: r for r in self.records.values() if texts[r["question"]] == 1
        }
        # Methods that retrieve again (EviReform) hand the reader passages from outside
        # the shared top-k; they are found among every passage of the run.
        self.known = {p.id: p for p in known}

    def refine(self, call: MethodInput) -> MethodOutput:
        """The recorded context: the same passages (by id) and the same chain block."""
        question, passages = call.question, call.passages
        if call.qid is not None:
            record = self.records.get(call.qid)
            wanted = f"question {call.qid!r}"
        else:
            record = self.by_question.get(question)
            wanted = f"{question[:60]!r} (or its text is not unique there)"
        if record is None:
            raise ValueError(
                f"--contexts-from has no {self.name!r} record for {wanted}; "
                "finish that run first or lower --limit"
            )
        by_id = {**self.known, **{p.id: p for p in passages}}
        missing = [pid for pid in record["context_ids"] if pid not in by_id]
        if missing:
            raise ValueError(f"replayed context ids {missing} are not in this run's passages")
        timings = {
            k.removeprefix("method."): v
            for k, v in record["timings"].items()
            if k.startswith("method.")
        }
        cut = record.get("context_texts") or {}
        return MethodOutput(
            passages=[
                replace(by_id[pid], text=cut[pid]) if pid in cut else by_id[pid]
                for pid in record["context_ids"]
            ],
            chain_text=record["chain_text"],
            prompt_tokens=record["method_prompt_tokens"],
            generated_tokens=record["method_generated_tokens"],
            timings=timings,
            info={**record["info"], "replayed": True},
        )
