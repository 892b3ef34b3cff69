"""A separately installed PostgreSQL server with pgvector, as a team's production database is: another major
version than the embedded one, reached over loopback TCP with a password (SCRAM), no trust anywhere.

    def test_x(external_pg):
        url = external_pg.new_database("prod")   # postgresql+psycopg://team:PASSWORD@127.0.0.1:PORT/prod

The server comes from the OS packages (``scripts/install_postgres.sh``, run by ``make test``); where its binaries
or its pgvector are missing the tests that use it are skipped with the reason. ``RAGNB_TEST_PG_BIN`` names
another server's ``bin/`` folder. initdb and postgres refuse to run as root: as root the server runs as the
``postgres`` system user. Started once per test session on a free port, stopped and deleted at its end.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

USER, PASSWORD = "team", "Ext3rnal-pg-pw"  # the password is distinctive, so a search of the outputs finds a leak
_ADMIN_PASSWORD = "Adm1n-ext-pg-pw"
_BINARIES = ("initdb", "pg_ctl", "postgres")


@dataclass
class ExternalServer:
    port: int
    server_version: str  # SHOW server_version
    vector_version: str  # pgvector's extversion, as CREATE EXTENSION installed it

    def _admin(self, database: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", password=_ADMIN_PASSWORD,
                               dbname=database, autocommit=True)

    def url(self, database: str, password: str = PASSWORD) -> str:
        """What a user puts in RAGNB_DATABASE_URL (the driver named, as ragnb's own URLs are)."""
        return f"postgresql+psycopg://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def new_database(self, name: str) -> str:
        """An empty database owned by the test role, with pgvector installed as a database administrator would
        (CREATE EXTENSION needs a superuser); its URL."""
        with self._admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(USER)))
        with self._admin(name) as conn:
            conn.execute("CREATE EXTENSION vector")
        return self.url(name)

    def snapshot(self, database: str) -> dict[str, str]:
        """Every table of ``database`` (outside the system schemas) → an md5 of all its rows, plus its indexes
        and extensions: equal snapshots mean nothing was written, whatever tables ragnb keeps there."""
        out: dict[str, str] = {}
        with self._admin(database) as conn:
            names = conn.execute("SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN "
                                 "('pg_catalog', 'information_schema') ORDER BY 1, 2").fetchall()
            for schema, table in names:
                digest = conn.execute(sql.SQL("SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, '|' "
                                              "ORDER BY t::text)), '') FROM {}.{} t").format(
                    sql.Identifier(schema), sql.Identifier(table))).fetchone()[0]
                out[f"table {schema}.{table}"] = digest
            for (index,) in conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname NOT IN "
                                         "('pg_catalog', 'information_schema')").fetchall():
                out[f"index {index}"] = ""
            for name, version in conn.execute("SELECT extname, extversion FROM pg_extension").fetchall():
                out[f"extension {name}"] = version
        return out


def _bin_dirs() -> list[Path]:
    """Candidate servers, newest major first: RAGNB_TEST_PG_BIN alone if set, else Debian/Ubuntu's
    /usr/lib/postgresql/*/bin and the bin/ of a pg_config on PATH."""
    if os.environ.get("RAGNB_TEST_PG_BIN"):
        return [Path(os.environ["RAGNB_TEST_PG_BIN"])]
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(re.sub(r"\D", "", p) or 0),
                   reverse=True)
    if shutil.which("pg_config"):
        res = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        found += [res.stdout.strip()] if res.returncode == 0 else []
    return [Path(p) for p in dict.fromkeys(found)]


def _share_dir(bin_dir: Path) -> Path | None:
    pg_config = bin_dir / "pg_config"
    if not pg_config.exists():
        return None
    res = subprocess.run([str(pg_config), "--sharedir"], capture_output=True, text=True)
    return Path(res.stdout.strip()) if res.returncode == 0 else None


def find_server() -> tuple[Path | None, str]:
    """The bin/ folder of an installed server whose pgvector is installed too, or None and why not."""
    why = ("no PostgreSQL server installed (no /usr/lib/postgresql/*/bin, no pg_config on PATH): run "
           "scripts/install_postgres.sh as root, or set RAGNB_TEST_PG_BIN")
    for bin_dir in _bin_dirs():
        missing = [b for b in _BINARIES if not (bin_dir / b).exists()]
        if missing:
            why = f"no {', '.join(missing)} in {bin_dir}"
            continue
        share = _share_dir(bin_dir)
        if share is None or not (share / "extension" / "vector.control").exists():
            why = (f"pgvector is not installed for the server in {bin_dir} (no "
                   f"{share or '<sharedir>'}/extension/vector.control): run scripts/install_postgres.sh as root")
            continue
        return bin_dir, ""
    return None, why


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> tuple[list[str], str | None]:
    """The command prefix that runs initdb/postgres as a user they accept, and that user (None: this one)."""
    if os.geteuid() != 0:
        return [], None
    if not shutil.which("runuser"):
        pytest.skip("running as root, and no runuser to start PostgreSQL as the 'postgres' user")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root, and no 'postgres' system user to run the PostgreSQL server as")
    return ["runuser", "-u", "postgres", "--"], "postgres"


def _run(cmd: list[str], what: str) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{what} failed ({res.returncode}): {res.stdout[-2000:]}{res.stderr[-2000:]}")


def _configure(data: Path, port: int) -> None:
    """Loopback TCP only (no Unix socket: every test connection goes over TCP), SCRAM passwords, no trust."""
    with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
        conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = ''\n"
                   "password_encryption = 'scram-sha-256'\n"
                   "fsync = off  # a test server: durability is not what is tested\n")
    (data / "pg_hba.conf").write_text("host all all 127.0.0.1/32 scram-sha-256\n", encoding="utf-8")


@pytest.fixture(scope="session")
def external_pg():
    """The session's external PostgreSQL server (see the module's docstring); skipped where it cannot be had."""
    bin_dir, why = find_server()
    if bin_dir is None:
        pytest.skip(why)
    prefix, owner = _as_server_user()
    base = Path(tempfile.mkdtemp(prefix="ragnb-extpg-"))
    base.chmod(0o711)  # the server user must reach its folder inside
    home = base / "pg"
    home.mkdir()
    (home / "pw").write_text(_ADMIN_PASSWORD + "\n", encoding="utf-8")
    if owner:
        shutil.chown(home, owner)
        shutil.chown(home / "pw", owner)
    data, log, port = home / "data", home / "server.log", _free_port()
    pg_ctl = [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data)]
    try:
        _run([*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", f"--pwfile={home / 'pw'}",
              "--auth=scram-sha-256", "-E", "UTF8", "--locale=C"], "initdb")
        _configure(data, port)
        _run([*pg_ctl, "-l", str(log), "-w", "-t", "120", "start"], f"starting PostgreSQL on port {port}")
        server = ExternalServer(port, "", "")
        with server._admin() as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(USER),
                                                                             sql.Literal(PASSWORD)))
            server.server_version = conn.execute("SHOW server_version").fetchone()[0]
        server.new_database("ragnb_version_probe")
        with server._admin("ragnb_version_probe") as conn:
            server.vector_version = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        yield server
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
