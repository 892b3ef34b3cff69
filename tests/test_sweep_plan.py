"""Sweep planning (each notebook once per combination of the models it takes) and the model-id check
against the endpoint's /v1/models — fast, without executing notebooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragnb.llm import LLMSettings
from ragnb.llm.model_check import available_models, check_models
from ragnb.runs.params import Notebook
from ragnb.runs.sweep import model_combos, plan_sweep


def nb(stem):
    return Notebook(stem, stem, Path(f"{stem}.ipynb"))


DECLARED = {"tier2_generation": {"judge_models", "generation_model", "top_k"},
            "tier_judge": {"judge_models", "modes"},
            "gen_only": {"generation_model"}}


def test_a_judge_only_notebook_runs_once_per_judge_model():
    combos = model_combos(["ja", "jb"], ["gx", "gy", "gz"])
    steps = plan_sweep(combos, [nb("tier2_generation"), nb("tier_judge"), nb("gen_only")], DECLARED)
    runs = [(s.folder, n.stem, extra) for s in steps for n, extra in s.run]
    by_stem = {stem: [(f, e) for f, st, e in runs if st == stem] for stem in DECLARED}
    assert len(by_stem["tier2_generation"]) == 6  # every (judge × generation) pair
    assert [e for _, e in by_stem["tier_judge"]] == [{"judge_models": "ja"}, {"judge_models": "jb"}]
    assert [e for _, e in by_stem["gen_only"]] == [{"generation_model": g} for g in ("gx", "gy", "gz")]
    # every combination still reports every notebook: the runs it shares point at the first one
    ja_gy = steps[1]
    assert (ja_gy.judge, ja_gy.generation) == ("ja", "gy")
    assert ja_gy.reuse == {"tier_judge": "models/ja__gx"}
    assert steps[4].reuse == {"tier_judge": "models/jb__gx", "gen_only": "models/ja__gy"}
    assert sum(len(s.run) + len(s.reuse) for s in steps) == 6 * 3


def settings(server, **kw):
    return LLMSettings(base_url=server.base_url, api_key="sk-x", cache_dir=None, **kw)


def test_model_ids_are_checked_against_the_endpoint(llm_server):
    assert available_models(settings(llm_server)) is None  # no /v1/models: nothing to check
    assert check_models(settings(llm_server), ["anything"]) is None
    llm_server.models = ["openai/gpt-4o-mini", "anthropic/claude-3.5-sonnet"]
    assert check_models(settings(llm_server), ["openai/gpt-4o-mini"]) == llm_server.models
    with pytest.raises(ValueError, match=r"'openai/gpt4o-mini' \(did you mean 'openai/gpt-4o-mini'\?\).*lists 2"):
        check_models(settings(llm_server), ["openai/gpt4o-mini", "anthropic/claude-3.5-sonnet"])


def test_unreachable_endpoint_is_a_clear_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ValueError, match="cannot be reached"):
        available_models(LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", cache_dir=None, timeout_s=2))


def test_a_sweep_with_an_unknown_model_stops_before_any_work(llm_server, monkeypatch, tmp_path):
    from ragnb.runs.runner import run_notebooks

    llm_server.models = ["judge-a"]
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("RAGNB_LLM_API_KEY", "sk-test")
    with pytest.raises(ValueError, match="'judge-x'"):
        run_notebooks(["tier_judge"], {}, outputs=tmp_path, judge_models=["judge-a", "judge-x"], log=lambda *_: None)
    assert not (tmp_path / "runs").exists() and llm_server.chat_requests == []
