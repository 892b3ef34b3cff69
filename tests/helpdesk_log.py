"""A bilingual (Russian/English) help-desk wiki and question log made in the tests, for topics and knowledge gaps:
eight subjects, each asked three ways in each language (``SUBJECT_QUESTIONS``), in sessions with user scores,
timestamps and the URL of the page the answer cited; follow-up turns; and five real gaps — questions about pages
the wiki does not have (no cited page, or a cited URL that matches no page). The wiki's pages carry their URL in
YAML front matter, as ``ragnb load chunks DIR`` reads them (the format of team_wiki.WIKI)."""

from __future__ import annotations

import json
from pathlib import Path

BASE = "https://wiki.example.com/display"
PAGES = {
    "ru/vpn.md": ("OPS/VPN", "# Доступ к VPN\n\nЗаявку на VPN подают через портал сервис-деска, форма «Удалённый "
                  "доступ». Одобряет руководитель команды за один рабочий день. Установите клиент GlobalConnect и "
                  "войдите под доменной учётной записью. VPN отключается после двенадцати часов бездействия."),
    "ru/vacation.md": ("HR/Vacation", "# Отпуск\n\nУ каждого сотрудника двадцать восемь дней оплачиваемого отпуска в "
                       "год. Заявление оформляют в HR-портале не позднее чем за две недели, согласует руководитель. "
                       "Неиспользованные дни переносятся на следующий год, но не больше десяти."),
    "en/deploy.md": ("DEV/Deploy", "# Deploying a service\n\nMerge to the main branch and the pipeline builds a "
                     "container image. Staging deploys automatically; production needs a manual approval in the "
                     "release channel. Roll back with the previous image tag if health checks fail."),
    "en/password.md": ("IT/Password", "# Passwords\n\nReset your password on the self-service page with your phone "
                       "number. Passwords expire every ninety days; the portal reminds you a week ahead. If you "
                       "forgot it and cannot reach the page, call the service desk."),
    "ru/expenses.md": ("FIN/Expenses", "# Расходы и командировки\n\nЧеки загружают в авансовый отчёт в финансовом "
                       "портале в течение пяти дней. Такси возмещается по чеку для поездок по работе. Суточные в "
                       "командировке по России — семьсот рублей в день."),
    "ru/sick.md": ("HR/Sick", "# Больничный\n\nЕсли вы заболели, сообщите руководителю и откройте больничный лист у "
                   "врача. Электронный больничный приходит в HR автоматически, справка не нужна. Больничный "
                   "оплачивается по стажу: от шестидесяти до ста процентов."),
    "en/monitoring.md": ("OPS/Monitoring", "# Monitoring\n\nEvery service has a Grafana dashboard in the folder of "
                         "its team. Alerts are rules in Alertmanager: add a latency rule to the service's alert "
                         "file. The on-call rota is in PagerDuty and changes every Monday."),
    "en/office.md": ("OFFICE/Guide", "# Office guide\n\nThe guest wifi password is printed at the reception. Book "
                     "meeting rooms in the calendar by inviting the room. Parking is in the underground garage; "
                     "ask the reception for a pass."),
}
SUBJECT_PAGE = {"vpn": "ru/vpn.md", "vacation": "ru/vacation.md", "deploy": "en/deploy.md",
                "password": "en/password.md", "expenses": "ru/expenses.md", "sick": "ru/sick.md",
                "monitoring": "en/monitoring.md", "office": "en/office.md"}
