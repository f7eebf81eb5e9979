# Two commands do all set-up themselves: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# rhea, the Node.js AMQP 1.0 client some integration tests drive (tests/support/rhea)
RHEA   := tests/support/rhea/node_modules/.installed
CONFIG ?= config.example.yaml
# make run LISTEN=127.0.0.1:5673 (several: LISTEN="127.0.0.1:5673 [::1]:5673") METRICS=127.0.0.1:9420
#          MANAGEMENT=127.0.0.1:15673 (serves the management API and dashboard there)
LISTEN  ?=
METRICS ?=
MANAGEMENT ?=
PYTEST_WORKERS ?= 2
# the fast tier waits on sockets and timers more than it computes (about 78 s of CPU in 95 s
# on 2 workers), so it runs 4 workers on the 2 cores: 93-96 s -> 69-70 s, measured
FAST_WORKERS ?= 4

.PHONY: run test test-fast lint bench clean deb check-deb dist

$(STAMP): pyproject.toml
	$(PYTHON) tools/bootstrap_venv.py $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[test,pipeline]'
	touch $(STAMP)

$(RHEA): tests/support/rhea/package-lock.json
	cd tests/support/rhea && npm ci --no-audit --no-fund
	touch $(RHEA)

RUN_ARGS = run --config $(CONFIG) $(foreach a,$(LISTEN),--listen $(a)) $(if $(METRICS),--metrics $(METRICS)) \
           $(if $(MANAGEMENT),--management $(MANAGEMENT))

run: $(STAMP)
	@echo "$(BIN)/amqp-gateway $(strip $(RUN_ARGS))"
	@status=0; $(BIN)/amqp-gateway $(RUN_ARGS) || status=$$?; \
	if [ $$status = 1 ]; then echo "make: to move a port: make run LISTEN=HOST:PORT METRICS=HOST:PORT MANAGEMENT=HOST:PORT (or CONFIG=FILE)" >&2; fi; \
	exit $$status

lint: $(STAMP)
	$(BIN)/lint-imports

# every test; the 15 slowest are listed at the end. Bytecode is cached even where the
# environment says PYTHONDONTWRITEBYTECODE (__pycache__ is ignored by git): without the
# cache every pytest process rewrote the assertions of every test module again (about
# 5 s of CPU each, 3 processes with -n 2) and every gateway process compiled the gateway
# package again before it started.
PYTEST_RUN = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q --durations=15
PYTEST = $(PYTEST_RUN) -n $(PYTEST_WORKERS)

test: $(STAMP) $(RHEA) lint
	$(PYTEST)

# the unit tests and the in-process integration tests: no Spark, no RabbitMQ, no crash
# loop or backlog (marker slow), no gateway or CLI process (marker process); Hypothesis
# properties run a quarter of their examples (tests/support/example_counts.py)
test-fast: $(STAMP) $(RHEA) lint
	HYPOTHESIS_PROFILE=fast $(PYTEST_RUN) -n $(FAST_WORKERS) -m "not slow and not process"

bench: $(STAMP)
	$(BIN)/python bench/run.py

# dist/amqp-gateway_VERSION-1_ARCH.deb: a self-contained venv in /opt/amqp-gateway (see deploy/README.md)
deb:
	deploy/build-deb

# dist/amqp-gateway-VERSION.tar.gz: the source tarball (`make deb` works in it unpacked, without git)
dist:
	mkdir -p dist
	git archive --format=tar.gz --prefix=amqp-gateway-$$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)/ \
	    -o dist/amqp-gateway-$$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml).tar.gz HEAD

# install it in a throw-away root and run it from there (what CI does)
check-deb:
	deploy/check-deb "$$(deploy/build-deb)"

clean:
	rm -rf $(VENV) build dist *.egg-info var
