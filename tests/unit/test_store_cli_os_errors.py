"""``neocorrag store`` / ``index`` under OS errors, closed pipes, stray lock files, and
export files of an unknown schema or with edited lines (issue 64, item 3).

One regression test per kind; each failed before the fix:

* an OS error (a full disk, permissions, a read-only file system, an I/O error) printed a
  bare ``[Errno 28] No space left on device`` with no file and no fix; now one line names
  the file, the fix and (where it holds whatever the moment) the store's state;
* ``neocorrag store stats | head -1`` reported ``[Errno 32] Broken pipe``, exit 2; now a
  closed stdout ends the command quietly with exit 0 (a broken pipe elsewhere is still an
  error);
* ``store repair`` on a full disk left a 0-byte ``<store>.lock``; no run leaves one now;
* ``store import`` took an export whose header names an unknown schema, and imported
  edited lines silently; now both are refused (``--no-verify`` takes an edited file).

Disks are not filled for real: the failing write raises the ``OSError`` a full disk
raises, at the place where it happened.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import neocorrag_core.cli.index as cli_index
import neocorrag_core.cli.store as cli_store
import neocorrag_core.triples.store_errors as store_errors
import neocorrag_core.triples.store_jsonl as store_jsonl
import neocorrag_core.triples.store_repair as store_repair
from neocorrag_core.cli.app import main
from neocorrag_core.errors import InputError, StoreError
from neocorrag_core.triples.indexer_lock import hold_indexer_lock
from neocorrag_core.triples.store import ExtractorKey, TripleStore
from neocorrag_core.types import Passage, Triple

KEY = ExtractorKey("fake", "1")

FIXES = {
    errno.ENOSPC: "free disk space",
    errno.EACCES: "permission denied",
    errno.EROFS: "read-only file system",
    errno.EIO: "I/O error",
}
"""What the line says for each OS error (the fix, or the cause the fix follows)."""


def passage(i: int) -> Passage:
    return Passage(f"p{i}", text=f"Entity {i} is related to Entity {i + 1}.", title=f"T{i}")


def built(path: Path, n: int = 5) -> Path:
    """A healthy store of ``n`` passages (one triple each, document ids linked), closed."""
    with TripleStore(path) as store:
        store.put_many(
            [(passage(i), [Triple(f"Entity {i}", "r", f"Thing {i}")]) for i in range(n)],
            KEY,
            link_ids=True,
        )
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def os_error(code: int) -> OSError:
    """What the OS raises for ``code`` from a write on a descriptor: no file name."""
    return OSError(code, os.strerror(code))


def raiser(exc: BaseException) -> Callable[..., object]:
    def fail(*args: object, **kwargs: object) -> object:
        raise exc

    return fail


def one_line(capsys: pytest.CaptureFixture[str], command: str = "store") -> str:
    """The one error line on stderr (no traceback, no errno number)."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "Errno" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"neocorrag {command}: error: "), err
    return err


# -- OS errors: one line, the file, the fix ---------------------------------------------------


@pytest.mark.parametrize("code", sorted(FIXES))
@pytest.mark.parametrize(
    ("argv", "where", "unmodified"),
    [
        (["stats"], (TripleStore, "summary"), True),
        (["check"], (cli_store, "check_store"), True),
        (["export", "-"], (store_jsonl, "_export_lines"), True),
        (["export", "-q", "{tmp}/dump.jsonl"], (store_jsonl, "_export_lines"), True),
        (["import", "-q", "{tmp}/dump.jsonl"], (store_jsonl, "_import_batch"), False),
        (["delete", "--id", "p1"], (TripleStore, "delete"), False),
    ],
    ids=["stats", "check", "export-stdout", "export-file", "import", "delete"],
)
def test_an_os_error_in_a_store_command_is_one_line_with_the_file_and_the_fix(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    where: tuple[object, str],
    unmodified: bool,
    code: int,
) -> None:
    """It printed ``[Errno 28] No space left on device``: no file, no fix."""
    store = built(tmp_path / "s.sqlite")
    TripleStore(store).export_jsonl(tmp_path / "dump.jsonl")
    before = digest(store)
    monkeypatch.setattr(*where, raiser(os_error(code)))
    args = [a.format(tmp=tmp_path) for a in argv]
    assert main(["store", *args, "--store", str(store)]) == 2
    err = one_line(capsys)
    assert str(store) in err or str(tmp_path / "dump.jsonl") in err
    assert FIXES[code] in err
    if unmodified:
        assert "the store was not modified" in err
    assert digest(store) == before


