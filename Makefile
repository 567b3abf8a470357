# Front door. `make` builds, `make run` starts a controller, `make test` runs every test.
# The build itself is meson + ninja; this file only drives it.

BUILD      ?= build
ASAN_BUILD ?= build-asan
ROOT       ?= /var/lib/station-sandbox
MESON_OPTS ?=

comma := ,
# GCC's sanitizer instrumentation makes some warnings misfire (-Wformat-overflow,
# -Wmaybe-uninitialized); the regular build keeps -Werror, this one is about run-time checks.
ASAN_MESON_OPTS = -Db_sanitize=address$(comma)undefined -Dwerror=false

DAEMON = $(BUILD)/src/daemon/station-sandboxd
CLI    = $(BUILD)/src/cli/station-sandbox

# The tools a build needs; a missing one runs scripts/install-deps (apt-get, Debian 12).
NEEDED_TOOLS = cc meson ninja pkg-config
NEEDED_PKGS  = jansson sqlite3 libmicrohttpd libcurl libarchive criterion

.PHONY: all build deps run tools-image test test-asan fuzz fuzz-merge format-check format clean

all: build

deps:
	scripts/install-deps

# Installs what is missing, configures once, then lets ninja do the rest (it re-runs meson
# itself when a meson.build changes).
define build_in
	@missing=0; \
	for t in $(NEEDED_TOOLS); do command -v $$t >/dev/null 2>&1 || missing=1; done; \
	if [ $$missing -eq 0 ]; then \
		for p in $(NEEDED_PKGS); do pkg-config --exists $$p || missing=1; done; \
		python3 -c 'import yaml' 2>/dev/null || missing=1; \
	fi; \
	if [ $$missing -eq 1 ]; then scripts/install-deps; fi
	@if [ ! -f $(1)/build.ninja ]; then meson setup $(1) $(2) $(MESON_OPTS); fi
	ninja -C $(1)
endef

build:
	$(call build_in,$(BUILD),)

# make run: the controller in the foreground, container adapter only, on the tools image
# (scripts/build-tools-image, built once into TOOLS_IMAGE, reused while its inputs are unchanged)
# imported into the controller's store through its socket once the socket answers (TOOLS_IMAGE
# is the controller's only --import-dir).
TOOLS_IMAGE      ?= $(BUILD)/tools-image
TOOLS_IMAGE_NAME ?= node-tools
SOCKET            = $(ROOT)/station.sock
# The dashboard and the TCP API (bearer token: $(ROOT)/admin.token), on loopback only.
PORT             ?= 8080
# Previews of workspace ports (<label>.preview.localhost, which browsers resolve to 127.0.0.1).
PREVIEW_PORT     ?= 8081

tools-image:
	scripts/build-tools-image $(TOOLS_IMAGE)

