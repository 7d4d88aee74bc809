"""``neocorrag eval`` on the real default models: one MuSiQue question, two cheap methods.

Marked ``real_models``; needs the ``bundled`` and ``bundled-lm`` extras and the shared data folder.
"""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA

from neocorrag_core.cli.app import main

pytestmark = pytest.mark.real_models

MUSIQUE = SHARED_DATA / "musique" / "hipporag_musique_train_100.json"
OPENIE = SHARED_DATA / "musique" / "hipporag_musique_train_openie_gpt35.json"


@pytest.mark.skipif(not MUSIQUE.is_file(), reason="shared data not present")
def test_cli_eval_on_real_models(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["eval", "--data", str(MUSIQUE), "--triples", str(OPENIE), "--limit", "1"]
    args += ["--methods", "none", "neocorrag-recall", "--out", str(out), "--max-new-tokens", "8"]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["questions_compared"] == 1
    none, mined = results["methods"]["none"], results["methods"]["neocorrag-recall"]
    assert none["atd"] == 5 and mined["atd"] <= 5
    assert none["reader_tokens"] > 100
    assert "neocorrag eval report" in capsys.readouterr().out
