"""What every ``ragnb`` command shares: exit codes, errors as messages (never tracebacks), confirmation.

Exit codes (README, Command reference): 0 success; 1 a notebook failed (``run``) or run B is significantly
worse on a gated metric (``compare --fail-if-worse``); 2 usage or input error; 3 a graded metric needs attention
(``run --fail-on attention``); 4 the two runs are not comparable, so ``compare --fail-if-worse`` cannot decide.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click
import typer

EXIT_FAILED = 1  # a notebook failed / B significantly worse
EXIT_USAGE = 2
EXIT_ATTENTION = 3
EXIT_NOT_COMPARABLE = 4


def fail(message: Any, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with ``code``."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, indent=2, default=str))


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` unless ``yes``; stop (exit 1, nothing changed) on "no" or when nobody can answer."""
    if yes:
        return
    if not sys.stdin or not sys.stdin.isatty():
        fail(f"{question} — confirm with --yes (no terminal to ask on)")
    if not typer.confirm(question, default=False):
        typer.echo("nothing changed")
        raise typer.Exit(1)


class ClickCommand(click.Command):
    """A plain click command inside the typer tree that reports its own usage errors.

    typer's group only recognises its own exception classes, so a click ``UsageError`` (an unknown option,
    ``-p`` without a value) or ``--help``'s exit would surface as a traceback: here they print usage + message
    (``--help``: the help) and exit through typer with click's code (2 for usage errors, 0 for help)."""

    def make_context(self, info_name, args, parent=None, **extra):  # noqa: ANN001 - click's signature
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.Exit as exc:
            raise typer.Exit(exc.exit_code) from None
        except click.ClickException as exc:
            if isinstance(exc, click.UsageError) and exc.ctx is None:  # raised while parsing: show usage too
                exc.ctx = self.context_class(self, info_name=info_name, parent=parent)
            exc.show()
            raise typer.Exit(exc.exit_code) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit as exc:
            raise typer.Exit(exc.exit_code) from None
        except click.ClickException as exc:
            exc.show()
            raise typer.Exit(exc.exit_code) from None


def database_message(exc: BaseException) -> str | None:
    """A clear message for a database error (server down, read-only database, bad connection string),
    None for other exceptions. The URL is shown without its password."""
    import psycopg
    import sqlalchemy.exc as sa_exc

    from ragnb import config

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


def database_errors_as_messages(group: click.Group) -> None:
    """Make every command of ``group`` turn a database error, and a ``ValueError`` (ragnb's exception for bad
    input, whose text says what is wrong and how to fix it), into ``error: <message>`` (exit 2)."""
    import psycopg
    import sqlalchemy.exc as sa_exc

    invoke = group.invoke

    def guarded(ctx):  # noqa: ANN001, ANN202
        try:
            return invoke(ctx)
        except (sa_exc.SQLAlchemyError, psycopg.Error) as exc:
            message = database_message(exc)
            if message is None:
                raise
            fail(message)
        except ValueError as exc:
            fail(exc)

    group.invoke = guarded
