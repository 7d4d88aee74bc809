"""The manifest of a converted model folder: recorded once, checked cheaply on every load.

A converted folder holds ~1.2 GB of safetensors; hashing all of it on every load takes
seconds on a small CPU (8 s on a busy 2-core one, ~40% of loading the model). So each file
is recorded with its size and a digest that costs milliseconds to check:

* files up to :data:`SMALL_FILE_BYTES` (config, generation config, chat template): the full
  sha256;
* larger files (weights, ``tokenizer.json``): a *sampled* sha256 over :data:`SAMPLE_BLOCKS`
  blocks of :data:`SAMPLE_BLOCK_BYTES` spread evenly from the first byte to the last (first
  and last block included, ~2 MiB read per file), plus, for safetensors, the sha256 of the
  whole header (every tensor's name, dtype, shape and offsets).

On top of the recorded digests, :func:`check_structure` checks what needs no record:
``config.json`` parses into an object naming its ``model_type``, there is a tokenizer and at
least one safetensors file, and each safetensors header parses and its tensors exactly fill
the file (a truncated or padded weights file fails).

What this catches: a missing, emptied, truncated, extended, added or replaced file, any change
to a small file or to a safetensors header, and damage inside a sampled block. What it does
not: a few bytes changed in the unsampled part of a large file (that needs hashing it all;
the conversion records the full sha256 of every file as well, for :func:`check_manifest` with
``full=True`` or a ``sha256sum`` by hand).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any

MANIFEST_VERSION = 1
SMALL_FILE_BYTES = 1024 * 1024
SAMPLE_BLOCKS = 9
SAMPLE_BLOCK_BYTES = 256 * 1024
_MAX_HEADER_BYTES = 100 * 1024 * 1024
_CHUNK = 8 * 1024 * 1024
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
# Bytes per element of the safetensors dtypes (unknown ones skip the per-tensor size check).
_DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4,
    "U64": 8, "I64": 8, "F64": 8,
}  # fmt: skip


def _is_recorded(path: Path, folder: Path) -> bool:
    """Whether ``path`` belongs in the manifest: regular files, not hidden (the marker is)."""
    rel = path.relative_to(folder)
    return path.is_file() and not any(part.startswith(".") for part in rel.parts)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if _is_recorded(p, folder))


def sha256_file(path: Path) -> str:
    """sha256 of a whole file, read in 8 MiB chunks (the one file-hashing helper)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sampled_sha256(path: Path, size: int) -> str:
    """sha256 over :data:`SAMPLE_BLOCKS` blocks spread evenly over the file, size included."""
    digest = hashlib.sha256(f"{size}:{SAMPLE_BLOCKS}:{SAMPLE_BLOCK_BYTES}:".encode())
    last = max(size - SAMPLE_BLOCK_BYTES, 0)
    with open(path, "rb") as f:
        for i in range(SAMPLE_BLOCKS):
            f.seek(last * i // (SAMPLE_BLOCKS - 1))
            digest.update(f.read(SAMPLE_BLOCK_BYTES))
    return digest.hexdigest()


def _safetensors_header(path: Path, size: int) -> bytes:
    """The raw header of a safetensors file (length prefix included); ValueError if unusable."""
    if size < 8:
        raise ValueError(f"{size} bytes, too short for a safetensors header")
    with open(path, "rb") as f:
        prefix = f.read(8)
        (length,) = struct.unpack("<Q", prefix)
        if length > min(_MAX_HEADER_BYTES, size - 8):
            raise ValueError(f"its header claims {length} bytes of a {size}-byte file")
        return prefix + f.read(length)


def _check_safetensors(path: Path, size: int) -> str | None:
    """Why ``path`` is not a complete safetensors file, or None if its tensors fill it exactly."""
    try:
        raw = _safetensors_header(path, size)
        header = json.loads(raw[8:])
    except (OSError, ValueError) as err:  # JSONDecodeError and UnicodeDecodeError included
        return f"{path.name} has no readable safetensors header ({err})"
    if not isinstance(header, dict):
        return f"{path.name} has a safetensors header that is not a JSON object"
    data_bytes = size - len(raw)
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, stop = info["data_offsets"]
            shape = [int(d) for d in info["shape"]]
            dtype = info["dtype"]
        except (KeyError, TypeError, ValueError):
            return f"{path.name} lists tensor {name!r} without dtype, shape and offsets"
        if not (isinstance(begin, int) and isinstance(stop, int) and 0 <= begin <= stop):
            return f"{path.name} lists tensor {name!r} with bad offsets {begin}..{stop}"
        itemsize = _DTYPE_BYTES.get(dtype)
        if itemsize is not None and stop - begin != math.prod(shape) * itemsize:
            return f"{path.name} gives tensor {name!r} {stop - begin} bytes for {dtype}{shape}"
        end = max(end, stop)
    if end != data_bytes:
        return (
            f"{path.name} holds {data_bytes} bytes of tensor data but its header describes "
            f"{end} (truncated or damaged)"
        )
    return None


def check_structure(folder: Path) -> str | None:
    """Why ``folder`` is not a usable causal-LM folder, or None; reads only config and headers."""
    config = folder / "config.json"
    try:
        parsed = json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "config.json is missing"
    except (OSError, ValueError) as err:
        return f"config.json does not parse ({err})"
    if not isinstance(parsed, dict) or not parsed.get("model_type"):
        return "config.json names no model_type (empty or not a model config)"
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        return f"there is no tokenizer (none of {', '.join(_TOKENIZER_FILES)})"
    weights = [p for p in _files(folder) if p.suffix == ".safetensors"]
    if not weights:
        return "there is no .safetensors weights file"
    for path in weights:
        problem = _check_safetensors(path, path.stat().st_size)
        if problem:
            return problem
    return None


def _record_file(path: Path, full: bool) -> dict[str, Any]:
    size = path.stat().st_size
    entry: dict[str, Any] = {"size": size}
    if size <= SMALL_FILE_BYTES or full:
        entry["sha256"] = sha256_file(path)
    if size > SMALL_FILE_BYTES:
        entry["sampled_sha256"] = _sampled_sha256(path, size)
        if path.suffix == ".safetensors":
            entry["header_sha256"] = hashlib.sha256(_safetensors_header(path, size)).hexdigest()
    return entry


def build_manifest(folder: Path, *, full: bool = True) -> dict[str, Any]:
    """The manifest of ``folder``; ValueError naming the problem if its structure is broken.

    ``full`` also records the sha256 of the large files (it reads all of them: right at
    conversion, too slow for a load).
    """
    problem = check_structure(folder)
    if problem:
        raise ValueError(problem)
    files = {p.relative_to(folder).as_posix(): _record_file(p, full) for p in _files(folder)}
    return {"version": MANIFEST_VERSION, "files": files}


def check_manifest(folder: Path, manifest: object, *, full: bool = False) -> str | None:
    """Why ``folder`` does not match ``manifest`` (or fails :func:`check_structure`), or None.

    Reads the small files whole and ~2 MiB of each large one; ``full`` hashes the large files
    whole as well (where their full sha256 was recorded).
    """
    problem = check_structure(folder)
    if problem:
        return problem
    if not (
        isinstance(manifest, dict)
        and manifest.get("version") == MANIFEST_VERSION
        and isinstance(manifest.get("files"), dict)
        and manifest["files"]
    ):
        return "its manifest is unreadable or of an unknown version"
    files: dict[str, Any] = manifest["files"]
    present = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
    extra = sorted(set(present) - set(files))
    if extra:
        return f"it holds files the conversion did not write: {', '.join(extra)}"
    for name, entry in files.items():
        path = present.get(name)
        if path is None:
            return f"{name} is missing"
        if not isinstance(entry, dict):
            return f"the manifest entry of {name} is unreadable"
        try:
            problem = _check_file(path, name, entry, full)
        except (OSError, ValueError) as err:
            problem = f"{name} cannot be read ({err})"
        if problem:
            return problem
    return None


def _check_file(path: Path, name: str, entry: dict[str, Any], full: bool) -> str | None:
    size = path.stat().st_size
    if size != entry.get("size"):
        return f"{name} is {size} bytes, {entry.get('size')} were written"
    large = size > SMALL_FILE_BYTES
    if large and path.suffix == ".safetensors":
        header = hashlib.sha256(_safetensors_header(path, size)).hexdigest()
        if header != entry.get("header_sha256"):
            return f"the safetensors header of {name} changed"
    if large and _sampled_sha256(path, size) != entry.get("sampled_sha256"):
        return f"the content of {name} changed (sampled sha256)"
    if (not large or (full and "sha256" in entry)) and sha256_file(path) != entry.get("sha256"):
        return f"the content of {name} changed (sha256)"
    return None
