"""ragnb — Jupyter-first benchmarking of Retrieval-Augmented-Generation systems."""

__version__ = "0.1.0"
