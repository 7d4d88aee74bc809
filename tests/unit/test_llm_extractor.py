"""LLMTripleExtractor: parsing, the Outlines constraint on a tiny random LM, framework LLMs."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from neocorrag_core.triples import LLMTripleExtractor, TripleSource
from neocorrag_core.triples.llm_extractor import parse_json_items
from neocorrag_core.triples.prompts import ENTITY_SCHEMA, TRIPLE_SCHEMA
from neocorrag_core.types import Passage, Triple
from neocorrag_integrations.langchain import as_chat_model
from neocorrag_integrations.llama_index import as_chat_model as llama_chat_model

PASSAGE = Passage("p1", title="Van Hook Township", text="Van Hook Township is in Mountrail County.")

# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"triples": [["A", "r", "B"]]}',
        'Sure! ```json\n{"triples": [["A", "r", "B"]]}\n``` Hope that helps.',
        'The facts: {"triples": [["A", "r", "B"]]} (done)',
        '[["A", "r", "B"]]',
    ],
)
def test_parse_accepts_json_in_its_usual_wrappings(text: str) -> None:
    assert parse_json_items(text, "triples") == ([["A", "r", "B"]], True)


def test_parse_keeps_the_complete_items_of_cut_off_output() -> None:
    cut = '{"triples": [["A", "r", "B"], ["C", "s", "D"], ["E", "t'
    assert parse_json_items(cut, "triples") == ([["A", "r", "B"], ["C", "s", "D"]], False)
    assert parse_json_items('{"entities": ["X", "Y", "Z', "entities") == (["X", "Y"], False)


@pytest.mark.parametrize("text", ["", "no json here", "{'triples': [('A','r','B')]}", "{]"])
def test_parse_rejects_what_is_not_json(text: str) -> None:
    items, complete = parse_json_items(text, "triples")
    assert not complete
    assert items == []


def test_parse_never_evaluates_model_output(tmp_path) -> None:
    marker = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    assert parse_json_items(payload, "triples") == ([], False)
    assert not marker.exists()


# --------------------------------------------------------------------------------------------
# Local LM + Outlines (tiny random Llama)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lms():
    pytest.importorskip("outlines")
    from tiny_models import build_tiny_lm

    from neocorrag_core.models import resolve_lm

    return [resolve_lm(build_tiny_lm(seed)) for seed in (0, 1, 2)]


def _validate(value, schema) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(value, schema)


@pytest.mark.parametrize("kind", ["entities", "triples"])
def test_constrained_output_of_a_random_model_always_fits_the_schema(tiny_lms, kind) -> None:
    schema = {"entities": ENTITY_SCHEMA, "triples": TRIPLE_SCHEMA}[kind]
    chats = [[{"role": "user", "content": text}] for text in ("Van Hook Township", "x", "é 北京")]
    finished_rows = 0
    for lm in tiny_lms:
        backend = LLMTripleExtractor(lm).backend
        for budget in (12, 160):
            texts, finished = backend.generate_with_status(chats, kind, budget)
            for text, done in zip(texts, finished, strict=True):
                if done:
                    finished_rows += 1
                    _validate(json.loads(text), schema)  # whole output parses and validates
                else:
                    # Cut by the budget: still a clean prefix, complete items are kept.
                    items, _ = parse_json_items(text, kind)
                    assert text.startswith("{")
                    assert all(isinstance(i, (str, list)) for i in items)
    assert finished_rows > 0  # some rows ended on their own and were checked whole


def test_unconstrained_random_model_output_is_not_json(tiny_lms) -> None:
    backend = LLMTripleExtractor(tiny_lms[1], constrained=False).backend
    texts, _ = backend.generate_with_status([[{"role": "user", "content": "x"}]], "triples", 40)
    assert parse_json_items(texts[0], "triples") == ([], False)


def test_extract_returns_valid_triples_and_skips_empty_passages(tiny_lms, caplog) -> None:
    ex = LLMTripleExtractor(tiny_lms[0], batch_size=2, max_new_tokens=48)
    passages = [PASSAGE, Passage("empty", text="  "), Passage("p3", text="Paris is in France.")]
    with caplog.at_level(logging.WARNING):
        out = ex.extract(passages)
    assert len(out) == 3
    assert out[1] == []
    for p, triples in zip(passages, out, strict=True):
        assert all(isinstance(t, Triple) and t.source_ids == (p.id,) for t in triples)
        assert all(t.subject and t.relation and t.object for t in triples)
    # Empty text costs no call: one entity call per non-empty passage, plus triple calls.
    assert ex.stats.llm_calls >= 2
    assert ex.stats.passages == 3


def test_long_passages_are_cut_with_a_warning(tiny_lms, caplog) -> None:
    ex = LLMTripleExtractor(tiny_lms[0], max_words=20, max_new_tokens=16)
    with caplog.at_level(logging.WARNING):
        ex.extract([Passage("long", text="word " * 5000)])
    assert "only the first 20 are read" in caplog.text


def test_cache_identity_names_the_model_and_the_constraint(tiny_lms) -> None:
    ex = LLMTripleExtractor(tiny_lms[0], name="tiny")
    assert isinstance(ex, TripleSource)
    assert ex.extractor_id == "llm:tiny"
    assert LLMTripleExtractor(tiny_lms[0], constrained=False).version != ex.version
    assert LLMTripleExtractor(None).extractor_id == "llm:qwen2.5-coder-0.5b-instruct"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        LLMTripleExtractor(None, batch_size=0)
    from neocorrag_core.errors import ConfigError

    for kwargs in ({"batch_size": 1.5}, {"max_words": 0}, {"max_new_tokens": 4}):
        with pytest.raises(ConfigError):
            LLMTripleExtractor(None, **kwargs)


def test_store_key_tells_apart_hub_orgs_and_output_changing_lengths(tmp_path, monkeypatch) -> None:
    # The bundled default's key is the published one; nothing is loaded here.
    assert LLMTripleExtractor().extractor_id == "llm:qwen2.5-coder-0.5b-instruct"
    assert LLMTripleExtractor("default", max_words=350, max_new_tokens=384).extractor_id == (
        "llm:qwen2.5-coder-0.5b-instruct"
    )
    a = LLMTripleExtractor("orgA/Qwen2.5-0.5B-Instruct")
    b = LLMTripleExtractor("orgB/Qwen2.5-0.5B-Instruct")
    assert a.extractor_id == "llm:orgA/Qwen2.5-0.5B-Instruct"
    assert b.extractor_id == "llm:orgB/Qwen2.5-0.5B-Instruct"
    assert LLMTripleExtractor("gpt2").extractor_id == "llm:gpt2"
    # Lengths that change the output are in the key; batch size is not.
    assert LLMTripleExtractor(max_words=20).extractor_id == "llm:qwen2.5-coder-0.5b-instruct,w20"
    assert LLMTripleExtractor(max_new_tokens=16).extractor_id == (
        "llm:qwen2.5-coder-0.5b-instruct,t16"
    )
    assert LLMTripleExtractor("orgA/m", max_words=20, max_new_tokens=16, name="x").extractor_id == (
        "llm:x,w20,t16"
    )
    assert LLMTripleExtractor(batch_size=1).extractor_id == LLMTripleExtractor().extractor_id
    # Local folders keep their last path part (portable); name= tells two apart.
    for folder in (tmp_path / "base" / "qwen", tmp_path / "ft" / "qwen"):
        folder.mkdir(parents=True)
    assert LLMTripleExtractor(str(tmp_path / "base" / "qwen")).extractor_id == "llm:qwen"
    assert LLMTripleExtractor(str(tmp_path / "ft" / "qwen") + "/").extractor_id == "llm:qwen"
    assert LLMTripleExtractor("/no/such/models/qwen").extractor_id == "llm:qwen"
    # Decided from the text alone: one spec, one key, whatever exists in this directory.
    (tmp_path / "checkpoints" / "run1").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert LLMTripleExtractor("checkpoints/run1").extractor_id == "llm:checkpoints/run1"
    assert LLMTripleExtractor("./checkpoints/run1").extractor_id == "llm:run1"
    assert LLMTripleExtractor(str(tmp_path / "ft" / "qwen"), name="qwen-ft").extractor_id == (
        "llm:qwen-ft"
    )
    # A (model, tokenizer) pair is named by the model's config path, hub ids whole.
    model = SimpleNamespace(config=SimpleNamespace(_name_or_path="orgA/tiny-model"))
    assert LLMTripleExtractor((model, object())).extractor_id == "llm:orgA/tiny-model"
    model.config._name_or_path = str(tmp_path / "base" / "qwen")
    assert LLMTripleExtractor((model, object())).extractor_id == "llm:qwen"


# --------------------------------------------------------------------------------------------
# Framework LLMs (fakes with the LangChain / LlamaIndex call surface)
# --------------------------------------------------------------------------------------------

ENTITIES_JSON = '{"entities": ["Van Hook Township", "Mountrail County"]}'
TRIPLES_JSON = json.dumps(
    {
        "triples": [
            ["Van Hook Township", "located in", "Mountrail County"],
            ["only", "two"],
            [1, "", "x"],
            "not a triple",
            {"subject": "Mountrail County", "relation": "in", "object": "North Dakota"},
        ]
    }
)


def _answer_for(prompt: str) -> str:
    return TRIPLES_JSON if "Named entities:" in prompt.rsplit("Title:", 1)[-1] else ENTITIES_JSON


class FakeChatModel:
    """LangChain chat-model surface: invoke(messages) -> message with .content."""

    model_name = "fake-chat"

    def __init__(self, structured: bool) -> None:
        self.structured = structured
        self.text_calls = 0
        self.structured_calls = 0

    def invoke(self, messages):
        assert all(role in ("system", "human", "ai") for role, _ in messages)
        self.text_calls += 1
        return SimpleNamespace(content=_answer_for(messages[-1][1]))

    def with_structured_output(self, schema):
        if not self.structured:
            raise NotImplementedError("no tool calling")
        outer = self

        class Runnable:
            def invoke(self, messages):
                outer.structured_calls += 1
                if "entities" in schema.model_fields:
                    return schema(entities=["Van Hook Township", "Mountrail County"])
                return schema(
                    triples=[
                        {"subject": "Van Hook Township", "relation": "in", "object": "Mountrail"}
                    ]
                )

        return Runnable()


def test_langchain_structured_output_is_used_when_offered() -> None:
    llm = FakeChatModel(structured=True)
    ex = LLMTripleExtractor(as_chat_model(llm))
    [triples] = ex.extract([PASSAGE])
    assert [t.key() for t in triples] == [("Van Hook Township", "in", "Mountrail")]
    assert (llm.structured_calls, llm.text_calls) == (2, 0)
    assert ex.extractor_id == "llm:FakeChatModel:fake-chat"


def test_langchain_text_answer_is_validated_and_bad_items_skipped(caplog) -> None:
    llm = FakeChatModel(structured=False)
    ex = LLMTripleExtractor(as_chat_model(llm))
    with caplog.at_level(logging.WARNING):
        [triples] = ex.extract([PASSAGE])
    assert [t.key() for t in triples] == [
        ("Van Hook Township", "located in", "Mountrail County"),
        ("Mountrail County", "in", "North Dakota"),
    ]
    assert llm.text_calls == 2
    assert ex.stats.skipped_items == 3
    assert "skipped 3 malformed triples" in caplog.text


class FakeLlamaIndexLLM:
    """LlamaIndex LLM surface: complete(prompt) -> .text; as_structured_llm(cls)."""

    def __init__(self, function_calling: bool) -> None:
        self.metadata = SimpleNamespace(
            model_name="fake-li", is_function_calling_model=function_calling
        )
        self.text_calls = 0
        self.structured_calls = 0

    def complete(self, prompt: str):
        self.text_calls += 1
        return SimpleNamespace(text=_answer_for(prompt))

    def as_structured_llm(self, output_cls):
        outer = self

        class Structured:
            def complete(self, prompt):
                outer.structured_calls += 1
                if "entities" in output_cls.model_fields:
                    return SimpleNamespace(raw=output_cls(entities=["A", "B"]))
                return SimpleNamespace(
                    raw=output_cls(triples=[{"subject": "A", "relation": "r", "object": "B"}])
                )

        return Structured()


def test_llamaindex_structured_output_is_used_when_offered() -> None:
    llm = FakeLlamaIndexLLM(function_calling=True)
    [triples] = LLMTripleExtractor(llama_chat_model(llm)).extract([PASSAGE])
    assert [t.key() for t in triples] == [("A", "r", "B")]
    assert (llm.structured_calls, llm.text_calls) == (2, 0)


def test_llamaindex_text_answer_is_parsed() -> None:
    llm = FakeLlamaIndexLLM(function_calling=False)
    ex = LLMTripleExtractor(llama_chat_model(llm))
    [triples] = ex.extract([PASSAGE])
    assert ("Van Hook Township", "located in", "Mountrail County") in {t.key() for t in triples}
    assert llm.structured_calls == 0
    assert ex.extractor_id == "llm:FakeLlamaIndexLLM:fake-li"


def test_framework_answer_without_entities_skips_the_triple_step() -> None:
    class Silent(FakeChatModel):
        def invoke(self, messages):
            self.text_calls += 1
            return SimpleNamespace(content='{"entities": []}')

    llm = Silent(structured=False)
    assert LLMTripleExtractor(as_chat_model(llm)).extract([PASSAGE]) == [[]]
    assert llm.text_calls == 1


def test_a_passage_of_one_huge_word_is_cut_on_tokens(tiny_lms, monkeypatch) -> None:
    from neocorrag_core.lm.generation import chat_ids

    ex = LLMTripleExtractor(tiny_lms[0], max_words=20, max_new_tokens=16)
    sent: list[int] = []
    backend = ex.backend
    original = backend.generate

    def spy(conversations, kind, budget):
        sent.extend(len(chat_ids(backend.lm.tokenizer, c)) for c in conversations)
        return original(conversations, kind, budget)

    monkeypatch.setattr(backend, "generate", spy)
    normal = Passage("n", "Marie Curie was born in Warsaw.", title="Marie Curie")
    huge = Passage("h", "x" * 20_000 + " Marie Curie was born in Warsaw.", title="y" * 5_000)
    ex.extract([normal])
    baseline = max(sent)
    sent.clear()
    ex.extract([huge])
    # 2 tokens per allowed word for the text and 32 for the title, at most.
    assert max(sent) <= baseline + 2 * 20 + 32 + 8
