"""Which modules each notebook imported the last time it ran — what its next kernel imports ahead.

When a notebook has run in a kernel the runner started (:mod:`ragnb.runs.prestart`), the runner asks that
kernel for ``sys.modules`` (a silent request with a user expression: no execution count, nothing in the
notebook) and keeps the names, in import order, in ``$RAGNB_HOME/kernel_imports/<notebook stem>.json``. The
next run's kernel for that notebook imports them while the notebook before it runs. The list is a speed hint
only: a missing, stale or unreadable file means the report stack alone is imported ahead, and a module that no
longer imports is left for the notebook to import (or report) itself.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from ragnb import config
from ragnb.io import atomic_write_text

FOLDER = "kernel_imports"
_QUERY = "__import__('json').dumps(list(__import__('sys').modules))"
_REPLY_TIMEOUT_S = 5.0


def imports_file(stem: str) -> Path:
    return config.ragnb_home() / FOLDER / f"{stem}.json"


def load(stem: str) -> list[str]:
    """The modules notebook ``stem`` imported the last time it ran ([] when unknown)."""
    try:
        names = json.loads(imports_file(stem).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def worth_keeping(names: list[str], skip: tuple[str, ...]) -> list[str]:
    """Public module names (importing a package imports its private parts), without ``skip``'s packages."""
    return [n for n in names if n != "__main__" and not any(part.startswith("_") for part in n.split("."))
            and n.partition(".")[0] not in skip]


def record(km: Any, stem: str) -> None:
    """Ask the kernel of a finished notebook what it imported and keep it for ``stem`` (best effort: a kernel
    that died or does not answer leaves the earlier list)."""
    from ragnb.runs.prestart import NOT_AHEAD, _wait, own_client

    try:
        kc = own_client(km)
        kc.start_channels()
        msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"modules": _QUERY})
        reply = _wait(kc.get_shell_msg(timeout=_REPLY_TIMEOUT_S))
        while reply.get("parent_header", {}).get("msg_id") != msg_id:
            reply = _wait(kc.get_shell_msg(timeout=_REPLY_TIMEOUT_S))
        value = reply["content"]["user_expressions"]["modules"]
        names = json.loads(ast.literal_eval(value["data"]["text/plain"]))
    except Exception:
        return
    atomic_write_text(imports_file(stem), json.dumps(worth_keeping(names, NOT_AHEAD)) + "\n")
