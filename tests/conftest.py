"""Test isolation: every test session gets its own embedded PostgreSQL and outputs folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="ragnb-test-"))
os.environ["RAGNB_HOME"] = str(_HOME)
os.environ["RAGNB_OUTPUTS"] = str(_HOME / "outputs")
os.environ.pop("RAGNB_DATABASE_URL", None)
os.environ.pop("RAGNB_SCHEMA_MAP", None)
os.environ.pop("RAGNB_EMBEDDED_DB", None)
os.environ["HF_HUB_OFFLINE"] = "1"

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def _embedded_server_lifecycle():
    yield
    from ragnb.store.engine import stop_embedded

    stop_embedded()
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def encoder():
    from ragnb.embeddings.models import get_encoder

    return get_encoder()


_counter = iter(range(10_000))


@pytest.fixture
def fresh_db():
    """A new empty database on the session's embedded server."""
    from ragnb.store.engine import connect

    name = f"t{os.getpid()}_{next(_counter)}"
    db = connect(database=name)
    yield db
    db.dispose()


from llm_server import llm_server  # noqa: F401,E402  (scripted OpenAI-compatible server for LLM tests)
from embeddings_server import embeddings_server  # noqa: F401,E402  (OpenAI-compatible /v1/embeddings for encoder tests)
from external_pg import external_pg  # noqa: F401,E402  (a separately installed PostgreSQL + pgvector over TCP with a password)
