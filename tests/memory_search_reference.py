"""The in-memory exact search as ragnb had it before its memory was bounded: the reference that the tests and
``benchmarks/bench_memory_search.py`` compare the current ``MemoryRetriever`` with.

It copies the vectors twice in its constructor (into id order, then normalised) and holds, per batch of 256
queries, the ``256 × N`` similarity block, its negated copy and ``argpartition``'s ``256 × N`` int64 indices.
"""

from __future__ import annotations

import numpy as np


def old_normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


class OldMemoryRetriever:
    def __init__(self, ids: list[str], vectors: np.ndarray):
        order = np.argsort(np.asarray(ids, dtype=object), kind="stable")
        self.ids = np.asarray(ids, dtype=object)[order]
        self.matrix = old_normalise(np.asarray(vectors, dtype=np.float32)[order])

    def search(self, queries: np.ndarray, k: int, batch_size: int = 256) -> tuple[list, list, np.ndarray]:
        """(ids, float64 scores, every query's similarity row over ``self.ids``) — the rows only for small N."""
        q = old_normalise(queries)
        k = min(k, len(self.ids))
        out_ids, out_scores, rows = [], [], []
        for start in range(0, len(q), batch_size):
            sims = q[start:start + batch_size] @ self.matrix.T
            if k < sims.shape[1]:
                part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            else:
                part = np.tile(np.arange(sims.shape[1]), (len(sims), 1))
            for row, cand in zip(sims, part):
                cand = np.sort(cand)
                top = cand[np.argsort(-row[cand], kind="stable")]
                out_ids.append(self.ids[top].tolist())
                out_scores.append(row[top].astype(np.float64))
                if len(self.ids) <= 100_000:
                    rows.append(row)
        return out_ids, out_scores, np.array(rows)