run: build
	@digest=$$(scripts/build-tools-image $(TOOLS_IMAGE) | tail -n 1) && [ -n "$$digest" ] || exit 1; \
	image=$(TOOLS_IMAGE_NAME)@$$digest; \
	mkdir -p $(ROOT) || exit 1; \
	./$(DAEMON) --root $(ROOT) --adapters container --log-format text \
		--default-image $$image --listen tcp:127.0.0.1:$(PORT) \
		--preview-listen tcp:127.0.0.1:$(PREVIEW_PORT) \
		--import-dir $(abspath $(TOOLS_IMAGE)) & pid=$$!; \
	trap 'kill -TERM $$pid 2>/dev/null' INT TERM; \
	n=0; until ./$(CLI) --socket $(SOCKET) worker >/dev/null 2>&1; do \
		kill -0 $$pid 2>/dev/null || { wait $$pid; exit $$?; }; \
		n=$$((n + 1)); [ $$n -lt 300 ] || { echo "make run: no answer on $(SOCKET)" >&2; \
			kill -TERM $$pid; wait $$pid; exit 1; }; \
		sleep 0.1; \
	done; \
	if ./$(CLI) image import --help >/dev/null 2>&1; then \
		./$(CLI) --socket $(SOCKET) image import $(abspath $(TOOLS_IMAGE)) \
			--name $(TOOLS_IMAGE_NAME) >/dev/null; \
	else \
		curl -sS --fail-with-body --unix-socket $(SOCKET) -o /dev/null \
			-H 'Content-Type: application/json' http://localhost/v1/images \
			-d '{"path":"$(abspath $(TOOLS_IMAGE))","name":"$(TOOLS_IMAGE_NAME)"}'; \
	fi || { echo "make run: importing $(TOOLS_IMAGE) failed" >&2; kill -TERM $$pid; \
		wait $$pid; exit 1; }; \
	echo "station-sandboxd: root $(ROOT), container adapter, image $$image"; \
	echo "  dashboard:    http://127.0.0.1:$(PORT)/  (sign in with the admin token)"; \
	echo "  admin token:  $(ROOT)/admin.token (also the bearer token of the TCP API)"; \
	echo "  unix socket:  $(SOCKET)"; \
	echo "  try:          export STATION_SOCKET=$(SOCKET)"; \
	echo "                ws=\$$(./$(CLI) create)  # container, $(TOOLS_IMAGE_NAME), no net"; \
	echo "                ./$(CLI) exec \$$ws -- 'node --version && pwd'"; \
	echo "                ./$(CLI) exec \$$ws -- 'npm config get prefix; id'"; \
	echo "  with a network: ./$(CLI) create --allow registry.npmjs.org --allow github.com"; \
	echo "                (restricted: those names only; --network bridge: the outside world)"; \
	echo "  a preview:    ./$(CLI) service start \$$ws web -- 'python3 -m http.server 3000 --bind 127.0.0.1'"; \
	echo "                ./$(CLI) port expose \$$ws 3000   # prints the URL (and its token, once)"; \
	echo "                open the URL it prints: http://<label>.preview.localhost:$(PREVIEW_PORT)/"; \
	echo "  host workspaces (no sandbox) are off: add --adapters host,container to allow them"; \
	echo "  stop with Ctrl-C"; \
	while :; do wait $$pid; status=$$?; kill -0 $$pid 2>/dev/null || exit $$status; done

# make bench: builds (its output on stderr, so that `BENCH_ARGS=--json` leaves stdout to the
# result), then bench/run: its own controllers on a temporary root, one table. BENCH_ARGS passes
# options (--quick, --json, --runs N, --reps N, --only GROUPS; bench/run --help). BENCHMARKS.md.
.PHONY: bench
bench:
	@$(MAKE) --no-print-directory build >&2
	@bench/run --build $(BUILD) $(BENCH_ARGS)

# scripts/check-layers first (one test of the count), then every unit, integration and security
# test: test/run-all, its scripts several at a time (TEST_ARGS passes options: -j N, patterns).
# test-asan: the same under ASan + UBSan, the host workspaces' agent included.
TEST_ARGS ?=
test: build
	test/run-all $(BUILD) $(TEST_ARGS)

test-asan:
	$(call build_in,$(ASAN_BUILD),$(ASAN_MESON_OPTS))
	test/run-all $(ASAN_BUILD) $(TEST_ARGS)

# make fuzz: the libFuzzer harnesses of test/fuzz (clang, ASan + UBSan, in FUZZ_BUILD), each for
# FUZZ_SECONDS with its committed corpus; new inputs stay in FUZZ_BUILD/fuzz-work. Fails when a
# harness crashes. FUZZ_TARGETS picks harnesses by name (default all). make fuzz-merge also
# minimizes test/fuzz/corpus with what the run found. scripts/fuzz --help; docs/testing.md.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=

fuzz:
	scripts/fuzz --build $(FUZZ_BUILD) --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-merge:
	scripts/fuzz --build $(FUZZ_BUILD) --seconds $(FUZZ_SECONDS) --merge $(FUZZ_TARGETS)

# Every C file we track (or are about to), build directories excluded.
FORMAT_FILES = $(wildcard $(shell { git ls-files --cached --others --exclude-standard -- '*.c' '*.h' 2>/dev/null \
		|| find src include test bench -name '*.c' -o -name '*.h'; } | grep -v '^build' | sort -u))

format-check:
	@command -v clang-format >/dev/null 2>&1 || scripts/install-deps
	$(if $(FORMAT_FILES),clang-format --dry-run --Werror $(FORMAT_FILES),@echo "format-check: no C files")
	@echo "format-check: $(words $(FORMAT_FILES)) files are formatted"

format:
	clang-format -i $(FORMAT_FILES)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