@pytest.mark.parametrize("code", sorted(FIXES))
def test_an_os_error_in_index_names_the_store_the_fix_and_how_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": "T", "text": "A is B."}]), encoding="utf-8")
    store = tmp_path / "s.sqlite"
    monkeypatch.setattr(cli_index, "index_corpus", raiser(os_error(code)))
    args = ["index", str(corpus), "--store", str(store), "-q", "--no-vectors"]
    assert main(args) == 2
    *said, err = capsys.readouterr().err.strip().splitlines()  # what it indexes, then the error
    assert len(said) == 1 and err.startswith("neocorrag index: error: cannot index ")
    assert "Errno" not in err and "Traceback" not in said[0]
    assert str(store) in err and FIXES[code] in err
    assert "run the same command again to resume" in err


@pytest.mark.parametrize(
    "failure",
    [os_error(errno.ENOSPC), sqlite3.OperationalError("database or disk is full")],
    ids=["ENOSPC", "SQLITE_FULL"],
)
def test_repair_on_a_full_disk_says_so_changes_nothing_and_leaves_no_lock_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    failure: Exception,
) -> None:
    """It printed a bare ``[Errno 28] No space left on device`` (the lock file's pid could
    not be written) and left a 0-byte ``s.sqlite.lock``."""
    store = built(tmp_path / "s.sqlite")
    before = digest(store)
    real_salvage = store_repair._salvage

    def salvage_until_the_disk_is_full(source: Path, tmp: Path) -> object:
        real_salvage(source, tmp)  # the partial copy is on disk: it must go
        raise failure

    monkeypatch.setattr(os, "pwrite", raiser(os_error(errno.ENOSPC)))  # the lock's pid
    monkeypatch.setattr(store_repair, "_salvage", salvage_until_the_disk_is_full)
    assert main(["store", "repair", "--force", "--store", str(store)]) == 2
    err = one_line(capsys)
    assert f"cannot repair {store}: no space left on the device holding {tmp_path}" in err
    assert "free disk space there and repair again" in err
    assert f"{store} was not changed, and the partial copy was removed" in err
    assert digest(store) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "s.sqlite"
    ]  # no lock file, no partial copy, nothing moved aside


def test_a_lock_file_whose_pid_cannot_be_written_does_not_fail_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pid only names the holder to a waiting run: writing it is best effort."""
    store = built(tmp_path / "s.sqlite")
    monkeypatch.setattr(os, "pwrite", raiser(os_error(errno.ENOSPC)))
    assert main(["store", "repair", "--force", "--store", str(store)]) == 0
    assert "repaired" in capsys.readouterr().out
    assert not Path(f"{store}.lock").exists()
    assert TripleStore(store).count() == 5


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO])
def test_repair_names_other_os_errors_with_their_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    store = built(tmp_path / "s.sqlite")
    monkeypatch.setattr(store_repair, "_salvage", raiser(os_error(code)))
    assert main(["store", "repair", "--force", "--store", str(store)]) == 2
    err = one_line(capsys)
    assert f"cannot repair {store}" in err and FIXES[code] in err and "was not changed" in err


def test_import_that_fails_on_a_full_disk_leaves_no_store_it_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty store file was left behind (only a refused file removed it)."""
    dump = tmp_path / "dump.jsonl"
    TripleStore(built(tmp_path / "a.sqlite")).export_jsonl(dump)
    monkeypatch.setattr(store_jsonl, "_import_batch", raiser(os_error(errno.ENOSPC)))
    new = tmp_path / "new.sqlite"
    assert main(["store", "import", str(dump), "--store", str(new), "-q"]) == 2
    assert "free disk space" in one_line(capsys)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("new.sqlite")]


def test_a_full_disk_behind_stdout_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``store export - > file`` on a full disk: the error is stdout's, not the store's."""

    class FullDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise os_error(errno.ENOSPC)

    store = built(tmp_path / "s.sqlite")
    monkeypatch.setattr(sys, "stdout", FullDisk())
    assert main(["store", "export", "-", "--store", str(store)]) == 2
    err = one_line(capsys)
    assert "no space left on the disk stdout is redirected to" in err
    assert "the store was not modified" in err and "incomplete" in err


def test_a_disk_io_error_on_a_full_disk_is_called_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite reports a full disk as "disk I/O error" when it cannot grow its -shm file."""
    store = TripleStore(built(tmp_path / "s.sqlite"))
    failure = sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(store_errors, "disk_is_full", lambda path: True)
    err = store._error("write triples to", failure)
    assert err.kind == "full" and f"the disk holding {tmp_path} is full" in str(err)
    monkeypatch.setattr(store_errors, "disk_is_full", lambda path: False)
    err = store._error("write triples to", failure)
    assert err.kind == "other" and "check the disk" in str(err)
    assert f"neocorrag store check --store {store.path}" in str(err)


