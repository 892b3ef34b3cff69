"""ragnb — Jupyter-first benchmarking of Retrieval-Augmented-Generation systems."""

__version__ = "0.1.0"

# PPI: prediction-powered estimates of a judged mean (docs/ppi.md); imported on first use, so `import ragnb` stays light
_PPI = {"ppi_mean": ("ragnb.metrics.ppi", "ppi_mean"), "classical_mean": ("ragnb.metrics.ppi", "classical_mean"),
        "judge_mean": ("ragnb.metrics.ppi", "judge_mean"), "PPIResult": ("ragnb.metrics.ppi", "PPIResult")}


def __getattr__(name: str) -> object:
    if name not in _PPI:
        raise AttributeError(f"module 'ragnb' has no attribute {name!r}")
    import importlib

    module, attribute = _PPI[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
