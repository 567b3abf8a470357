# shellcheck shell=bash
# Sourced by every test/integration/test-*.sh. Starts a real controller on a temporary root and
# gives the tests a small vocabulary: api, cli, assertions, bounded polling, result lines.
#
# Environment: BUILD (the meson build directory, default ./build), set by test/run-all.
#
# A test script prints one line per test: `ok NAME`, `not ok NAME`, `skip NAME reason`;
# diagnostics are `# ...` lines. It exits non-zero when any test failed. Never sleep and hope:
# wait with wait_for (bounded) or with the API's own long-poll.

set -uo pipefail

SRC=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-$SRC/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "not ok $(basename "$0" .sh) # build directory '${BUILD}' not found"
	exit 1
}
DAEMON=$BUILD/src/daemon/station-sandboxd
AGENT=$BUILD/src/agent/station-agent
CLI_BIN=$BUILD/src/cli/station-sandbox
TEST_NAME=$(basename "$0" .sh)

# Nothing from the caller's environment may redirect our clients.
unset STATION_SOCKET STATION_URL STATION_TOKEN STATION_ROOT STATION_WORKERS STATION_WORKERS_FILE

# Scratch space for this script; ROOT is the controller's metadata root inside it (short, so
# unix socket paths stay far below 108 bytes).
TMP=$(mktemp -d /tmp/station-it.XXXXXX)
ROOT=$TMP/root
mkdir -p "$ROOT"
SOCK=$ROOT/station.sock
CONTROLLER_PID=
CONTROLLER_LOG=$ROOT/controller.log
STATUS=
BODY=

# python3 is Debian's (scripts/install-deps), which has all the tests' helpers import: the
# standard library, and pytest and yaml from Debian's packages. A version manager's shim found
# before it on PATH (pyenv's is a bash script that runs pyenv, 0.6 s a start here) would cost that
# on every python3 a script starts, the helpers run through `#!/usr/bin/env python3` included.
if [[ -x /usr/bin/python3 && $(command -v python3) != /usr/bin/python3 ]]; then
	mkdir -p "$TMP/debian-python"
	ln -s /usr/bin/python3 "$TMP/debian-python/python3"
	PATH=$TMP/debian-python:$PATH
fi

# Sanitizer reports of every process we start (controller, agents, CLI) land in a directory.
# Under test/run-all it is run-all's (STATION_TEST_SANITIZER_DIR, log_path already set), which
# checks it when the script has ended, processes that outlived it included; run alone, the
# script makes its own and checks it at cleanup.
if [[ -n ${STATION_TEST_SANITIZE:-} && -z ${STATION_TEST_SANITIZER_DIR:-} ]]; then
	mkdir -p "$TMP/sanitizer"
	export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$TMP/sanitizer/asan"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$TMP/sanitizer/ubsan"
fi

_n_fail=0
_n_done=0

# ---------------------------------------------------------------------------------------------
# Results

ok() {
	_n_done=$((_n_done + 1))
	echo "ok $1"
}

not_ok() {
	_n_done=$((_n_done + 1))
	_n_fail=$((_n_fail + 1))
	echo "not ok $1${2:+ # $2}"
}

skip() {
	_n_done=$((_n_done + 1))
	echo "skip $1 ${2:-skipped}"
}

note() {
	echo "# note $*"
}

diag() {
	echo "#   $*"
}

# run_test NAME FUNCTION [ARGS...]: runs FUNCTION in this shell; the test passes when it returns
# 0 and no assertion inside it failed. Assertions print their own diagnostics. With
# STATION_TEST_CASE_TIMES=1 each result line is followed by `# took N.NNN s` (where a script's
# time goes; never an assertion).
_t_failed=0
run_test() {
	local name=$1 started=${EPOCHREALTIME/./}
	shift
	_t_failed=0
	"$@"
	local rc=$?
	if [[ $rc -eq 0 && $_t_failed -eq 0 ]]; then
		ok "$name"
	else
		not_ok "$name"
		dump_controller_log 30
	fi
	if [[ ${STATION_TEST_CASE_TIMES:-} == 1 ]]; then
		local us=$((${EPOCHREALTIME/./} - started))
		printf '# took %d.%03d s\n' $((us / 1000000)) $((us % 1000000 / 1000))
	fi
}

