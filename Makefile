# The two commands of the README.
.PHONY: demo test setup

# Set up, then run the main job on the embedded defaults (no network, no API key).
demo:
	bash scripts/setup.sh
	.venv/bin/ragnb demo

# Set up (with test tools, headless Chromium and a PostgreSQL server with pgvector), then run the whole test
# suite; the slowest 15 tests are listed at the end, so a test that grows slow is seen.
test:
	bash scripts/setup.sh dev
	bash scripts/install_chromium.sh
	bash scripts/install_postgres.sh
	.venv/bin/python -m pytest --durations=15
