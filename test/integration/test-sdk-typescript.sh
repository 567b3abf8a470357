#!/bin/bash
# run-all: not under sanitizers: JavaScript (npm ci, tsc, node --test) through API paths the C client and CLI tests run
# The TypeScript SDK (sdk/typescript) against a real controller: builds it (npm ci, tsc, the
# type-level checks), starts a controller with a TCP listener, builds the busybox test image for
# the container tests, runs the SDK's node:test suites and turns their TAP into our result lines.
# Skips only when node or npm is missing (or too old for node --test).
. "$(dirname "$0")/lib.sh"

SDK=$SRC/sdk/typescript
RUNTIME=${STATION_TEST_RUNTIME:-runc}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "$TEST_NAME" "node and npm are needed (apt-get install nodejs npm)"
	exit 0
fi
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
if [[ ! $NODE_MAJOR =~ ^[0-9]+$ ]] || ((NODE_MAJOR < 20)); then
	skip "$TEST_NAME" "node $(node --version) is too old: the SDK and its tests need node 20 or later"
	exit 0
fi

# ---------------------------------------------------------------------------------------------
# Build: npm ci only when node_modules does not match package-lock.json (so a machine without
# the registry can run the tests once the dependencies are installed), then tsc.

t_build() {
	local log=$TMP/npm.log
	(
		cd "$SDK" || exit 1
		npm_ci "$SDK" || exit 1
		npm run --silent build && npm run --silent typecheck
	) >"$log" 2>&1 && return 0
	_fail "the SDK does not build:"
	tail -n 30 "$log" | sed 's/^/#   /'
	return 1
}
run_test "sdk builds (npm ci, tsc, type-level checks)" t_build
((_n_fail == 0)) || exit 1

# ---------------------------------------------------------------------------------------------
# The controller, with a TCP listener for the token tests and a preview listener.

free_port() {
	node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'
}
PORT=$(free_port)
PREVIEW_PORT=$(free_port)
# The usage history sampled every 200 ms, so that its tests see points within a second or two.
CONTROLLER_ARGS=(--listen "tcp:127.0.0.1:$PORT" --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT"
	--usage-interval-ms 200)

# The container tests: the busybox image layout (imported by the tests through the SDK), when
# this machine can run containers; else the reason goes to the tests, which skip with it.
IMAGE_LAYOUT=
DEFAULT_IMAGE=
CONTAINER_SKIP=
if ! command -v "$RUNTIME" >/dev/null; then
	CONTAINER_SKIP="OCI runtime '$RUNTIME' not installed"
elif [[ ! -x /bin/busybox ]]; then
	CONTAINER_SKIP="/bin/busybox missing (apt-get install busybox-static)"
elif ! command -v python3 >/dev/null; then
	CONTAINER_SKIP="python3 missing"
else
	# The container's root (an unprivileged host uid) must pass through TMP to reach its rootfs.
	chmod 0755 "$TMP"
	if python3 "$SRC/test/helpers/make-busybox-image" "$TMP/image" >"$TMP/image.log" 2>&1; then
		IMAGE_LAYOUT=$TMP/image
		# The worker's default image is the test image (imported by the tests): a container
		# adapter that names no image gets it.
		DEFAULT_IMAGE=busybox@$(jq -r '.manifests[0].digest' "$IMAGE_LAYOUT/index.json")
		CONTROLLER_ARGS+=(--runtime "$RUNTIME" --import-dir "$TMP" --default-image "$DEFAULT_IMAGE")
	else
		not_ok "busybox test image builds" "$(tail -n 1 "$TMP/image.log")"
		exit 1
	fi
fi

require_controller "${CONTROLLER_ARGS[@]}"

# ---------------------------------------------------------------------------------------------
# node --test, TAP translated: `ok N - NAME`, `ok N - NAME # SKIP reason`, `not ok N - NAME`
# followed by its YAML block (printed as diagnostics).

_tap_name() {
	local s=$1
	s=${s#*ok }
	s=${s#* - }
	printf '%s' "$s"
}

run_node_tests() {
	local line name reason rc results=0 in_yaml=0 failed=0
	while IFS= read -r line; do
		if ((in_yaml)); then
			if [[ $line == "  ..." ]]; then
				in_yaml=0
			else
				echo "#   ${line#  }"
			fi
			continue
		fi
		case $line in
		"not ok "*)
			results=$((results + 1))
			name=$(_tap_name "$line")
			not_ok "${name% # *}"
			failed=1
			in_yaml=1
			;;
		"ok "*" # SKIP"*)
			results=$((results + 1))
			name=$(_tap_name "$line")
			reason=${name#* # SKIP}
			reason=${reason# }
			skip "${name%% # SKIP*}" "${reason:-skipped}"
			;;
		"ok "*" # TODO"*)
			results=$((results + 1))
			name=$(_tap_name "$line")
			skip "${name%% # TODO*}" "todo"
			;;
		"ok "*)
			results=$((results + 1))
			ok "$(_tap_name "$line")"
			;;
		"# Subtest: "*) ;;
		"# "[a-z_]*" "[0-9]*) ;; # the runner's summary: ours is the result lines
		"#"*) echo "$line" ;;     # diagnostics (t.diagnostic, console output of the tests)
		esac
	done < <(
		cd "$SDK" &&
			STATION_SOCKET=$SOCK \
			STATION_URL=http://127.0.0.1:$PORT \
			STATION_TOKEN=$(tr -d '\n' <"$ROOT/admin.token") \
			STATION_TEST_IMAGE_LAYOUT=$IMAGE_LAYOUT \
			STATION_TEST_DEFAULT_IMAGE=$DEFAULT_IMAGE \
			STATION_TEST_CONTAINER_SKIP=$CONTAINER_SKIP \
			STATION_TEST_SECCOMP=$SRC/profiles/default.json \
			STATION_PREVIEW=127.0.0.1:$PREVIEW_PORT \
			timeout -k 10 300 node --test --test-reporter=tap test/*.test.mjs 2>&1
		echo $? >"$TMP/node-rc"
	)
	rc=$(cat "$TMP/node-rc" 2>/dev/null || echo 1)
	if ((results == 0)); then
		not_ok "sdk node tests" "node --test reported no results (exit status $rc)"
	elif ((rc != 0 && !failed)); then
		not_ok "sdk node tests" "node --test exited $rc without a failing test"
	fi
	if ((failed || rc != 0)); then
		dump_controller_log 30
	fi
	return 0
}
run_node_tests
