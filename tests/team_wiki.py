"""A small team wiki made in the tests: Markdown pages loaded the way ``ragnb load chunks DIR`` loads them
(``FolderRows``: id ``page.md#n``, url = the relative path) and a question log whose urls point at its pages,
with multi-turn sessions. Chunks are 4 words, so each page has many. Below it, a bilingual wiki with subfolders,
YAML front matter and a log of real page URLs (``WIKI``, ``WIKI_LOG``: the --url-template tests)."""

from __future__ import annotations

import json
from pathlib import Path

PAGES = {
    "ops/vpn.md": "# VPN access\n\nRequest VPN access through the service desk form called Remote Access. "
                  "Approval comes from your team lead within one working day. Install the client named "
                  "GlobalConnect and sign in with your domain account. The VPN disconnects after twelve hours of "
                  "inactivity and must be restarted manually.",
    "hr/vacation.md": "# Vacation policy\n\nEvery employee has twenty eight days of paid vacation per year. "
                      "Submit the request in the HR portal at least two weeks ahead. Unused days carry over to the "
                      "next year up to a limit of ten days. Your manager approves the request.",
    "dev/deploy.md": "# Deploying a service\n\nMerge to the main branch and the pipeline builds a container "
                     "image. Staging deploys automatically, production needs a manual approval in the release "
                     "channel. Roll back with the previous image tag if health checks fail.",
}
# The deploy question is phrased like the vacation page (“request … approval … two weeks ahead”) so that
# retrieval ranks another page first while the logged page is dev/deploy.md.
QUESTION_LOG = [
    {"id": "s1-1", "session_id": "s1", "user_id": "u1", "question": "How do I request VPN access?",
     "answer": "Use the Remote Access form in the service desk.", "url": "ops/vpn.md", "score": 5},
    {"id": "s1-2", "session_id": "s1", "user_id": "u1", "question": "And which client do I install?",
     "answer": "GlobalConnect.", "url": "ops/vpn.md", "score": 4},
    {"id": "s2-1", "session_id": "s2", "user_id": "u2",
     "question": "Who approves my request and how many weeks ahead must I submit it?",
     "answer": "A manual approval in the release channel is needed for production.", "url": "dev/deploy.md",
     "score": 2},
    {"id": "s2-2", "session_id": "s2", "user_id": "u2", "question": "How many vacation days do I get?",
     "answer": "Twenty eight days a year.", "url": "hr/vacation.md", "score": 5},
    {"id": "s3-1", "session_id": "s3", "user_id": "u3", "question": "Where is the canteen menu?",
     "answer": "I could not find that.", "url": None, "score": 1},
    {"id": "s3-2", "session_id": "s3", "user_id": "u3", "question": "What is the office wifi password?",
     "answer": "I do not know.", "url": "it/wifi.md", "score": 1},  # a page the wiki does not have
]
CHUNK_SIZE, OVERLAP = 4, 0  # small: the VPN page has more than ten chunks (#10 sorts after #9)


def write_wiki(folder: Path, pages: dict[str, str] | None = None) -> Path:
    for rel, text in (PAGES if pages is None else pages).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


def write_log(path: Path, rows: list[dict] | None = None) -> Path:
    rows = QUESTION_LOG if rows is None else rows
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def load_wiki(db, tmp_path: Path, encoder) -> None:
    """Load the wiki and the log into ``db`` the way the CLI does, then embed both."""
    from ragnb.store.loaders import load_file
    from ragnb.store.vectors import embed_table

    load_file(db, "chunks", write_wiki(tmp_path / "wiki"), chunk_size=CHUNK_SIZE, overlap=OVERLAP)
    load_file(db, "questions", write_log(tmp_path / "log.jsonl"))
    embed_table(db, "chunks", encoder, progress=False)
    embed_table(db, "questions", encoder, progress=False)


def page_chunks(rel: str) -> list[str]:
    """The page's chunk texts in reading order (an independent re-chunking by whitespace words)."""
    words = PAGES[rel].split()
    return [" ".join(words[i:i + CHUNK_SIZE]) for i in range(0, len(words), CHUNK_SIZE - OVERLAP)]


