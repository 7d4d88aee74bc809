"""Checking the tables of a triple store being opened, creating them, migrating old ones.

What :class:`~neocorrag_core.triples.store.TripleStore` does once its file is open
(:mod:`~neocorrag_core.triples.store_open`): a writable store gets the tables of
:data:`~neocorrag_core.triples.store_schema.SCHEMA_VERSION` (a new file), or is migrated
up to it (an older store, :func:`migrate`); a read-only store is only checked, and read at
the schema it has (:func:`check_schema`). Either way a file that is someone else's
database, a store of a schema this version cannot read, or one missing a table its schema
needs is refused with a :class:`~neocorrag_core.errors.StoreError` and left as it is. The
tables themselves and the migration steps are in
:mod:`~neocorrag_core.triples.store_schema`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from neocorrag_core.errors import StoreError
from neocorrag_core.triples.store_errors import (
    StoreSchemaError,
    damaged_message,
    foreign_message,
)
from neocorrag_core.triples.store_open import set_wal
from neocorrag_core.triples.store_schema import (
    SCHEMA_VERSION,
    can_upgrade,
    create_tables,
    stored_version,
    table_names,
    upgrade,
)

if TYPE_CHECKING:
    from neocorrag_core.triples.store import TripleStore

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")


def create_schema(store: TripleStore) -> None:
    """Open a writable store: make its tables if it has none, migrate it if it is old."""
    with store._transaction(write=False, action="open") as conn:
        tables = table_names(conn)
        found = stored_version(conn) if "meta" in tables else None
    if tables and "meta" not in tables:
        # Someone else's SQLite database: refuse it rather than adding our tables to it.
        raise StoreError(foreign_message(store.path, tables), kind="foreign")
    if not store._memory:
        with store._guard("open"):
            # Persistent in the file, so later connections (other threads) need not set
            # it; a no-op (no write) when the store is in WAL mode already.
            set_wal(store)
    if {"meta", "passages", "triples"} <= tables:  # the usual case: only check
        version = known_version(store, found, tables)
        if version < SCHEMA_VERSION:
            migrate(store)
        store.schema_version = SCHEMA_VERSION
        return
    # One transaction: a concurrent opener sees either no schema or all of it.
    with store._transaction(action="create the tables of") as conn:
        found = create_tables(conn)
        if found is not None:  # a concurrent opener made them first
            upgrade(conn, known_version(store, found, table_names(conn)))
    store.schema_version = SCHEMA_VERSION


def migrate(store: TripleStore) -> None:
    """Bring an older store up to :data:`SCHEMA_VERSION`, in one ``BEGIN IMMEDIATE``.

    The version is read again inside the write transaction: of two processes opening
    the same old file at once, the second waits for the first's transaction, then finds
    the store migrated and does nothing.
    """
    with store._transaction(action="migrate") as conn:
        version = known_version(store, stored_version(conn), table_names(conn))
        migrated = upgrade(conn, version)
    if migrated:
        logger.info(
            "migrated the triple store %s from schema %d to %d",
            store.path,
            version,
            SCHEMA_VERSION,
        )


def check_schema(store: TripleStore) -> None:
    """Open a read-only store: check its tables, and read it at the schema it has."""
    with store._transaction(write=False, action="open") as conn:
        tables = table_names(conn)
        if tables and "meta" not in tables:
            raise StoreError(foreign_message(store.path, tables), kind="foreign")
        if not {"meta", "passages", "triples"} <= tables:
            found = f"tables {', '.join(sorted(tables))}" if tables else "no tables"
            raise StoreError(
                damaged_message(store.path, f"it has {found}, and it is open read-only"),
                kind="damaged",
            )
        store.schema_version = known_version(store, stored_version(conn), tables)
    if store.schema_version < SCHEMA_VERSION:
        logger.info(
            "%s is a schema %d store open read-only: its triples are read as usual; "
            "document ids need schema %d (open it writable once to migrate it)",
            store.path,
            store.schema_version,
            SCHEMA_VERSION,
        )


def known_version(store: TripleStore, found: str | None, tables: set[str]) -> int:
    """The store's schema as a number this code reads (as is, or after migrating);
    otherwise :class:`StoreSchemaError`. A table the version needs is missing: damaged."""
    version = int(found) if found is not None and found.isdigit() else None
    if version is None or not can_upgrade(version):
        what = "no schema version" if found is None else f"schema {found}"
        fix = "use a new --store path (or NEOCORRAG_CACHE)"
        if version is not None and version > SCHEMA_VERSION:
            fix = f"upgrade neocorrag to read it, or {fix}"
        raise StoreSchemaError(
            f"{store.path} was written by another neocorrag store schema ({what}, this "
            f"version reads {SCHEMA_VERSION}); {fix}"
        )
    if version >= 2 and "documents" not in tables:
        raise StoreError(
            damaged_message(store.path, f"schema {version} without its documents table"),
            kind="damaged",
        )
    if version >= 3 and "vectors" not in tables:
        raise StoreError(
            damaged_message(store.path, f"schema {version} without its vectors table"),
            kind="damaged",
        )
    return version


def require_documents(store: TripleStore, action: str) -> None:
    """Document-id features need schema 2; only a read-only old store lacks it."""
    if store.schema_version < 2:
        raise StoreError(
            f"cannot {action} the triple store {store.path}: it is a schema "
            f"{store.schema_version} store open read-only, and document ids need schema "
            f"{SCHEMA_VERSION}; open it writable once (TripleStore(path) with write access "
            "to the file and its folder) to migrate it, or use a migrated copy"
        )


__all__ = ["check_schema", "create_schema", "known_version", "migrate", "require_documents"]