# subject → (English questions, the same asked in Russian)
SUBJECT_QUESTIONS = {
    "vpn": (["How do I request VPN access?", "Which VPN client should I install?",
             "The VPN drops after a few hours, why?"],
            ["Как получить доступ к VPN?", "Какой клиент VPN нужно установить?",
             "Почему VPN отключается через несколько часов?"]),
    "vacation": (["How many vacation days do I get per year?", "How do I book a vacation in the HR portal?",
                  "Do unused vacation days carry over?"],
                 ["Сколько дней отпуска в год?", "Как оформить отпуск в HR-портале?",
                  "Переносятся ли неиспользованные дни отпуска?"]),
    "deploy": (["How do I deploy a service to production?", "How do I roll back a failed release?",
                "Does staging deploy automatically?"],
               ["Как выкатить сервис в продакшен?", "Как откатить неудачный релиз?",
                "Стейджинг деплоится автоматически?"]),
    "password": (["How do I reset my password?", "My password expired, what should I do?",
                  "How often must I change my password?"],
                 ["Как сбросить пароль?", "Срок действия пароля истёк, что делать?", "Как часто нужно менять пароль?"]),
    "expenses": (["How do I get reimbursed for a taxi?", "Where do I upload receipts for expenses?",
                  "What is the daily allowance on business trips?"],
                 ["Как вернуть деньги за такси?", "Куда загружать чеки для авансового отчёта?",
                  "Какие суточные в командировке?"]),
    "sick": (["What do I do when I am sick?", "Do I need a doctor's note for sick leave?", "How is sick leave paid?"],
             ["Что делать, если я заболел?", "Нужна ли справка от врача для больничного?",
              "Как оплачивается больничный?"]),
    "monitoring": (["Where are the service dashboards in Grafana?", "How do I set up an alert for high latency?",
                    "Who is on call this week?"],
                   ["Где дашборды сервиса в Grafana?", "Как настроить алерт на высокую задержку?",
                    "Кто дежурит на этой неделе?"]),
    "office": (["What is the office wifi password?", "How do I book a meeting room?",
                "Where can I park my car at the office?"],
               ["Какой пароль от офисного wifi?", "Как забронировать переговорку?", "Где припарковать машину у офиса?"]),
}
# Scores that differ from 5 for subject questions (answer judged poor by the user although the page exists).
LOW_SCORED = {("deploy", "en", 1): 2, ("password", "ru", 1): 1, ("office", "en", 2): 3}
# Turns inserted into a subject session: (subject, language, the turn they follow, question, score) — the first
# three follow a turn scored 5, the last one follows a turn scored 2 (so it is not excused on similarity).
FOLLOW_UPS = [("vpn", "en", 0, "And how long does that take?", 5),
              ("vacation", "ru", 0, "А их можно перенести?", 5),
              ("sick", "en", 0, "Is it paid in full?", 4),
              ("deploy", "en", 1, "And where do I find it?", None)]
# Real gaps: the wiki has no page for them. (id, question, cited url or None, score, language)
GAPS = [("g1", "Где меню столовой на эту неделю?", f"{BASE}/OFFICE/Canteen", 1, "ru"),
        ("g2", "How do I order a new laptop?", None, 2, "en"),
        ("g3", "Как оформить налоговый вычет за обучение?", None, 1, "ru"),
        ("g4", "What is the policy number of the travel insurance?", f"{BASE}/HR/Insurance", 3, "en"),
        ("g5", "Where is the API style guide for public endpoints?", None, None, "en")]


def page_url(rel: str) -> str:
    return f"{BASE}/{PAGES[rel][0]}"


def write_wiki(folder: Path) -> Path:
    for rel, (key, body) in PAGES.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\nurl: {page_url(rel)}\ntitle: {body.splitlines()[0][2:]}\n---\n{body}", encoding="utf-8")
    return folder


def subject_rows() -> list[dict]:
    """The 48 subject questions as log rows: one session per (subject, language), three turns a minute apart."""
    rows, day = [], 0
    for subject, by_lang in SUBJECT_QUESTIONS.items():
        for lang, questions in zip(("en", "ru"), by_lang):
            day += 1
            for turn, q in enumerate(questions):
                rows.append({"id": f"{subject}-{lang}-{turn}", "session_id": f"{subject}-{lang}",
                             "user_id": f"u-{subject}-{lang}", "question": q, "answer": "…",
                             "url": page_url(SUBJECT_PAGE[subject]),
                             "score": LOW_SCORED.get((subject, lang, turn), 5),
                             "created_at": f"2026-03-{day:02d}T10:0{turn}:00Z", "subject": subject, "language": lang})
    return rows


def log_rows() -> list[dict]:
    """Subject questions, follow-up turns (after the session's first turn) and the five gaps, each in its own
    session. ``subject`` is "gap" for the gaps; ``follow_up`` marks the appended turns."""
    rows = subject_rows()
    for subject, lang, after, q, score in FOLLOW_UPS:
        # half a minute after the turn it follows, so it sorts before the session's next turn
        prev = next(r for r in rows if r["id"] == f"{subject}-{lang}-{after}")
        rows.append({**prev, "id": f"{subject}-{lang}-f", "question": q, "score": score,
                     "created_at": prev["created_at"].replace(":00Z", ":30Z"), "follow_up": True})
    for gid, q, url, score, lang in GAPS:
        rows.append({"id": gid, "session_id": f"s-{gid}", "user_id": "u-gap", "question": q, "answer": "…",
                     "url": url, "score": score, "created_at": "2026-03-20T12:00:00Z", "subject": "gap",
                     "language": lang})
    return rows


def write_log(path: Path, rows: list[dict] | None = None) -> Path:
    """The log as JSONL with the columns ``ragnb load questions`` reads (test-only keys left out)."""
    keep = ("id", "session_id", "user_id", "question", "answer", "url", "score", "created_at")
    rows = log_rows() if rows is None else rows
    path.write_text("".join(json.dumps({k: r[k] for k in keep}, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path
