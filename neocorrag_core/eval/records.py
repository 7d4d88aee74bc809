"""A run's records on disk: ``<out>/cache/<method>.jsonl`` (one finished question record a
line, appended as soon as it is done, so an interrupted run resumes where it stopped) and
``<out>/run.json`` (the settings the records were made with; resuming with other ones is
refused).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import MISSING
from pathlib import Path
from typing import Any

from neocorrag_core.eval.settings import EvalSettings
from neocorrag_core.formats import read_json_or_lines

logger = logging.getLogger(__name__)


class ResultCache:
    """Per-method JSONL files of finished question records under ``<out>/cache``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder  # made by the first add(): reading a cache creates nothing
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        # Methods whose file this cache has written to, so it ends with a whole line.
        self._line_start: set[str] = set()

    def _file(self, method: str) -> Path:
        return self.folder / f"{method}.jsonl"

    def load(self, method: str) -> dict[str, dict[str, Any]]:
        """Records of ``method`` by question id; a torn last line (a crash mid-write) is dropped."""
        if method not in self.records:
            found: dict[str, dict[str, Any]] = {}
            path = self._file(method)
            if path.is_file():
                # A cache line is written whole or torn by a crash; bytes that are not
                # UTF-8 are such a tear too, and dropped with the line.
                for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        logger.warning("ignoring a torn line in %s", path)
                        continue
                    if not isinstance(record, dict) or not isinstance(record.get("qid"), str):
                        logger.warning("ignoring a line that is not a cached record in %s", path)
                        continue
                    found[record["qid"]] = record
            self.records[method] = found
        return self.records[method]

    def add(self, method: str, record: dict[str, Any]) -> None:
        """Append one record and flush, so it survives an interruption right after.

        A line torn by a crash (no newline at the end of the file) is ended first, so the
        new record starts a line of its own instead of being glued to the torn one (and
        lost with it on the next load)."""
        self.load(method)[record["qid"]] = record
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._file(method)
        lead = "" if method in self._line_start else _line_break_needed(path)
        with open(path, "a", encoding="utf-8") as f:
            f.write(lead + json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
        self._line_start.add(method)


def _line_break_needed(path: Path) -> str:
    """``"\\n"`` when ``path`` is a non-empty file whose last byte is not a newline."""
    if not path.is_file() or path.stat().st_size == 0:
        return ""
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return "" if f.read(1) == b"\n" else "\n"


def _stored(stored: dict[str, Any], key: str) -> Any:
    """A run.json setting; one an older run.json lacks had the field's default there."""
    if key in stored:
        return stored[key]
    spec = EvalSettings.__dataclass_fields__[key]
    if spec.default_factory is not MISSING:
        return spec.default_factory()
    return None if spec.default is MISSING else spec.default


def check_signature(out: Path, settings: EvalSettings) -> bool:
    """Refuse to mix caches of different settings: compare with ``out/run.json``. Returns
    whether there is none yet; :func:`write_signature` writes it once the run's models and
    methods are built, so a setting that fails to build (a typo) leaves nothing behind."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; name a folder (new or a run's)")
    parent = next((p for p in (out, *out.parents) if p.exists()), None)
    if parent is not None and not os.access(parent, os.W_OK):
        raise ValueError(f"--out {out}: cannot write under {parent}; choose a writable folder")
    path = out / "run.json"
    wanted = settings.signature()
    if path.is_file():
        stored = read_json_or_lines(path, what="eval settings file")
        if not isinstance(stored, dict):
            raise ValueError(
                f"{path} is not an eval settings file (a JSON object); use another --out, or "
                "delete the folder to start over"
            )
        # A setting an older run.json lacks had its default there (see _stored).
        changed = sorted(
            (k, _stored(stored, k), v)
            for k, v in json.loads(json.dumps(wanted)).items()
            if _stored(stored, k) != v
        )
        if changed:
            said = ", ".join(f"{k}: {old!r} there, {new!r} now" for k, old, new in changed)
            raise ValueError(
                f"{out} holds results of a run with other settings ({said}); "
                "use another --out, or delete the folder to start over"
            )
        return False
    return True


def write_signature(out: Path, settings: EvalSettings) -> None:
    """Write ``out/run.json``: the settings the records cached in ``out`` were made with."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(settings.signature(), indent=2), encoding="utf-8")
