"""Tiny random models built in-process, so tests never touch a model hub.

A 2-layer Llama (hidden 32) with a byte-level BPE tokenizer trained on fixture
text, and a tiny BERT sentence-transformers embedder. Both build in seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_FIXTURE_TEXT = [
    "Van Hook Township is located in Mountrail County, North Dakota.",
    "Mountrail County's capital is Stanley.",
    "The Journal of Mathematical Physics is published by the American Institute of Physics.",
    "Evidence chains link entities - relation -> entities in a knowledge graph.",
    "Question: Who is the spouse of the director of the film? Answer the question.",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?'\"()-<>/",
]

_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}</s>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tiny_tokenizer(vocab_size: int = 400):
    """A byte-level BPE tokenizer (any text encodes) with eos/pad tokens and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "</s>", "<s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_FIXTURE_TEXT * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", bos_token="<s>"
    )
    fast.chat_template = _CHAT_TEMPLATE
    return fast


def build_tiny_lm(seed: int = 0, vocab_size: int = 400):
    """(model, tokenizer): a random 2-layer Llama with hidden size 32, in eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tiny_tokenizer(vocab_size)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    model = LlamaForCausalLM(config).eval()
    return model, tokenizer


def save_tiny_lm(directory: Path, seed: int = 0, dtype: Any = None) -> Path:
    """Write a tiny LM and its tokenizer as a local HF folder (in ``dtype`` when given)."""
    model, tokenizer = build_tiny_lm(seed)
    if dtype is not None:
        model = model.to(dtype)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def save_tiny_embedder(directory: Path, seed: int = 0) -> Path:
    """Write a tiny BERT sentence-transformers model (mean pooling) to ``directory``."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    tok.train_from_iterator(_FIXTURE_TEXT * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(seed)
    bert = BertModel(
        BertConfig(
            vocab_size=len(fast),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=256,
        )
    )
    raw = directory / "bert"
    raw.mkdir(parents=True, exist_ok=True)
    bert.save_pretrained(raw)
    fast.save_pretrained(raw)
    transformer = Transformer(str(raw), max_seq_length=128)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    st_dir = directory / "st"
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(st_dir))
    return st_dir
