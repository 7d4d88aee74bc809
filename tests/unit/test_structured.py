"""Framework LLMs (through the adapter's ChatModel): a structured-output call that yields no
object falls back to text."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from neocorrag_core.lm.structured import parse_json_object
from neocorrag_integrations.langchain import as_chat_model


class Verdict(BaseModel):
    supported: bool


class NoToolCallChatModel:
    """A LangChain-shaped chat model whose structured runnable returns ``None``, as
    ``with_structured_output`` does when the model answers without calling the tool."""

    def __init__(self, structured_value: Any) -> None:
        self.structured_value = structured_value
        self.text_calls = 0

    def with_structured_output(self, schema: Any) -> Any:
        return SimpleNamespace(invoke=lambda messages: self.structured_value)

    def invoke(self, messages: Any) -> Any:
        self.text_calls += 1
        return SimpleNamespace(content='{"supported": true}')


MESSAGES = [{"role": "user", "content": "Is Stanley the capital of Mountrail County?"}]


def test_no_structured_object_falls_back_to_the_text_answer() -> None:
    chat = NoToolCallChatModel(structured_value=None)
    reply = as_chat_model(chat).ask(MESSAGES, Verdict)
    assert not reply.structured and chat.text_calls == 1
    assert parse_json_object(reply.value) == {"supported": True}


@pytest.mark.parametrize("value", [Verdict(supported=False), {"supported": False}])
def test_a_structured_object_is_used_as_it_is(value: Any) -> None:
    chat = NoToolCallChatModel(structured_value=value)
    reply = as_chat_model(chat).ask(MESSAGES, Verdict)
    assert reply.structured and reply.value == value and chat.text_calls == 0
