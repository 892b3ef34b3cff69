"""``ragnb dataset …``: build benchmark datasets (seed 001 phase 2)."""

from __future__ import annotations

import typer

dataset_app = typer.Typer(no_args_is_help=True, help="Build benchmark datasets (synthetic, real questions, annotation, judge pipeline).")
