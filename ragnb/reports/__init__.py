"""What notebooks display: figures, tables, the banner and the metrics files (the pages a run writes from the
executed notebooks are :mod:`ragnb.runs.pages`)."""
