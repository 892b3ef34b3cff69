"""What reports call things: a question log by what it is (never its URL), the code version only when there is one."""

import pytest

from ragnb.runs.pages import index_html
from ragnb.runs.record import git_text

SECRET_URL = "postgresql://reader:s3cretpw@db.example.org:5433/prod?sslmode=require"


@pytest.fixture
def external_db():
    from ragnb.store.engine import connect

    db = connect(url=SECRET_URL)  # opens no connection: the engine connects on first use
    yield db
    db.dispose()


def test_question_log_label_names_the_log_not_its_url(external_db):
    from ragnb.store.questions import question_log_label

    assert question_log_label(external_db, 67) == "question log: 67 questions, database prod"
    assert question_log_label(external_db, 1, min_score=4) == "question log (score ≥ 4): 1 question, database prod"
    assert question_log_label(external_db) == "question log: database prod"
    for label in (question_log_label(external_db, 67), question_log_label(external_db, 0, 5)):
        for hidden in ("s3cretpw", "***", "reader", "db.example.org", "5433", "postgresql", "sslmode"):
            assert hidden not in label
    assert "s3cretpw" not in external_db.display_url  # where the URL does go (provenance): redacted


def test_corpus_header_names_the_database(external_db):
    from ragnb.datasets.corpus import Corpus

    class Encoder:
        name = "mini"

        def describe(self):
            return {"backend": "test", "dim": 4, "fingerprint": "f" * 16}

    info = Corpus(external_db, Encoder(), "database", {"verified": True}).header_info()
    assert info["database"] == "prod" and "db.example.org" not in str(info) and "s3cretpw" not in str(info)


def test_git_text_and_no_empty_git_line():
    assert git_text({"git_branch": "main", "git_commit_hash": "0123456789abcdef"}) == "main @ 0123456789ab"
    assert git_text({"git_branch": "HEAD", "git_commit_hash": "0123456789abcdef"}, width=10) == "HEAD @ 0123456789"
    assert git_text({"git_branch": None, "git_commit_hash": "0123456789abcdef"}) == "0123456789ab"
    assert git_text({"git_branch": None, "git_commit_hash": None}) is None and git_text({}) is None

    rec = {"id": "r1", "timestamp": "2025-01-01T00:00:00+00:00", "git_branch": None, "git_commit_hash": None,
           "run_author": "ada", "overall_status": "good", "executive_summary": "Status: GOOD"}
    page = index_html(".", rec, [])
    assert "<th>git</th>" not in page and "— @ —" not in page and "@ —" not in page
    assert "<tr><th>author</th><td>ada</td></tr>" in page
    inside = index_html(".", {**rec, "git_branch": "main", "git_commit_hash": "0123456789abcdef"}, [])
    assert "<tr><th>git</th><td>main @ 0123456789ab</td></tr>" in inside


def test_dashboard_runs_table_leaves_git_empty_outside_a_checkout():
    from ragnb.runs.dashboard import runs_table

    table = runs_table([{"id": "a", "git_branch": None, "git_commit_hash": None},
                        {"id": "b", "git_branch": "dev", "git_commit_hash": "fedcba9876543210"}])
    git = table.set_index("run_id")["git"]
    assert git["b"] == "dev @ fedcba9876" and git.isna()["a"]  # an empty cell, not "— @ —"


def test_compared_corpora_are_named_by_database_and_by_server_only_where_that_is_the_difference():
    from ragnb.runs.comparability import corpora_texts

    def prov(url, n):
        return {"corpora": [{"database": url, "n_chunks": n, "n_embedded": n, "chunks_md5": "f0b68623cc01aa",
                             "model": "e5"}]}

    here = "postgresql+psycopg://postgres:@/ragnb?host=/tmp/x/pgdata"
    there = "postgresql+psycopg://team@db.internal:5432/ragnb"
    a, b = corpora_texts(prov(here, 120), prov(here, 150))
    assert a == "database ragnb (120 chunks, 120 embedded, md5 f0b68623cc01, e5)" and "150 chunks" in b
    assert "postgresql" not in a + b
    # the same name and counts on two servers: only the server tells them apart, so it is shown
    a, b = corpora_texts(prov(here, 120), prov(there, 120))
    assert a.startswith(here) and b.startswith(there)
