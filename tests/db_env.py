"""The embedded database a test's notebooks and ``ragnb`` commands open by default (``RAGNB_EMBEDDED_DB``)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from itertools import count
from typing import Callable, Iterator

from click.testing import CliRunner, Result

_names = count()


@contextmanager
def default_embedded_db(name: str) -> Iterator[None]:
    """Within the block, ``name`` is the default embedded database (notebooks run in kernels inherit it)."""
    before = os.environ.get("RAGNB_EMBEDDED_DB")
    os.environ["RAGNB_EMBEDDED_DB"] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAGNB_EMBEDDED_DB", None)
        else:
            os.environ["RAGNB_EMBEDDED_DB"] = before


def cli_on_new_db(prefix: str) -> Callable[..., Result]:
    """``ragnb …`` invoked in-process against a new database of the session's embedded server."""
    from ragnb.cli.main import build_cli

    env = {"RAGNB_EMBEDDED_DB": f"{prefix}_{os.getpid()}_{next(_names)}"}
    runner = CliRunner()
    return lambda *args: runner.invoke(build_cli(), list(args), env=env, catch_exceptions=False)
