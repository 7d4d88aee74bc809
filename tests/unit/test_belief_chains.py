"""``ChainEvidenceVerifier``: the NeocorRAG chains shown to the verifier as extra evidence."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from adapter_fixtures import CORPUS, MINER_CONFIG, QUERY
from conftest import HashedBagOfWords
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from neocorrag_core import ConfigError, EvidenceChainMiner, MinerConfig, Passage
from neocorrag_core.belief import (
    AnswerabilityCalibrator,
    BeliefConfig,
    BeliefController,
    ChainEvidenceVerifier,
    DraftAnswer,
    LMVerifier,
    PromptBudget,
    Usage,
    VerifierReply,
)
from neocorrag_core.belief.chains import CHAIN_PASSAGE_ID, CHAIN_PASSAGE_TITLE
from neocorrag_core.belief.verifier import numbered_documents
from neocorrag_core.lm.structured import estimate_tokens
from neocorrag_core.rendering import CHAIN_BLOCK_HEADER, chain_text
from neocorrag_integrations.langchain import as_chat_model

PASSAGES = [Passage(id=i, title=t, text=x, metadata={"triples": tr}) for i, t, x, tr in CORPUS]
GOOD = {"support": "high", "conflict": "no", "confident": "yes", "missing": "no", "drop": []}


def miner() -> EvidenceChainMiner:
    return EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())


class Recording:
    """A scripted verifier that records the passages it was shown and drops what it is told."""

    def __init__(self, drop: tuple[str, ...] = ()) -> None:
        self.seen: list[list[Passage]] = []
        self.drop = drop

    def verify(self, question, passages, draft_answer):
        self.seen.append(list(passages))
        reply = VerifierReply(support=0.9, conflict=0.1, uncertainty=0.2, gap=0.1)
        return replace(reply, drop_ids=self.drop), Usage(10 * len(passages), 5)


def test_the_verifier_sees_the_chain_block_first_then_the_passages():
    inner, mining = Recording(), miner()
    ChainEvidenceVerifier(inner, mining).verify(QUERY, PASSAGES, "Stanley")
    [shown] = inner.seen
    chain, rest = shown[0], shown[1:]
    assert rest == PASSAGES
    assert chain.id == CHAIN_PASSAGE_ID and chain.title == CHAIN_PASSAGE_TITLE
    result = mining.mine(QUERY, PASSAGES)
    block = chain_text(replace(result, chain_format="compact", max_chain_lines=None))
    assert block.startswith(CHAIN_BLOCK_HEADER)
    assert chain.text == block.removeprefix(CHAIN_BLOCK_HEADER).strip()
    assert "Mountrail County - capital -> Stanley" in chain.text


def test_the_verifier_sees_every_chain_line_whatever_the_miners_line_cap():
    capped = EvidenceChainMiner(
        MinerConfig(**{**MINER_CONFIG, "max_chain_lines": 1}), embedder=HashedBagOfWords()
    )
    assert len(chain_text(capped.mine(QUERY, PASSAGES)).splitlines()) <= 2
    seen_capped, seen_default = Recording(), Recording()
    ChainEvidenceVerifier(seen_capped, capped).verify(QUERY, PASSAGES, "")
    ChainEvidenceVerifier(seen_default, miner()).verify(QUERY, PASSAGES, "")
    text = seen_capped.seen[0][0].text
    assert text == seen_default.seen[0][0].text
    assert len(text.splitlines()) > 1  # more lines than the cap lets a reader see


def test_the_chain_document_reads_as_a_numbered_document_of_the_verifier_prompt():
    inner = Recording()
    ChainEvidenceVerifier(inner, miner()).verify(QUERY, PASSAGES, "")
    lines = numbered_documents(inner.seen[0], lambda text, kind: " ".join(text.split()))
    assert lines[0].startswith(f"[1] {CHAIN_PASSAGE_TITLE}: 1. Van Hook Township - located in")
    assert lines[1].startswith("[2] Van Hook Township:")


def test_chains_are_written_compact_for_the_verifier_whatever_the_miners_format():
    """The reader-facing default (linking) would hide a chain one passage states whole; the
    verifier gets the format it was measured with unless told otherwise."""
    one_hop = [PASSAGES[0], PASSAGES[2]]  # the only chain is p1's own fact
    assert chain_text(miner().mine(QUERY, one_hop)) == ""  # the miner's default: linking
    compact, linking = Recording(), Recording()
    ChainEvidenceVerifier(compact, miner()).verify(QUERY, one_hop, "")
    ChainEvidenceVerifier(linking, miner(), chain_format="linking").verify(QUERY, one_hop, "")
    assert compact.seen[0][0].id == CHAIN_PASSAGE_ID
    assert "Van Hook Township - located in -> Mountrail County" in compact.seen[0][0].text
    assert linking.seen == [one_hop]


def test_the_chain_document_is_never_dropped_but_real_passages_are():
    inner = Recording(drop=(CHAIN_PASSAGE_ID, "p3"))
    reply, _ = ChainEvidenceVerifier(inner, miner()).verify(QUERY, PASSAGES, "")
    assert reply.drop_ids == ("p3",)


def test_without_a_chain_the_passages_are_shown_alone():
    bare = [replace(p, metadata={"triples": []}) for p in PASSAGES]
    inner = Recording(drop=("p3",))
    reply, usage = ChainEvidenceVerifier(inner, miner()).verify(QUERY, bare, "")
    assert inner.seen == [bare] and reply.drop_ids == ("p3",)
    assert usage == Usage(10 * len(bare), 5)


def test_a_passage_with_the_reserved_id_keeps_it_and_the_chain_gets_another():
    taken = [replace(PASSAGES[0], id=CHAIN_PASSAGE_ID), *PASSAGES[1:]]
    inner = Recording(drop=(CHAIN_PASSAGE_ID,))
    reply, _ = ChainEvidenceVerifier(inner, miner()).verify(QUERY, taken, "")
    chain = inner.seen[0][0]
    assert chain.id != CHAIN_PASSAGE_ID and chain.id.startswith(CHAIN_PASSAGE_ID)
    assert reply.drop_ids == (CHAIN_PASSAGE_ID,)  # the real passage can still be dropped


class CountingMiner(EvidenceChainMiner):
    """Reports LM tokens for its mining, as beam or rank decoding would."""

    def mine(self, query, passages, **overrides):
        self.overrides = overrides
        result = super().mine(query, passages)
        result.prompt_tokens, result.generated_tokens = 70, 9
        return result


def test_mining_tokens_are_added_and_decoding_is_passed_on():
    mining = CountingMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
    inner = Recording()
    _, usage = ChainEvidenceVerifier(inner, mining, decoding="rank").verify(QUERY, PASSAGES, "")
    assert mining.overrides == {"decoding": "rank"}
    assert usage == Usage(10 * (len(PASSAGES) + 1) + 70, 5 + 9)


def test_an_lm_verifier_counts_the_chain_text_in_its_prompt():
    budget = PromptBudget(max_passages=len(PASSAGES) + 1)

    def prompt_tokens(verifier) -> int:
        _, usage = verifier.verify(QUERY, PASSAGES, "Stanley")
        return usage.prompt_tokens

    def chat():
        return as_chat_model(FakeListChatModel(responses=[json.dumps(GOOD)]))

    plain = prompt_tokens(LMVerifier(chat(), budget=budget))
    inner = LMVerifier(chat(), budget=budget)
    chained = ChainEvidenceVerifier(inner, miner())
    text = chained.chain_passage(QUERY, PASSAGES)[0].text
    assert prompt_tokens(chained) >= plain + estimate_tokens(text)


class Generator:
    def answer(self, question, passages):
        return DraftAnswer("Stanley", confidence=0.9), Usage(8, 2)


class Writer:
    def next_query(self, question, passages, missing_fact, asked):
        return "Mountrail County seat", Usage(6, 2)

    def rewrite(self, question, last_query, asked):
        return f"{last_query} again {len(asked)}", Usage(4, 2)


class Relevance:
    def relevance(self, question, passages):
        return 0.7


def test_in_an_episode_the_chain_document_never_enters_the_evidence():
    inner = Recording(drop=(CHAIN_PASSAGE_ID,))
    calibrator = AnswerabilityCalibrator(
        features=("support",), weights=(4.0,), bias=0.0, means=(0.5,), scales=(0.25,), version="t"
    )
    controller = BeliefController(
        verifier=ChainEvidenceVerifier(inner, miner()),
        generator=Generator(),
        writer=Writer(),
        relevance=Relevance(),
        calibrator=calibrator,
        config=BeliefConfig(k=5),
    )
    result = controller.run(QUERY, lambda query, k: PASSAGES[:k])
    assert result.answer == "Stanley"
    assert inner.seen and all(seen[0].id == CHAIN_PASSAGE_ID for seen in inner.seen)
    assert [p.id for p in result.evidence] == [p.id for p in PASSAGES]
    assert all(CHAIN_PASSAGE_ID not in m.passage_ids for m in result.mutations)
    assert all(not s.diagnostics.drop_ids for s in result.steps)


def test_bad_construction_is_a_config_error():
    with pytest.raises(ConfigError, match="Verifier"):
        ChainEvidenceVerifier(object())
    with pytest.raises(ConfigError, match="EvidenceChainMiner"):
        ChainEvidenceVerifier(Recording(), miner="neocorrag")
    with pytest.raises(ConfigError, match="decoding"):
        ChainEvidenceVerifier(Recording(), decoding="greedy")
    with pytest.raises(ConfigError, match="chain_format"):
        ChainEvidenceVerifier(Recording(), chain_format="none")
