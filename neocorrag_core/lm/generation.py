"""LM calls shared by every stage: chat prompts, the input device, neutral generation settings.

Every ``generate`` call in the package takes its settings from :func:`neutral_settings`, so
a model's own ``generation_config`` (e.g. Qwen's ``repetition_penalty=1.1``, sampling
temperatures) never changes a score or makes a call nondeterministic.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from neocorrag_core.models import LanguageModel, end_of_turn_token_id
from neocorrag_core.validation import clean_text

logger = logging.getLogger(__name__)


def text_token_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of untrusted ``text`` with no control token in them.

    ``split_special_tokens=True`` makes a passage (or query, title, triple) that contains
    ``<|im_end|>`` or ``<|eot_id|>`` tokenize as those characters, never as the control token.
    That flag only covers tokens flagged special; a tokenizer may also register markers as
    plain added tokens (Qwen2.5's ``<tool_call>``, which its chat template uses), which it
    still matches in any text. Such a match is re-tokenized with the marker broken
    (:func:`_break_markers`), so retrieved text cannot forge prompt structure. Text in which
    the tokenizer matched no added token keeps its ids unchanged.
    """
    return text_token_ids_batch(tokenizer, [text])[0]


def text_token_ids_batch(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """:func:`text_token_ids` of each text, tokenized as one batch."""
    if not texts:
        return []
    # The tokenizer's last line of defence against text that is not valid Unicode (lone
    # surrogates): it cannot encode them. The edges clean what they take in; this covers
    # text made in between (an LM's draft, a component given raw text).
    texts = [clean_text(text) for text in texts]
    encoded = _plain_ids(tokenizer, texts)
    markers = _added_markers(tokenizer)
    # <unk> is how some tokenizers spell characters they lack: ordinary text, not a marker.
    unk = getattr(tokenizer, "unk_token_id", None)
    forbidden = {i for i in markers.values() if i != unk}
    for n, (text, ids) in enumerate(zip(texts, encoded, strict=True)):
        if not any(i in forbidden for i in ids):
            continue
        escaped = _break_markers(text, markers)
        if escaped != text:
            ids = _plain_ids(tokenizer, [escaped])[0]
        kept = [i for i in ids if i not in forbidden]
        if len(kept) < len(ids):
            # A marker matched on normalized text (NFKC folds a fullwidth ＜ into <) or a
            # normalizer that deletes the zero-width space. Losing a forged marker's
            # characters is harmless; keeping the control token is not.
            logger.warning("dropped %d marker token(s) from untrusted text", len(ids) - len(kept))
        encoded[n] = kept
    return encoded


def _plain_ids(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text with no special token matched (added tokens still are)."""
    batch = tokenizer(list(texts), add_special_tokens=False, split_special_tokens=True)
    return [[int(i) for i in ids] for ids in batch["input_ids"]]


# tokenizer -> (its vocabulary size when read, its markers): added_tokens_decoder builds and
# sorts a dict on every access, which costs more than tokenizing a passage when a model has
# thousands of added tokens. A memo, not state: entries go with their tokenizer, and a
# tokenizer that grew (add_tokens) is read again.
_MARKER_MEMO: weakref.WeakKeyDictionary[Any, tuple[int, dict[str, int]]] = (
    weakref.WeakKeyDictionary()
)


def _added_markers(tokenizer: Any) -> dict[str, int]:
    """:func:`_read_added_markers`, read once per tokenizer (and again after it grows)."""
    try:
        size = len(tokenizer)
        memo = _MARKER_MEMO.get(tokenizer)
    except TypeError:  # no len() or not weak-referenceable: read every time
        return _read_added_markers(tokenizer)
    if memo is not None and memo[0] == size:
        return memo[1]
    markers = _read_added_markers(tokenizer)
    _MARKER_MEMO[tokenizer] = (size, markers)
    return markers


def _read_added_markers(tokenizer: Any) -> dict[str, int]:
    """Content -> id of every added token (special or not) that text could spell.

    All of them count, not only those flagged special: which added tokens a model treats as
    structure (tool calls, fill-in-the-middle, thinking) is not recorded anywhere, and a
    tokenizer that added ordinary words only sees them spelled in pieces. Single characters
    (no text edit can break them) and whitespace runs (the same text whatever their token;
    CodeGen and Phi-2 add them) are left alone.
    """
    found: dict[str, int] = {}
    for token_id, token in getattr(tokenizer, "added_tokens_decoder", {}).items():
        content = str(getattr(token, "content", token))
        if len(content) > 1 and not content.isspace():
            found[content] = int(token_id)
    return found


# Inserted after a marker's first character: invisible, and no tokenizer's marker spans it.
_BREAK = "\u200b"


def _break_markers(text: str, markers: Iterable[str]) -> str:
    """``text`` with every occurrence of each marker broken by a zero-width space."""
    for marker in sorted(markers, key=len, reverse=True):  # longest first: nested markers
        if marker in text:
            text = text.replace(marker, marker[0] + _BREAK + marker[1:])
    return text


# Stand-ins for message contents while a chat template is rendered: no template transforms
# them and no text we build contains a NUL.
_SLOT = "\x00neocorrag-slot-{}\x00"


def chat_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> list[int]:
    """``messages`` rendered with the tokenizer's chat template (generation prompt added), as
    token ids in which only the template's own markers are added (control) tokens.

    The template is rendered with stand-ins for the contents; its pieces are tokenized with
    special tokens recognized, the contents with :func:`text_token_ids`. A template that
    drops or reorders the stand-ins (none known) is rendered with the contents instead, after
    every marker string in them (special or other added token) is broken by a zero-width
    space, so the guarantee holds either way.
    """
    slots = [_SLOT.format(i) for i in range(len(messages))]
    stand_in = [{**m, "content": slot} for m, slot in zip(messages, slots, strict=True)]
    rendered = tokenizer.apply_chat_template(stand_in, tokenize=False, add_generation_prompt=True)
    pieces: list[tuple[str, bool]] = []  # (text, is content)
    rest = rendered
    for slot, message in zip(slots, messages, strict=True):
        head, found, rest = rest.partition(slot)
        if not found:
            return _escaped_chat_ids(tokenizer, messages)
        pieces += [(head, False), (message["content"], True)]
    pieces.append((rest, False))
    ids: list[int] = []
    for text, is_content in pieces:
        if not text:
            continue
        if is_content:
            ids += text_token_ids(tokenizer, text)
        else:
            ids += [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]
    return ids


def _escaped_chat_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> list[int]:
    # Here the contents are tokenized together with the template, markers recognized, so
    # every marker spelled in them is broken first: special tokens, <unk>, and added ones.
    markers = set(_added_markers(tokenizer)) | {
        str(t)
        for t in getattr(tokenizer, "all_special_tokens", [])
        if len(str(t)) > 1 and not str(t).isspace()
    }
    safe = [{**m, "content": _break_markers(m["content"], markers)} for m in messages]
    rendered = tokenizer.apply_chat_template(safe, tokenize=False, add_generation_prompt=True)
    return [int(i) for i in tokenizer(rendered, add_special_tokens=False)["input_ids"]]


def chat_prompt_ids(lm: LanguageModel, text: str, plain_suffix: str = "") -> list[int]:
    """``text`` as one user turn in the LM's chat template (or plain text plus a suffix), with
    no special token coming from ``text`` (:func:`chat_ids`)."""
    tokenizer = lm.tokenizer
    if getattr(tokenizer, "chat_template", None):
        return chat_ids(tokenizer, [{"role": "user", "content": text}])
    # No template: the tokenizer's own framing tokens (BOS, and EOS for tokenizers that add
    # one) around the text, which is tokenized as plain text.
    body = text_token_ids(tokenizer, text + plain_suffix)
    framed = [int(i) for i in tokenizer("x", add_special_tokens=True)["input_ids"]]
    bare = [int(i) for i in tokenizer("x", add_special_tokens=False)["input_ids"]]
    if not bare:
        return body
    start = next((i for i in range(len(framed)) if framed[i : i + len(bare)] == bare), None)
    if start is None:
        return body
    return framed[:start] + body + framed[start + len(bare) :]


# Processors that would move scores away from the model's plain log-probs, all switched off.
_NEUTRAL_SAMPLING: dict[str, Any] = {
    "do_sample": False,
    "repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "min_length": 0,
    "min_new_tokens": None,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "sequence_bias": None,
    "renormalize_logits": False,
    "temperature": None,
    "top_k": None,
    "top_p": None,
}
# Beam search only: every beam runs to its end and is scored by its plain mean log-prob.
_NEUTRAL_BEAMS: dict[str, Any] = {"early_stopping": "never", "length_penalty": 1.0}


def neutral_settings(*, beams: bool = False) -> dict[str, Any]:
    """``generate`` keyword arguments that neutralize the model's own generation config.

    ``beams=True`` adds the beam-search settings (no early stop, no length penalty).
    A fresh dict each call, so callers may add their own keys.
    """
    settings = dict(_NEUTRAL_SAMPLING)
    if beams:
        settings.update(_NEUTRAL_BEAMS)
    return settings


def input_ids_tensor(lm: LanguageModel, rows: Sequence[Sequence[int]]) -> Any:
    """Token id rows as a ``long`` tensor on the device the model's inputs must live on."""
    import torch

    return torch.tensor([list(r) for r in rows], dtype=torch.long, device=model_device(lm.model))


def model_device(model: Any) -> Any:
    """The device the model's inputs must live on."""
    device = getattr(model, "device", None)
    if device is not None:
        return device
    return next(model.parameters()).device


def greedy_generate(lm: LanguageModel, ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy continuation of ``ids`` until an end-of-turn token; the model's own sampling
    settings are neutralized so every method's reader call is deterministic."""
    return _greedy(lm, ids, max_new_tokens, scored=False)[0]


def greedy_generate_scored(
    lm: LanguageModel, ids: Sequence[int], max_new_tokens: int
) -> tuple[list[int], list[float]]:
    """:func:`greedy_generate`, plus the probability the model gave each generated token
    before the end token (from the generation's raw logits, in the same call)."""
    return _greedy(lm, ids, max_new_tokens, scored=True)


def _greedy(
    lm: LanguageModel, ids: Sequence[int], max_new_tokens: int, *, scored: bool
) -> tuple[list[int], list[float]]:
    import torch

    with lm.lock, torch.inference_mode():
        end_id = end_of_turn_token_id(lm.tokenizer)
        eos = {end_id}
        model_eos = getattr(getattr(lm.model, "config", None), "eos_token_id", None)
        if isinstance(model_eos, int):
            eos.add(model_eos)
        pad_id = lm.tokenizer.pad_token_id
        inputs = input_ids_tensor(lm, [ids])
        extra: dict[str, Any] = {"output_logits": True, "return_dict_in_generate": True}
        output = lm.model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=max_new_tokens,
            num_beams=1,
            eos_token_id=sorted(eos),
            pad_token_id=end_id if pad_id is None else pad_id,
            **(extra if scored else {}),
            **neutral_settings(),
        )
        sequences = output.sequences if scored else output
        # The end token stays in the list: it was generated, so it counts as a generated token.
        new_ids: list[int] = sequences[0, len(ids) :].tolist()
        probabilities: list[float] = []
        if scored:
            for step, token in zip(output.logits, new_ids, strict=False):
                if token in eos:
                    break
                probabilities.append(float(torch.softmax(step[0].float(), dim=-1)[token]))
    return new_ids, probabilities


__all__ = [
    "chat_ids",
    "chat_prompt_ids",
    "greedy_generate",
    "greedy_generate_scored",
    "input_ids_tensor",
    "model_device",
    "neutral_settings",
    "text_token_ids",
    "text_token_ids_batch",
]