# A bilingual wiki as teams keep it: subfolders per language and space, some pages with YAML front matter
# (url / title / id, plus keys ragnb ignores), the others named by --url-template. BASE is the wiki's address.
BASE = "https://wiki.example.com"
TEMPLATE = BASE + "/{path}"
WIKI = {
    "ru/ops/vpn.md": ("---\nurl: https://wiki.example.com/display/OPS/VPN\ntitle: Доступ к VPN\nid: ops-vpn\n"
                      "tags: [vpn, доступ]\n---\n# Доступ к VPN\n\nЗаявку на VPN подают через портал "
                      "сервис-деска, форма «Удалённый доступ». Одобряет руководитель команды за один рабочий день."),
    "ru/hr/отпуск.md": ("# Отпуск\n\nУ каждого сотрудника двадцать восемь дней оплачиваемого отпуска в год. "
                       "Заявление подают в HR-портале не позднее чем за две недели."),
    "en/dev/deploy.md": ("---\ntitle: Deploying a service\nowner: platform team\n---\n# Deploying a service\n\n"
                         "Merge to the main branch and the pipeline builds a container image. Production needs "
                         "a manual approval in the release channel."),
    "en/dev/rollback.markdown": "# Rollback\n\nRoll back with the previous image tag if health checks fail.",
}
WIKI_CHUNK_SIZE = 8
# page → (chunk id prefix, expected url after --url-template TEMPLATE)
WIKI_EXPECTED = {
    "ru/ops/vpn.md": ("ops-vpn", "https://wiki.example.com/display/OPS/VPN"),  # front matter wins
    "ru/hr/отпуск.md": ("ru/hr/отпуск.md", "https://wiki.example.com/ru/hr/%D0%BE%D1%82%D0%BF%D1%83%D1%81%D0%BA"),
    "en/dev/deploy.md": ("en/dev/deploy.md", "https://wiki.example.com/en/dev/deploy"),
    "en/dev/rollback.markdown": ("en/dev/rollback.markdown", "https://wiki.example.com/en/dev/rollback"),
}
# The log records the URLs users saw in the browser: other scheme, www., anchors, trailing slashes, Cyrillic.
WIKI_LOG = [
    {"id": "w1", "question": "Как получить доступ к VPN?", "url": "https://wiki.example.com/display/OPS/VPN#форма",
     "score": 5},
    {"id": "w2", "question": "Сколько дней отпуска?", "url": "http://www.wiki.example.com/ru/hr/отпуск/", "score": 4},
    {"id": "w3", "question": "How do I deploy?", "url": "https://wiki.example.com/en/dev/deploy", "score": 5},
    {"id": "w4", "question": "How do I roll back?", "url": "https://WIKI.example.com/en/dev/rollback#steps",
     "score": 3},
    {"id": "w5", "question": "Где меню столовой?", "url": "https://wiki.example.com/ru/canteen", "score": 1},
    {"id": "w6", "question": "What is the wifi password?", "url": None, "score": 1},
]


def write_bilingual_wiki(folder: Path) -> Path:
    return write_wiki(folder, WIKI)


def write_wiki_log(path: Path) -> Path:
    return write_log(path, WIKI_LOG)


def wiki_body(rel: str) -> str:
    """The page's text without its front matter (cut here by hand: everything after the closing '---')."""
    text = WIKI[rel]
    return text.split("\n---\n", 1)[1] if text.startswith("---\n") else text


# Tier UX on the bilingual wiki: a question log whose questions cite its pages (in the forms users copy from the
# browser), in sessions, with near-duplicates citing the same page (good cache hits) and look-alike questions
# citing other pages (a cache would serve them the wrong answer). PAGE is each row's page as a plain label, so
# tests can judge a match without ragnb's URL normalisation. With multilingual-e5-small most questions have a
# cached neighbour above 0.85, many of them on another page.
_VPN, _VAC = BASE + "/display/OPS/VPN", BASE + "/ru/hr/отпуск"
_DEPLOY, _ROLLBACK = BASE + "/en/dev/deploy", BASE + "/en/dev/rollback"
_PWD, _RESTORE = BASE + "/it/password", BASE + "/data/restore-table"
UX_LOG_ROWS = [  # id, session, question, cited url, user score, page label
    ("u01", "a", "How do I reset my password?", _PWD, 5, "pwd"),
    ("u02", "a", "And how do I request VPN access?", _VPN + "#форма", 5, "vpn"),
    ("u03", "a", "Which VPN client do I install?", _VPN, 4, "vpn"),
    ("u04", "b", "How can I reset my password?", _PWD + "/", 3, "pwd"),
    ("u05", "c", "How do I restore a deleted table?", _RESTORE, 2, "restore"),
    ("u06", "c", "Can a dropped table be recovered from backup?", _RESTORE, 5, "restore"),
    ("u07", "d", "Как получить доступ к VPN?", "http://www.wiki.example.com/display/OPS/VPN", 5, "vpn"),
    ("u08", "d", "Как мне получить доступ к VPN?", _VPN, 4, "vpn"),
    ("u09", "e", "Сколько дней отпуска в год?", _VAC, 5, "vacation"),
    ("u10", "e", "Сколько дней отпуска мне положено?", _VAC + "/", 4, "vacation"),
    ("u11", "e", "Как подать заявку на отпуск?", _VAC, 3, "vacation"),
    ("u12", "f", "How do I deploy a service?", _DEPLOY, 5, "deploy"),
    ("u13", "f", "How do I deploy my service to production?", _DEPLOY, 4, "deploy"),
    ("u14", "f", "How do I roll back a release?", _ROLLBACK + "#steps", 5, "rollback"),
    ("u15", "g", "How to roll back a failed deployment?", "https://WIKI.example.com/en/dev/rollback", 3, "rollback"),
    ("u16", "h", "How do I request a new laptop?", BASE + "/it/laptop", 2, "laptop"),
    ("u17", "i", "Where can I find the deploy logs?", BASE + "/en/dev/logs", 4, "logs"),
    ("u18", "j", "I forgot my password, how do I reset it?", _PWD, 4, "pwd"),
    ("u19", "k", "Where is the canteen menu?", None, 1, None),
    ("u20", "l", "Где меню столовой?", None, 5, None),
    ("u21", "m", "Как подать заявку на VPN?", _VPN, 3, "vpn"),
    ("u22", "n", "How do I delete a service?", BASE + "/en/dev/decommission", 2, "decommission"),
]
UX_PAGE = {r[0]: r[5] for r in UX_LOG_ROWS}


def ux_log() -> list[dict]:
    """UX_LOG_ROWS as question-log rows (one minute apart, in id order) for ``insert_rows(db, "questions", …)``."""
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
    return [{"id": i, "session_id": s, "question": q, "url": url, "score": score, "answer": "See the wiki.",
             "user_id": f"user-{s}", "created_at": t0 + timedelta(minutes=n)}
            for n, (i, s, q, url, score, _page) in enumerate(UX_LOG_ROWS)]
