"""What every ``ragnb`` command shares: exit codes, errors as messages (never tracebacks), confirmation.

Exit codes (docs/commands.md): 0 success; 1 a notebook failed (``run``; a full disk too) or run B is
significantly worse on a gated metric, or a run cannot report one (``compare --fail-if-worse``); 2 usage or input
error; 3 a graded metric needs attention (``run --fail-on attention``); 4 the two runs are not comparable, so
``compare --fail-if-worse`` cannot decide.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click
import typer

EXIT_FAILED = 1  # a notebook failed / B significantly worse / a gated metric missing from a run
EXIT_USAGE = 2
EXIT_ATTENTION = 3
EXIT_NOT_COMPARABLE = 4


def fail(message: Any, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with ``code``."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def print_json(obj: Any) -> None:
    """``obj`` as strict JSON: NaN/±inf are null (never the non-standard bare ``NaN``), other objects as text."""
    from ragnb.io import dumps_strict

    typer.echo(dumps_strict(obj, default=str))


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


def database_errors_as_messages(group: click.Group) -> None:
    """Make every command of ``group`` turn a database error, and a ``ValueError`` (ragnb's exception for bad
    input, whose text says what is wrong and how to fix it), into ``error: <message>`` (exit 2)."""
    import psycopg
    import sqlalchemy.exc as sa_exc

    from ragnb.store.engine import describe_database_error

    invoke = group.invoke

    def guarded(ctx):  # noqa: ANN001, ANN202
        try:
            return invoke(ctx)
        except (sa_exc.SQLAlchemyError, psycopg.Error) as exc:
            message = describe_database_error(exc)
            if message is None:
                raise
            fail(message)
        except ValueError as exc:
            fail(exc)

    group.invoke = guarded
