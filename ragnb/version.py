"""The package's version: one declaration, read by ``ragnb.__version__`` and written into each run record."""

__version__ = "0.1.0"
