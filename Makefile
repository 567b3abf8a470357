# Front door. `make` builds, `make run` starts a controller, `make test` runs every test.
# The build itself is meson + ninja; this file only drives it.

BUILD      ?= build
ASAN_BUILD ?= build-asan
ROOT       ?= /var/lib/station-sandbox
MESON_OPTS ?=

comma := ,
# GCC's sanitizer instrumentation makes some warnings misfire (-Wformat-overflow,
# -Wmaybe-uninitialized); the regular build keeps -Werror, this one is about run-time checks.
ASAN_MESON_OPTS = -Db_sanitize=address$(comma)undefined -Dstatic_agent=false -Dwerror=false

DAEMON = $(BUILD)/src/daemon/station-sandboxd
CLI    = $(BUILD)/src/cli/station-sandbox

# The tools a build needs; a missing one runs scripts/install-deps (apt-get, Debian 12).
NEEDED_TOOLS = cc meson ninja pkg-config
NEEDED_PKGS  = jansson sqlite3 libmicrohttpd libcurl libarchive criterion

.PHONY: all build deps run test test-asan format-check format clean

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
	fi; \
	if [ $$missing -eq 1 ]; then scripts/install-deps; fi
	@if [ ! -f $(1)/build.ninja ]; then meson setup $(1) $(2) $(MESON_OPTS); fi
	ninja -C $(1)
endef

build:
	$(call build_in,$(BUILD),)

run: build
	@echo "station-sandboxd: root $(ROOT)"
	@echo "  unix socket:  $(ROOT)/station.sock"
	@echo "  admin token:  $(ROOT)/admin.token (for --listen tcp:HOST:PORT)"
	@echo "  try:          ./$(CLI) --socket $(ROOT)/station.sock create"
	@echo "                ./$(CLI) --socket $(ROOT)/station.sock exec WORKSPACE -- 'echo hi'"
	@echo "  (or export STATION_SOCKET=$(ROOT)/station.sock); stop with Ctrl-C"
	@mkdir -p $(ROOT)
	exec ./$(DAEMON) --root $(ROOT) --log-format text

test: build
	test/run-all $(BUILD)

test-asan:
	$(call build_in,$(ASAN_BUILD),$(ASAN_MESON_OPTS))
	test/run-all $(ASAN_BUILD)

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
	rm -rf $(BUILD) $(ASAN_BUILD)
