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


# Dialogues for Tier UX's context breaks: sessions that stay on one page over several turns — most of them short
# elliptical follow-ups ("А их можно перенести?") that name nothing of the page — and then change topic. Each turn
# carries the answer the assistant gave (a sentence of the cited page, as a RAG answer would quote it) and the page
# it cited; a turn cites no page (None) where the wiki has none. The oracle of a break: the turn cites another page
# than the previous turn. (session, language, [(question, answer, subject or None)]).
DIALOGUES = [
    ("d1", "ru", [("Как получить доступ к VPN?", "Заявку на VPN подают через портал сервис-деска, форма «Удалённый "
                   "доступ»; её одобряет руководитель команды.", "vpn"),
                  ("А сколько ждать одобрения?", "Руководитель команды одобряет заявку на VPN за один рабочий день.",
                   "vpn"),
                  ("а через сколько он отключается?", "VPN отключается после двенадцати часов бездействия.", "vpn"),
                  ("Сколько дней отпуска в год?", "У каждого сотрудника двадцать восемь дней оплачиваемого отпуска в "
                   "год.", "vacation"),
                  ("А их можно перенести?", "Неиспользованные дни отпуска переносятся на следующий год, но не больше "
                   "десяти.", "vacation")]),
    ("d2", "en", [("How do I reset my password?", "Reset your password on the self-service page with your phone "
                   "number.", "password"),
                  ("And how often does it expire?", "Passwords expire every ninety days; the portal reminds you a "
                   "week ahead.", "password"),
                  ("What if I can't reach that page?", "If you forgot your password and cannot reach the self-service "
                   "page, call the service desk.", "password"),
                  ("How do I deploy a service to production?", "Merge to the main branch and the pipeline builds a "
                   "container image; production needs a manual approval in the release channel.", "deploy"),
                  ("Who approves it?", "A production deploy is approved manually in the release channel.", "deploy"),
                  ("And if the health checks fail?", "Roll the deploy back with the previous image tag.", "deploy")]),
    ("d3", "ru", [("Как вернуть деньги за такси?", "Такси для поездок по работе возмещается по чеку: загрузите чек в "
                   "авансовый отчёт в финансовом портале.", "expenses"),
                  ("В какой срок?", "Чеки загружают в авансовый отчёт в течение пяти дней.", "expenses"),
                  ("Что делать, если я заболел?", "Сообщите руководителю и откройте больничный лист у врача.", "sick"),
                  ("А справка нужна?", "Справка не нужна: электронный больничный приходит в HR автоматически.", "sick"),
                  ("Сколько за него платят?", "Больничный оплачивается по стажу: от шестидесяти до ста процентов.",
                   "sick")]),
    ("d4", "en", [("Where are the Grafana dashboards of my service?", "Every service has a Grafana dashboard in the "
                   "folder of its team.", "monitoring"),
                  ("How do I add an alert for latency?", "Alerts are rules in Alertmanager: add a latency rule to the "
                   "service's alert file.", "monitoring"),
                  ("Who is on call now?", "The on-call rota is in PagerDuty and changes every Monday.", "monitoring"),
                  ("What's the guest wifi password?", "The guest wifi password is printed at the office reception.",
                   "office"),
                  ("And where do I park?", "Parking is in the underground garage of the office; ask the reception "
                   "for a pass.", "office"),
                  ("Is there a canteen menu somewhere?", "I could not find a page about the canteen.", None)]),
    ("d5", "ru", [("Какой клиент VPN нужно установить?", "Установите клиент GlobalConnect и войдите под доменной "
                   "учётной записью.", "vpn"),
                  ("Под какой учёткой входить?", "В клиент VPN входят под доменной учётной записью.", "vpn"),
                  ("How do I book a meeting room?", "Book a meeting room in the calendar by inviting the room.",
                   "office"),
                  ("Как оформить отпуск?", "Заявление на отпуск оформляют в HR-портале не позднее чем за две "
                   "недели, согласует руководитель.", "vacation"),
                  ("За сколько недель?", "Отпуск оформляют не позднее чем за две недели.", "vacation")]),
    ("d6", "en", [("Does staging deploy automatically?", "Yes: after a merge to the main branch staging deploys "
                   "automatically.", "deploy"),
                  ("And production?", "Production needs a manual approval in the release channel.", "deploy"),
                  ("My password expired, what do I do?", "Reset your password on the self-service page with your "
                   "phone number.", "password"),
                  ("Is there a reminder before that?", "The portal reminds you a week before your password expires.",
                   "password")]),
    ("d7", "ru", [("Какие суточные в командировке?", "Суточные в командировке по России — семьсот рублей в день.",
                   "expenses"),
                  ("А за границей?", "На странице о расходах указаны только суточные по России.", "expenses"),
                  ("Кто дежурит на этой неделе?", "График дежурств — в PagerDuty, он меняется каждый понедельник.",
                   "monitoring"),
                  ("А когда пересменка?", "Дежурство в PagerDuty меняется каждый понедельник.", "monitoring")]),
    ("d8", "en", [("How is sick leave paid?", "Sick leave is paid by length of service: sixty to a hundred percent.",
                   "sick"),
                  ("Do I tell my manager?", "Yes: when you are sick, tell your manager and open a sick leave at the "
                   "doctor.", "sick"),
                  ("How many vacation days do I have?", "Every employee has twenty-eight days of paid vacation a "
                   "year.", "vacation"),
                  ("Who signs off on it?", "Your manager approves the vacation request in the HR portal.", "vacation"),
                  ("Where do I upload receipts?", "Upload receipts to the expense report in the finance portal within "
                   "five days.", "expenses")]),
    ("d9", "ru", [("Как откатить неудачный релиз?", "Релиз откатывают на предыдущий тег образа, если проверки "
                   "здоровья не прошли.", "deploy"),
                  ("А стейджинг сам выкатывается?", "Стейджинг деплоится автоматически после слияния в основную "
                   "ветку.", "deploy"),
                  ("Где забронировать переговорку?", "Переговорку бронируют в календаре, пригласив комнату на "
                   "встречу.", "office"),
                  ("А парковка есть?", "Парковка — в подземном гараже офиса, пропуск выдают на ресепшене.", "office"),
                  ("Как сбросить пароль?", "Пароль сбрасывают на странице самообслуживания по номеру телефона.",
                   "password")]),
]


def dialogue_rows() -> list[dict]:
    """DIALOGUES as question-log rows (turns a minute apart, sessions a day apart); ``subject`` (test-only) is the
    cited page's subject, None for a turn that cites no page."""
    rows = []
    for day, (sid, lang, turns) in enumerate(DIALOGUES, start=1):
        for n, (q, answer, subject) in enumerate(turns):
            rows.append({"id": f"{sid}-{n}", "session_id": sid, "user_id": f"u-{sid}", "question": q,
                         "answer": answer, "url": page_url(SUBJECT_PAGE[subject]) if subject else None, "score": 5,
                         "created_at": f"2026-04-{day:02d}T10:{n:02d}:00Z", "subject": subject, "language": lang})
    return rows


def dialogue_breaks() -> dict[str, float]:
    """The oracle, by hand from DIALOGUES: per non-first turn id, 1.0 when it cites another page than the previous
    turn, 0.0 when the same, NaN when either cites none."""
    out = {}
    for sid, _lang, turns in DIALOGUES:
        for n in range(1, len(turns)):
            a, b = turns[n - 1][2], turns[n][2]
            out[f"{sid}-{n}"] = float("nan") if a is None or b is None else float(a != b)
    return out
