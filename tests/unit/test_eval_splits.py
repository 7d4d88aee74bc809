"""The documented dev split and the eval CLI's KEY=VALUE settings."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest

from neocorrag_core.cli.app import _assignments
from neocorrag_core.eval.splits import in_split, split_of


@dataclass
class Q:
    id: str


def test_split_is_the_parity_of_the_salted_hash_and_halves_the_questions():
    for qid in ("a", "2hop__1234", "5a8b57f25542995d1e6f1371"):
        byte = hashlib.sha256(f"neocorrag-dev-v1:{qid}".encode()).digest()[0]
        assert split_of(qid) == ("tune" if byte % 2 == 0 else "report")
    items = [Q(str(i)) for i in range(400)]
    tune, report = in_split(items, "tune"), in_split(items, "report")
    assert len(tune) + len(report) == 400 and not {q.id for q in tune} & {q.id for q in report}
    assert 150 < len(tune) < 250
    assert in_split(items, None) == items
    with pytest.raises(ValueError, match="split"):
        in_split(items, "dev")  # type: ignore[arg-type]


def test_cli_assignments_parse_json_values():
    assert _assignments(["tau_edge=0.3", "decoding=rank", "filter_passages=false"], "--miner") == {
        "tau_edge": 0.3,
        "decoding": "rank",
        "filter_passages": False,
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        _assignments(["tau_edge"], "--miner")


def test_unknown_override_fields_are_a_clear_error(tmp_path):
    from neocorrag_core.eval import EvalSettings

    with pytest.raises(ValueError, match="--miner: unknown MinerConfig or MinerTuning field"):
        EvalSettings(data="x", out=str(tmp_path), miner_overrides={"tau": 1})
