"""Multi-model sweep: every (judge × generation) combination runs, lands in model_runs and on the index page."""

from __future__ import annotations

import json

import pytest

from llm_server import completion

pytestmark = pytest.mark.slow

JUDGE_SCORE = {"judge-a": 1.0, "judge-b": 0.25}
ANSWER = {"gen-x": "The answer from x.", "gen-y": "The answer from y."}


def _handler(req):
    if req["model"] in ANSWER:
        return completion(ANSWER[req["model"]])
    return completion(json.dumps({"score": JUDGE_SCORE[req["model"]], "explanation": "scripted"}))


@pytest.fixture
def llm_env(llm_server, monkeypatch):
    llm_server.set_handler(_handler)
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("RAGNB_LLM_API_KEY", "-".join(["sk", "sweep", "test"]))
    monkeypatch.setenv("RAGNB_LLM_CACHE_DIR", "off")
    return llm_server


def test_sweep_runs_every_combination(llm_env, tmp_path):
    from ragnb.runs.pages import model_run_table
    from ragnb.runs.runner import run_notebooks

    result = run_notebooks(
        ["tier0", "tier2"], {"max_questions": 3, "consistency_runs": 1, "n_boot": 50, "tier0.sample_size": 60},
        outputs=tmp_path, log=lambda *_: None, judge_models=["judge-a", "judge-b"], generation_models=["gen-x", "gen-y"],
    )
    assert result.failures == []
    record = result.record
    combos = [(m["judge_model"], m["generation_model"]) for m in record["model_runs"]]
    assert combos == [("judge-a", "gen-x"), ("judge-a", "gen-y"), ("judge-b", "gen-x"), ("judge-b", "gen-y")]
    for mr in record["model_runs"]:
        block = mr["tier_2_metrics"]
        assert mr["status"] == "ok" and block["generation_model"] == mr["generation_model"]
        # every judged metric of this combination came from its judge's scripted score
        assert block["judge_faithfulness"]["mean"] == pytest.approx(JUDGE_SCORE[mr["judge_model"]])
        assert block["judge_faithfulness"]["n"] == 3
        per_item = (result.run_dir / mr["folder"] / "tier2_generation.per_item.csv").read_text(encoding="utf-8")
        assert ANSWER[mr["generation_model"]] in per_item
    # tier0 takes no model: it ran once, in the run folder
    assert (result.run_dir / "tier0_embeddings.metrics.json").is_file()
    assert not list(result.run_dir.glob("models/*/tier0_embeddings.*"))
    # the top-level blocks and models are the first combination's
    assert record["judge_model"] == "judge-a" and record["generation_model"] == "gen-x"
    assert record["tier_2_metrics"]["judge_faithfulness"]["mean"] == pytest.approx(1.0)
    # generation requests: 3 questions × 4 combinations, each model asked only in its own combinations
    gen_requests = [r for r in llm_env.chat_requests if r.body["model"] in ANSWER]
    assert len(gen_requests) == 12
    table = model_run_table(record)
    assert table.shape[0] == 4
    assert table["Tier 2 (generation): judge_faithfulness"].tolist() == pytest.approx([1.0, 1.0, 0.25, 0.25])
    index = result.index_path.read_text(encoding="utf-8")
    assert "Model sweep" in index
    assert "models/judge-b__gen-y/tier2_generation.html" in index


def test_sweep_needs_an_endpoint_and_a_model_notebook(monkeypatch, tmp_path):
    from ragnb.runs.runner import run_notebooks

    for var in ("RAGNB_LLM_BASE_URL", "RAGNB_LLM_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="needs an OpenAI-compatible endpoint"):
        run_notebooks(["tier2"], {}, outputs=tmp_path, judge_models=["a"], log=lambda *_: None)
    with pytest.raises(ValueError, match="take judge_models or generation_model"):
        run_notebooks(["tier0"], {}, outputs=tmp_path, judge_models=["a"], log=lambda *_: None)
    with pytest.raises(ValueError, match="names a model twice"):
        run_notebooks(["tier2"], {}, outputs=tmp_path, generation_models=["a", "a"], log=lambda *_: None)
    assert not (tmp_path / "runs").exists()


def test_a_judge_only_notebook_runs_once_per_judge_model(llm_env, tmp_path):
    from ragnb.runs.runner import run_notebooks

    llm_env.models = ["judge-a", "judge-b", "gen-x", "gen-y"]
    result = run_notebooks(["tier_judge"], {"max_items": 4, "modes": "direct", "n_boot": 50}, outputs=tmp_path,
                           log=lambda *_: None, judge_models=["judge-a", "judge-b"],
                           generation_models=["gen-x", "gen-y"])
    assert result.failures == []
    ran = sorted(p.parent.name for p in result.run_dir.glob("models/*/tier_judge.metrics.json"))
    assert ran == ["judge-a__gen-x", "judge-b__gen-x"]  # once per judge model, not once per pair
    runs = result.record["model_runs"]
    assert len(runs) == 4
    for mr in runs:
        judge = mr["judge_model"]
        assert mr["reports"] == [f"models/{judge}__gen-x/tier_judge"]
        assert mr["tier_judge_metrics"]["avg_faithfulness"]["mean"] == pytest.approx(JUDGE_SCORE[judge])
    # 4 items × 2 passes per judge model, each asked once
    assert len(llm_env.chat_requests) == 2 * 4 * 2


def test_rerunning_a_run_id_retries_the_failed_items(llm_env, tmp_path):
    """The provider fails every judgement of the first run; re-running the run id (the notebook's metrics JSON
    exists) executes the notebook again because its item log holds failed items, and they are recovered."""
    from ragnb.runs.runner import run_notebooks

    llm_env.set_handler(lambda req: completion("The service is overloaded, try later."))
    params = {"max_items": 3, "modes": "direct", "n_boot": 50, "judge_models": "judge-a"}
    first = run_notebooks(["tier_judge"], params, outputs=tmp_path, log=lambda *_: None)
    metrics = json.loads((first.run_dir / "tier_judge.metrics.json").read_text(encoding="utf-8"))
    assert metrics["error_rate"] == 1.0

    llm_env.set_handler(_handler)  # the provider recovered
    lines = []
    again = run_notebooks(["tier_judge"], params, run_id=first.run_id, outputs=tmp_path, log=lines.append)
    assert any("6 failed item(s) in its item log: running it again" in x for x in lines)  # 3 items × 2 passes
    metrics = json.loads((again.run_dir / "tier_judge.metrics.json").read_text(encoding="utf-8"))
    assert metrics["error_rate"] == 0.0 and metrics["avg_faithfulness"]["mean"] == pytest.approx(1.0)
    assert any("6 item(s) that had failed were scored again — 6 of 6 recovered" in n for n in metrics["notes"])
    lines.clear()
    run_notebooks(["tier_judge"], params, run_id=first.run_id, outputs=tmp_path, log=lines.append)
    assert any("exists: skipping" in x for x in lines)  # nothing failed any more: not run again