# run_or_skip NAME FN: run_test, but FN returning 2 (a skip it printed itself) is the test's
# own line: nothing more is printed.
run_or_skip() {
	local name=$1 fn=$2
	_t_failed=0
	"$fn" "$name"
	local rc=$?
	[[ $rc -eq 2 ]] && return 0
	if [[ $rc -eq 0 && $_t_failed -eq 0 ]]; then ok "$name"; else
		not_ok "$name"
		dump_controller_log 30
	fi
}

# ---------------------------------------------------------------------------------------------
# Assertions: each returns 1 (and marks the running test failed) on mismatch, so a test can
# write `assert_eq 201 "$STATUS" "create" || return 1` to stop at the first broken step.

_fail() {
	_t_failed=1
	diag "FAIL: $*"
	return 1
}

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
	[[ $1 == "$2" ]] && return 0
	_fail "${3:-value}: expected '$(_short "$1")', got '$(_short "$2")'"
}

assert_ne() {
	[[ $1 != "$2" ]] && return 0
	_fail "${3:-value}: expected anything but '$(_short "$1")'"
}

# assert_match REGEX ACTUAL [WHAT]   (bash extended regex)
assert_match() {
	[[ $2 =~ $1 ]] && return 0
	_fail "${3:-value}: '$(_short "$2")' does not match /$1/"
}

# assert_contains NEEDLE HAYSTACK [WHAT]
assert_contains() {
	[[ $2 == *"$1"* ]] && return 0
	_fail "${3:-value}: '$(_short "$2")' does not contain '$1'"
}

# assert_le A B [WHAT]: integers, A <= B
assert_le() {
	[[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]] && (($1 <= $2)) && return 0
	_fail "${3:-value}: expected $1 <= $2"
}

# assert_files_eq EXPECTED_FILE ACTUAL_FILE [WHAT]: byte for byte.
assert_files_eq() {
	cmp -s "$1" "$2" && return 0
	_fail "${3:-content}: files differ ($(stat -c %s "$1") vs $(stat -c %s "$2") bytes; $(cmp "$1" "$2" 2>&1 | head -n 1))"
}

# assert_status EXPECTED [WHAT]: the HTTP status of the last api call.
assert_status() {
	[[ $STATUS == "$1" ]] && return 0
	_fail "${2:-HTTP status}: expected $1, got $STATUS: $(_short "$BODY")"
}

