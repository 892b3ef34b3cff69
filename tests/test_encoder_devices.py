"""Where a local encoder runs and in which precision: the device rules as pure functions of what torch reports
(so CUDA and MPS cases are checked on any machine), the real CPU path bit-identical to plain sentence-transformers,
fingerprints that change only with the vectors, and a device that is not there refused by ``ragnb embed``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import team_wiki
from db_env import cli_on_new_db
from ragnb.config import parse_device, parse_dtype
from ragnb.datasets.corpus import encoder_text
from ragnb.io import iter_json_records
from ragnb.embeddings.models import Encoder, get_encoder, resolve_model
from ragnb.embeddings.base import digest
from ragnb.embeddings.devices import batch_size_for, check_dtype, present_devices, resolve_device
from ragnb.embeddings.sentence_transformers import SentenceTransformerEncoder, directory_content_id

from test_encoders import REPO, XQUAD


@pytest.fixture(autouse=True)
def _own_cache_and_no_device_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "emb_cache"))
    monkeypatch.delenv("RAGNB_EMBEDDING_DEVICE", raising=False)
    monkeypatch.delenv("RAGNB_EMBEDDING_DTYPE", raising=False)


def _texts() -> list[str]:
    """Russian paragraphs of XQuAD-ru (long, Cyrillic) and the Markdown pages of the team wiki."""
    paragraphs = [d["text"] for _, d in iter_json_records(XQUAD / "corpus.jsonl.gz")][:30]
    return paragraphs + list(team_wiki.PAGES.values()) + ["Сколько ножек у стола?", "VPN"]


# -- the rules, over what torch reports --------------------------------------------------------------------


@pytest.mark.parametrize(("requested", "cuda", "mps", "device"), [
    (None, 0, False, "cpu"),        # nothing else present
    (None, 2, True, "cuda:0"),      # CUDA first
    (None, 0, True, "mps"),         # then Apple MPS
    ("cpu", 2, True, "cpu"),        # asked for: the CPU even beside GPUs
    ("cuda", 2, False, "cuda:0"),   # "cuda" is the first GPU
    ("cuda:1", 2, False, "cuda:1"),
    ("mps", 0, True, "mps"),
])
def test_best_or_named_device(requested, cuda, mps, device):
    assert resolve_device(requested, cuda, mps) == device


def test_a_device_that_is_not_there_is_an_error_naming_the_variable_and_what_is_present():
    with pytest.raises(ValueError) as err:
        resolve_device("cuda", 0, False)
    assert str(err.value) == ("RAGNB_EMBEDDING_DEVICE=cuda asks for a CUDA GPU, but torch finds none here (present: "
                              "cpu); unset RAGNB_EMBEDDING_DEVICE to use the best device present, or set it to cpu")
    with pytest.raises(ValueError) as err:
        resolve_device("cuda:2", 2, True)
    assert str(err.value) == ("RAGNB_EMBEDDING_DEVICE=cuda:2 asks for CUDA GPU 2, but torch finds 2 (present: "
                              "cpu, cuda:0, cuda:1, mps); name one of them")
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_DEVICE=mps asks for Apple's Metal GPU, but torch finds "
                                         r"none here \(present: cpu, cuda:0\)"):
        resolve_device("mps", 1, False)
    assert present_devices(0, False) == "cpu"


def test_device_and_precision_values_are_checked():
    assert [parse_device(v) for v in (None, "", "auto", " CUDA:1 ", "cpu", "mps")] == [
        None, None, None, "cuda:1", "cpu", "mps"]
    for bad in ("gpu", "cuda:x", "cuda1", "0"):
        with pytest.raises(ValueError) as err:
            parse_device(bad)
        assert str(err.value).startswith(f"RAGNB_EMBEDDING_DEVICE={bad!r} is not a device; use cpu, cuda, cuda:N")
    assert [parse_dtype(v) for v in (None, "", "float32", "FLOAT16", "bfloat16")] == [
        "float32", "float32", "float32", "float16", "bfloat16"]
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_DTYPE='fp16' is not a precision; use one of float32, "
                                         r"float16, bfloat16"):
        parse_dtype("fp16")
    with pytest.raises(ValueError) as err:
        check_dtype("float16", "cpu")
    assert str(err.value).startswith("RAGNB_EMBEDDING_DTYPE=float16 asks for half precision, but the model runs on "
                                     "the CPU")
    assert (check_dtype("float16", "cuda:0"), check_dtype("float16", "mps"), check_dtype("bfloat16", "cpu")) == (
        "float16", "float16", "bfloat16")
    assert (batch_size_for("cpu"), batch_size_for("cuda:1"), batch_size_for("mps")) == (32, 256, 256)


def test_an_invalid_device_variable_is_refused_when_the_encoder_is_made(monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_DEVICE", "gpu")
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_DEVICE='gpu' is not a device"):
        get_encoder("all-MiniLM-L6-v2")


# -- the real CPU path --------------------------------------------------------------------------------------


def test_cpu_vectors_are_bit_identical_to_plain_sentence_transformers(monkeypatch):
    """The best device here is the CPU; vectors through the cache equal those sentence-transformers made before
    devices existed (device="cpu", float32, batch 32), and the explicit setting gives the same."""
    from sentence_transformers import SentenceTransformer

    texts = _texts()
    old = SentenceTransformer(resolve_model()[1], device="cpu").encode(texts, batch_size=32, convert_to_numpy=True)
    auto = Encoder()
    assert auto.describe()["device"] is None  # nothing loaded yet
    assert "model not loaded (nothing encoded in this notebook)" in encoder_text(auto.describe())
    np.testing.assert_array_equal(auto.encode(texts), old)
    np.testing.assert_array_equal(auto.encode(texts), old)  # the second time from the disk cache
    assert auto.encoded_texts == len(texts) and auto.default_batch_size() == 32
    assert (auto.describe()["device"], auto.describe()["dtype"]) == ("cpu", "float32")
    assert " · on cpu · fingerprint " in encoder_text(auto.describe())
    monkeypatch.setenv("RAGNB_EMBEDDING_DEVICE", "cpu")
    monkeypatch.setenv("RAGNB_EMBEDDING_DTYPE", "float32")
    named = Encoder()
    np.testing.assert_array_equal(named.encode_uncached(texts), old)
    assert named.fingerprint == auto.fingerprint and named.device == "cpu"


def test_float32_keeps_the_fingerprint_and_half_precision_changes_it():
    name, source = resolve_model()
    # the fingerprint as it was computed before precisions existed: existing databases and caches stay valid
    before = digest({"backend": "sentence-transformers", "model": directory_content_id(Path(source)),
                     "query_prompt": "", "document_prompt": "", "normalize": True})
    f32 = SentenceTransformerEncoder(name, source, dtype="float32")
    assert f32.fingerprint == before == Encoder().fingerprint
    # cuda is not present here, but the fingerprint needs no model: it is made without loading one
    f16 = SentenceTransformerEncoder(name, source, device="cuda", dtype="float16")
    bf16 = SentenceTransformerEncoder(name, source, dtype="bfloat16")
    assert len({before, f16.fingerprint, bf16.fingerprint}) == 3
    assert f16.cache_id("document") != f32.cache_id("document")  # half-precision vectors never mix with float32


def test_bfloat16_on_the_cpu_is_close_to_float32_and_cached_apart():
    texts = _texts()[:8]
    f32 = Encoder().encode(texts)
    bf16 = SentenceTransformerEncoder(*resolve_model(), dtype="bfloat16")
    got = bf16.encode(texts)
    assert got.dtype == np.float32 and bf16.describe()["dtype"] == "bfloat16" and bf16.device == "cpu"
    cosine = (got * f32).sum(axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(f32, axis=1)
    assert cosine.min() > 0.99 and not np.array_equal(got, f32)
    assert " · on cpu in bfloat16 · " in encoder_text(bf16.describe())


def test_float16_on_the_cpu_is_refused(monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_DTYPE", "float16")
    monkeypatch.setenv("RAGNB_EMBEDDING_DEVICE", "cpu")
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_DTYPE=float16 asks for half precision, but the model "
                                         r"runs on the CPU"):
        Encoder()  # named together: refused at once
    monkeypatch.delenv("RAGNB_EMBEDDING_DEVICE")
    auto = Encoder()  # the best device present decides: the CPU here, known once torch is asked
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_DTYPE=float16 asks for half precision"):
        auto.encode(["Сколько ножек у стола?"])
    assert len(auto.cache) == 0 and auto.encoded_texts == 0


# -- through the CLI ----------------------------------------------------------------------------------------


def test_embed_on_a_missing_gpu_is_one_clear_error_and_writes_nothing(tmp_path, monkeypatch):
    cli = cli_on_new_db("devices")
    wiki = team_wiki.write_wiki(tmp_path / "wiki")
    assert cli("load", "chunks", str(wiki)).exit_code == 0
    monkeypatch.setenv("RAGNB_EMBEDDING_DEVICE", "cuda")
    res = cli("embed", "--chunks")
    assert res.exit_code == 2
    assert ("RAGNB_EMBEDDING_DEVICE=cuda asks for a CUDA GPU, but torch finds none here (present: cpu); unset "
            "RAGNB_EMBEDDING_DEVICE to use the best device present, or set it to cpu") in res.output
    assert "Traceback" not in res.output
    monkeypatch.delenv("RAGNB_EMBEDDING_DEVICE")
    done = cli("embed", "--chunks")  # nothing was half written: the same command without it embeds every row
    stats = json.loads(done.output[done.output.index("{"):])
    assert done.exit_code == 0 and stats["processed"] == stats["total"] > 0 and stats["skipped"] == 0


# -- without the database stack, and the GPU check script -----------------------------------------------------


def test_encoder_modules_import_without_the_database_stack():
    code = ("import sys\nimport ragnb.embeddings.sentence_transformers, ragnb.embeddings.cache\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'psycopg', 'psycopg2', "
            "'pgvector', 'pandas', 'torch', 'sentence_transformers', 'ragnb.store'})))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


@pytest.mark.parametrize(("args", "says"), [
    ([], "No GPU present (torch sees: cpu); nothing measured. Run with --device cpu for the CPU comparison."),
    (["--device", "cuda:1"], "--device=cuda:1 asks for a CUDA GPU, but torch finds none here (present: cpu)"),
])
def test_gpu_script_without_a_gpu_says_so_and_exits_0(args, says, tmp_path):
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu_encode.py"), *args, "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and says in done.stdout and not out.exists()