# -- a closed pipe ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["stats"], ["stats", "--json"], ["check"], ["export", "-"]])
def test_output_closed_early_exits_0_quietly(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    """``neocorrag store stats | head -1``: ``[Errno 32] Broken pipe``, exit 2."""
    store = built(tmp_path / "s.sqlite")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone, as `head -1` once it has its line
    # Closed at the end without an error: its descriptor then points at the null device.
    with open(write_end, "w", encoding="utf-8") as closed:
        monkeypatch.setattr(sys, "stdout", closed)
        try:
            assert main(["store", *argv, "--store", str(store)]) == 0
        finally:
            monkeypatch.undo()
    assert capsys.readouterr().err == ""


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = built(tmp_path / "s.sqlite")
    monkeypatch.setattr(TripleStore, "summary", raiser(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert main(["store", "stats", "--store", str(store)]) == 2
    assert "Broken pipe" in one_line(capsys)


def test_export_piped_into_a_reader_that_stops_exits_0(tmp_path: Path) -> None:
    """The real thing: a process whose stdout reader leaves after one line."""
    store = built(tmp_path / "s.sqlite", n=2000)  # more than a pipe's buffer (64 KiB)
    cli = "from neocorrag_core.cli import main; raise SystemExit(main())"
    child = subprocess.Popen(
        [sys.executable, "-c", cli, "store", "export", "-", "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    assert b"neocorrag_triple_store_export" in child.stdout.readline()
    child.stdout.close()  # what `head -1` does
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 0, err
    assert err == ""


# -- no stray lock file -----------------------------------------------------------------------


def test_no_lock_file_is_left_by_index_or_by_a_failed_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Extractor:
        extractor_id, version = "fake", "1"

        def __init__(self, args: object = None) -> None:
            pass

        def extract(self, passages: list[Passage]) -> list[list[Triple]]:
            return [[Triple(p.title, "is", "x")] for p in passages]

    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": "T", "text": "A is B."}]), encoding="utf-8")
    store = tmp_path / "s.sqlite"
    monkeypatch.setattr(cli_index, "_make_extractor", Extractor)
    assert main(["index", str(corpus), "--store", str(store), "-q", "--no-vectors"]) == 0
    assert not Path(f"{store}.lock").exists()
    monkeypatch.setattr(store_repair, "_salvage", raiser(StoreError("boom")))
    assert main(["store", "repair", "--force", "--store", str(store)]) == 2
    capsys.readouterr()
    assert not Path(f"{store}.lock").exists()


def test_a_run_that_waited_on_a_lock_file_its_holder_deleted_locks_the_new_one(
    tmp_path: Path,
) -> None:
    """Deleting the lock file is safe: the waiting run notices and locks the file now at
    the path, so two runs never hold two files of one name."""
    fcntl = pytest.importorskip("fcntl")
    lock = tmp_path / "s.sqlite.lock"
    holding, waiting, release = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with hold_indexer_lock(lock, "s"):
            holding.set()
            release.wait(10)

    def second() -> None:
        with hold_indexer_lock(lock, "s", on_wait=lambda pid: waiting.set()):
            probe = os.open(lock, os.O_RDWR)  # the file at the path is the one it holds
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append(False)
            except BlockingIOError:
                seen.append(True)
            finally:
                os.close(probe)

    runs = [threading.Thread(target=first), threading.Thread(target=second)]
    runs[0].start()
    assert holding.wait(10)
    runs[1].start()
    assert waiting.wait(10)
    release.set()  # the first deletes its file as it lets go
    for run in runs:
        run.join(10)
    assert seen == [True]
    assert not lock.exists()


# -- import: unknown schema, edited lines -----------------------------------------------------


def exported(tmp_path: Path) -> tuple[Path, list[str]]:
    """An export of a 5-passage store and its lines."""
    dump = tmp_path / "dump.jsonl"
    TripleStore(built(tmp_path / "a.sqlite")).export_jsonl(dump)
    return dump, dump.read_text(encoding="utf-8").splitlines(keepends=True)


@pytest.mark.parametrize("schema", [4, 99, 0, -1, "3", None, True, [3]])
def test_import_refuses_an_export_of_an_unknown_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schema: object
) -> None:
    """Its entries were imported whatever the schema its header named."""
    dump, lines = exported(tmp_path)
    header = json.loads(lines[0])
    header["schema"] = schema
    dump.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    store = TripleStore(tmp_path / "b.sqlite")
    with pytest.raises(InputError) as caught:
        store.import_jsonl(dump)
    message = str(caught.value)
    assert str(dump) in message and f"schema {json.dumps(schema)}" in message
    assert "schemas 1 to 3" in message and "nothing was imported" in message
    assert ("upgrade neocorrag" in message) == (schema in (4, 99))
    assert store.count() == 0
    new = tmp_path / "new.sqlite"
    assert main(["store", "import", str(dump), "--store", str(new), "-q"]) == 2
    assert "which this version does not know" in one_line(capsys)
    assert not new.exists()


def edited(lines: list[str]) -> str:
    """The export with one triple changed: still a valid entry, still the right count."""
    entry = json.loads(lines[2])
    entry["triples"][0][2] = "Something else"
    return "".join([*lines[:2], json.dumps(entry) + "\n", *lines[3:]])


def test_import_refuses_edited_lines_and_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited line was imported silently (the format had no checksum)."""
    dump, lines = exported(tmp_path)
    dump.write_text(edited(lines), encoding="utf-8")
    store = TripleStore(tmp_path / "b.sqlite")
    with pytest.raises(InputError) as caught:
        store.import_jsonl(dump, batch_size=1)
    message = str(caught.value)
    assert str(dump) in message and "edited or damaged" in message
    assert "nothing was imported" in message and "--no-verify" in message
    assert store.count() == 0
    new = tmp_path / "new.sqlite"
    assert main(["store", "import", str(dump), "--store", str(new), "-q"]) == 2
    assert "edited or damaged" in one_line(capsys)
    assert not new.exists()


def test_no_verify_imports_a_file_edited_on_purpose_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    dump, lines = exported(tmp_path)
    dump.write_text(edited(lines), encoding="utf-8")
    store = TripleStore(tmp_path / "b.sqlite")
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.triples.store"):
        report = store.import_jsonl(dump, verify=False)
    assert (report.imported, report.complete, report.verified) == (5, True, False)
    assert report.checksum_mismatch
    assert [r for r in caplog.records if "verify=False" in r.getMessage()]
    new = tmp_path / "new.sqlite"
    assert main(["store", "import", str(dump), "--store", str(new), "-q", "--no-verify"]) == 0
    assert "imported as they are (--no-verify)" in capsys.readouterr().out
    assert TripleStore(new).count() == 5


@pytest.mark.parametrize("value", ["0" * 64, "not a checksum", 7])
def test_a_damaged_checksum_is_refused_as_edited(tmp_path: Path, value: object) -> None:
    dump, lines = exported(tmp_path)
    marker = json.loads(lines[-1])
    marker["sha256"] = value
    dump.write_text("".join(lines[:-1]) + json.dumps(marker) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="edited or damaged"):
        TripleStore(tmp_path / "b.sqlite").import_jsonl(dump)


def test_an_export_without_a_checksum_still_imports_unverified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the previous version wrote: an end marker with the count alone."""
    dump, lines = exported(tmp_path)
    marker = json.loads(lines[-1])
    del marker["sha256"]
    dump.write_text("".join(lines[:-1]) + json.dumps(marker) + "\n", encoding="utf-8")
    report = TripleStore(tmp_path / "b.sqlite").import_jsonl(dump)
    assert (report.imported, report.complete, report.verified) == (5, True, False)
    assert not report.checksum_mismatch
    assert main(["store", "import", str(dump), "--store", str(tmp_path / "c.sqlite")]) == 0
    assert "not verified: its end marker has no checksum" in capsys.readouterr().out


def test_a_copy_with_crlf_line_endings_still_verifies(tmp_path: Path) -> None:
    """The checksum reads each line without its line ending: a Windows copy still matches."""
    dump, lines = exported(tmp_path)
    dump.write_bytes("".join(line.replace("\n", "\r\n") for line in lines).encode("utf-8"))
    report = TripleStore(tmp_path / "b.sqlite").import_jsonl(dump)
    assert (report.imported, report.verified) == (5, True)


def test_an_edited_stdin_is_refused_and_leaves_the_store_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, lines = exported(tmp_path)
    store = built(tmp_path / "c.sqlite", n=1)
    monkeypatch.setattr(sys, "stdin", io.StringIO(edited(lines)))
    assert main(["store", "import", "-", "--store", str(store)]) == 2
    assert "edited or damaged" in one_line(capsys)
    assert TripleStore(store).count() == 1