_short() {
	local s=$1
	if [[ ${#s} -gt 300 ]]; then
		s="${s:0:300}… (${#1} chars)"
	fi
	printf '%s' "$s"
}

# ---------------------------------------------------------------------------------------------
# Polling

# wait_for [-t SECONDS] CMD [ARGS...]: runs CMD every 50 ms until it succeeds; 1 after the
# deadline (default 10 s).
wait_for() {
	local timeout=10
	if [[ $1 == -t ]]; then
		timeout=$2
		shift 2
	fi
	local end now
	end=$((${EPOCHREALTIME/./} + timeout * 1000000))
	while :; do
		"$@" && return 0
		now=${EPOCHREALTIME/./}
		((now >= end)) && return 1
		sleep 0.05
	done
}

# ---------------------------------------------------------------------------------------------
# The controller

# adapter_flags [DAEMON FLAGS...]: the flags with both adapters allowed and host the default,
# unless they choose (--adapters): most tests drive host workspaces, which a worker does not
# allow unless told. Networking is off (--network-range none) unless they name a range: a
# bridge and firewall table per test controller would collide between tests and outlive them.
adapter_flags() {
	local f has_adapters=0 has_default=0 pre=(--network-range none)
	for f in "$@"; do
		case $f in
		--adapters | --adapters=*) has_adapters=1 ;;
		--default-adapter | --default-adapter=*) has_default=1 ;;
		esac
	done
	if ((!has_adapters)); then
		pre+=(--adapters host,container)
		((has_default)) || pre+=(--default-adapter host)
	fi
	printf '%s\0' "${pre[@]}" "$@"
}

# start_controller [DAEMON FLAGS...]: starts station-sandboxd on ROOT in the background and
# waits (10 s at most) until GET /v1/ready answers 200. Extra flags are remembered so a restart
# uses the same ones. Without --adapters among them, both adapters are allowed (adapter_flags).
CONTROLLER_FLAGS=()
start_controller() {
	mapfile -d '' -t CONTROLLER_FLAGS < <(adapter_flags "$@")
	set -- "${CONTROLLER_FLAGS[@]}"
	if [[ ! -x $DAEMON ]]; then
		diag "controller binary $DAEMON not built"
		return 1
	fi
	echo "=== start $(date +%T.%N) $*" >>"$CONTROLLER_LOG"
	"$DAEMON" --root "$ROOT" --worker test --log-format text "$@" \
		>>"$CONTROLLER_LOG" 2>&1 </dev/null &
	CONTROLLER_PID=$!
	if ! wait_for -t 10 _controller_ready; then
		diag "controller (pid $CONTROLLER_PID) did not become ready within 10 s"
		if ! kill -0 "$CONTROLLER_PID" 2>/dev/null; then
			wait "$CONTROLLER_PID" 2>/dev/null
			diag "it exited with status $?"
		else
			diag "last answer of GET /v1/ready: $STATUS $(_short "$BODY")"
		fi
		dump_controller_log 40
		return 1
	fi
	return 0
}

_controller_ready() {
	kill -0 "$CONTROLLER_PID" 2>/dev/null || return 2
	api -q GET /v1/ready
	[[ $STATUS == 200 ]]
}

# Starts the controller or ends the whole script with one failure.
require_controller() {
	if ! start_controller "$@"; then
		not_ok "controller starts" "see the diagnostics above"
		exit 1
	fi
}

# stop_controller [SIGNAL]: signals the controller (default TERM), waits (10 s at most) for it
# to exit and sets CONTROLLER_EXIT to its exit status.
CONTROLLER_EXIT=
stop_controller() {
	local sig=${1:-TERM} pid=$CONTROLLER_PID
	CONTROLLER_EXIT=
	[[ -n $pid ]] || return 0
	kill -s "$sig" "$pid" 2>/dev/null
	if ! wait_for -t 10 _pid_gone "$pid"; then
		diag "controller $pid ignored SIG$sig for 10 s; killing it"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	CONTROLLER_EXIT=$?
	CONTROLLER_PID=
	return 0
}

# restart_controller: starts a new controller on the same root with the same flags.
restart_controller() {
	start_controller "${CONTROLLER_FLAGS[@]}"
}

_pid_gone() {
	# A zombie child still answers kill -0: look at its state too.
	[[ ! -e /proc/$1 ]] && return 0
	[[ $(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) == Z ]]
}

dump_controller_log() {
	local lines=${1:-40}
	[[ -s $CONTROLLER_LOG ]] || return 0
	{
		echo "--- last $lines lines of $CONTROLLER_LOG ---"
		tail -n "$lines" "$CONTROLLER_LOG"
		echo "---"
	} >&2
}

# ---------------------------------------------------------------------------------------------
# Clients

# api [-q] METHOD PATH [BODY]: one request over the unix socket. Sets STATUS (HTTP status,
# 000 when no answer) and BODY, also kept in $TMP/last-status and $TMP/last-body so a caller
# that ran api in a subshell can read them. Prints the body unless -q. A BODY starting with
# '@' names a file to send. API_MAX_TIME (seconds, default 90) bounds the request.
api() {
	local quiet=0
	if [[ $1 == -q ]]; then
		quiet=1
		shift
	fi
	local method=$1 path=$2
	local args=(-sS --max-time "${API_MAX_TIME:-90}" --unix-socket "$SOCK" -X "$method" -o "$TMP/last-body"
		-w '%{http_code}')
	if [[ $# -ge 3 ]]; then
		local body=$3
		if [[ $body != @* ]]; then
			printf '%s' "$body" >"$TMP/request"
			body=@$TMP/request
		fi
		args+=(-H 'Content-Type: application/json' --data-binary "$body")
	fi
	: >"$TMP/last-body"
	STATUS=$(curl "${args[@]}" "http://station$path" 2>"$TMP/curl-err") || STATUS=000
	BODY=$(cat "$TMP/last-body")
	echo "$STATUS" >"$TMP/last-status"
	[[ $quiet -eq 1 ]] || printf '%s\n' "$BODY"
	return 0
}

last_status() {
	cat "$TMP/last-status"
}

# npm_ci DIR [NPM OPTIONS...]: DIR's node_modules as its package-lock.json pins it: `npm ci`
# unless `npm ls --offline` finds it already matching, under a lock on DIR, so that scripts
# running at once that share DIR (sdk/typescript has three) install it once and never under one
# another's feet (npm ci starts by removing node_modules). --prefer-offline: a pinned version
# npm's cache holds is taken from there without asking the registry first (an unreachable
# registry costs minutes of npm's retries). npm's output goes to stdout and stderr.
npm_ci() {
	local dir=$1
	shift
	# shellcheck disable=SC2016 # expanded by the inner shell
	flock -w 600 "$dir" bash -c 'cd "$1" || exit 1
		shift
		npm ls --offline --all >/dev/null 2>&1 && exit 0
		npm ci --prefer-offline --no-audit --no-fund "$@"' _ "$dir" "$@"
}

# npm_tools: the npm packages the tests drive the controller with (ws, playwright-core), pinned
# by test/npm-tools/package-lock.json and installed there by npm_ci; scripts resolve them from
# NPM_TOOLS (WS_MODULE_DIR, PLAYWRIGHT_DIR). Returns 1 with the reason in NPM_TOOLS_ERROR.
NPM_TOOLS=$SRC/test/npm-tools
NPM_TOOLS_ERROR=
npm_tools() {
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		NPM_TOOLS_ERROR="node and npm are needed (scripts/install-deps)"
		return 1
	fi
	npm_ci "$NPM_TOOLS" --loglevel=error >"$TMP/npm.log" 2>&1 && return 0
	NPM_TOOLS_ERROR="npm ci in test/npm-tools failed: $(tail -n 1 "$TMP/npm.log")"
	return 1
}

# cli ARGS...: the CLI against this controller.
cli() {
	STATION_SOCKET=$SOCK "$CLI_BIN" "$@"
}

# j FILTER [JSON]: jq -r on JSON (default: BODY), compact.
j() {
	jq -rc "$1" <<<"${2-$BODY}"
}

# json_cmd COMMAND [JQ-EXPR]: a command request body, e.g. json_cmd 'sleep 1' '.timeoutMs=500'.
json_cmd() {
	jq -nc --arg c "$1" "{command: \$c} | ${2:-.}"
}

# ---------------------------------------------------------------------------------------------
# Workspaces and runs

WORKSPACES=()

# new_ws VAR [BODY]: creates a workspace (body default {}) and stores its id in the variable
# VAR of this shell.
new_ws() {
	local _id _body=${2-}
	[[ -n $_body ]] || _body='{}'
	api -q POST /v1/workspaces "$_body"
	if [[ $STATUS != 201 ]]; then
		_fail "create workspace: HTTP $STATUS $(_short "$BODY")"
		return 1
	fi
	_id=$(j .id)
	WORKSPACES+=("$_id")
	printf -v "$1" '%s' "$_id"
}

# run_start WS BODY [WAIT_MS]: POST a command; sets STATUS/BODY and RUN to the new run id.
RUN=
run_start() {
	local q=
	[[ -n ${3:-} ]] && q="?waitMs=$3"
	api -q POST "/v1/workspaces/$1/commands$q" "$2"
	RUN=
	if [[ $STATUS == 201 ]]; then
		RUN=$(j .id)
		return 0
	fi
	_fail "start command: HTTP $STATUS $(_short "$BODY")"
}

# run_get WS RUN [WAIT_MS]
run_get() {
	local q=
	[[ -n ${3:-} ]] && q="?waitMs=$3"
	api -q GET "/v1/workspaces/$1/commands/$2$q"
}

# run_wait WS RUN [SECONDS]: long-polls until the run is terminal (default 60 s at most);
# leaves the final run in BODY.
run_wait() {
	local ws=$1 run=$2 end=$((SECONDS + ${3:-60}))
	while :; do
		run_get "$ws" "$run" 60000
		if [[ $STATUS != 200 ]]; then
			_fail "GET run $run: HTTP $STATUS $(_short "$BODY")"
			return 1
		fi
		[[ $(j .status) != running ]] && return 0
		if ((SECONDS >= end)); then
			_fail "run $run still running after ${3:-60} s"
			return 1
		fi
	done
}

# run_cmd WS COMMAND [JQ-EXPR]: starts a command, waits for it; the final run is in BODY.
run_cmd() {
	run_start "$1" "$(json_cmd "$2" "${3:-.}")" 60000 || return 1
	[[ $(j .status) != running ]] && return 0
	run_wait "$1" "$RUN"
}

# is_running WS RUN: the run exists and its status is running (a wait_for predicate).
run_is_running() {
	run_get "$1" "$2"
	[[ $STATUS == 200 && $(j .status) == running ]]
}

# agent_pid WS: the pid of the workspace's station-agent (found by the workspace id in its
# command line), empty when there is none.
agent_pid() {
	local pid
	for pid in $(pgrep -f -- "station-agent.*$1" 2>/dev/null); do
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$1"; then
			echo "$pid"
			return 0
		fi
	done
	return 0
}

# no_process PATTERN: no process matches `pgrep -f PATTERN` (zombies have no command line).
no_process() {
	! pgrep -f -- "$1" >/dev/null
}

# process_count PATTERN
process_count() {
	pgrep -f -- "$1" | wc -l
}

# cgroup_dirs ID: every cgroup directory (any hierarchy) whose name contains ID.
cgroup_dirs() {
	find /sys/fs/cgroup/ -mindepth 1 -maxdepth 8 -type d -name "*$1*" 2>/dev/null | sort
}

# vmhwm_kb PID: peak resident set size of a process in KiB.
vmhwm_kb() {
	awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null
}

# ---------------------------------------------------------------------------------------------
# Cleanup: delete every workspace through the API (so agents, runs and cgroups go away), stop
# the controller, check for sanitizer reports, remove the root.

_cleanup() {
	local rc=$?
	trap - EXIT
	local ids=()
	if [[ -n $CONTROLLER_PID ]] && kill -0 "$CONTROLLER_PID" 2>/dev/null; then
		:
	elif [[ -e $ROOT/station.db && -x $DAEMON ]]; then
		# The test left no controller running: start one to delete what is left.
		start_controller "${CONTROLLER_FLAGS[@]}" >/dev/null 2>&1 || CONTROLLER_PID=
	fi
	if [[ -n $CONTROLLER_PID ]]; then
		api -q GET /v1/workspaces
		if [[ $STATUS == 200 ]]; then
			mapfile -t ids < <(jq -r '.workspaces[].id' <<<"$BODY" 2>/dev/null)
		fi
		local id
		for id in "${ids[@]}"; do
			api -q DELETE "/v1/workspaces/$id"
			[[ $STATUS == 200 ]] || echo "cleanup: DELETE $id: $STATUS $BODY" >&2
		done
		stop_controller TERM
	fi
	# Whatever survived (a broken controller): kill processes that name our root, remove the
	# cgroups of our workspaces.
	local pid
	# (a controller names its root without a trailing slash: "--root ROOT --worker …")
	for pid in $(pgrep -f -- "$ROOT/|--root $ROOT( |\$)" 2>/dev/null); do
		kill -KILL "$pid" 2>/dev/null
	done
	# an lxcfs killed above leaves its mount (a controller stops its own when it exits)
	if grep -q " $ROOT/lxcfs " /proc/self/mountinfo 2>/dev/null; then
		umount -l "$ROOT/lxcfs" 2>/dev/null
	fi
	for id in "${WORKSPACES[@]}" "${ids[@]}"; do
		[[ -n $id ]] || continue
		local d
		for d in $(cgroup_dirs "$id" | sort -r); do
			rmdir "$d" 2>/dev/null
		done
	done
	if [[ -d $TMP/sanitizer ]] && compgen -G "$TMP/sanitizer/*" >/dev/null; then
		not_ok "sanitizer reports" "see stderr"
		local f
		for f in "$TMP"/sanitizer/*; do
			echo "--- $f" >&2
			head -n 60 "$f" >&2
		done
	fi
	rm -rf "$TMP"
	if [[ $_n_fail -gt 0 ]]; then
		exit 1
	fi
	if [[ $rc -ne 0 ]]; then
		exit "$rc"
	fi
	exit 0
}
trap _cleanup EXIT

_interrupted() {
	echo "# interrupted" >&2
	exit 130
}
trap _interrupted INT TERM

if [[ $(id -u) -ne 0 ]]; then
	skip "$TEST_NAME" "integration tests need root (cgroups)"
	exit 0
fi
