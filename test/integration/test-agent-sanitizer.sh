#!/bin/bash
# The agent under sanitizers (make test-asan): host workspaces run station-agent-asan, the agent
# built with AddressSanitizer + UBSan, and a report from it fails the script that caused it.
# The positive control runs test/run-all on this very script with a controller whose agent is
# told (STATION_TEST_AGENT_CANARY, honoured by the sanitizer build only) to read past a heap
# block: run-all must fail that inner script and print the report.
#
# In a build without sanitizers: the controller ignores STATION_TEST_HOST_AGENT.
. "$(dirname "$0")/lib.sh"

ASAN_AGENT=$BUILD/src/agent/station-agent-asan

# The inner run of the positive control: start the agent with the canary; the workspace's
# create is expected to fail (its agent dies with the report). The script's own results pass:
# only run-all's check of the report directory can fail it.
if [[ -n ${STATION_TEST_CANARY_INNER:-} ]]; then
	STATION_TEST_AGENT_CANARY=heap-overflow require_controller
	api -q POST /v1/workspaces '{}'
	ok "canary: create answered $STATUS"
	exit 0
fi

# the pid's executable, through /proc (the agent is not dumpable: root reads it all the same)
exe_of() {
	readlink "/proc/$1/exe" 2>/dev/null
}

t_ignored_without_sanitizers() {
	STATION_TEST_HOST_AGENT=/nonexistent/station-agent-asan require_controller
	new_ws ws || return 1
	run_cmd "$ws" 'echo hello' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq hello "$(j .stdout)" stdout
	local pid
	pid=$(agent_pid "$ws")
	assert_match '^[0-9]+$' "$pid" "agent pid" || return 1
	assert_eq "$(readlink -f "$AGENT")" "$(exe_of "$pid")" "the host agent is the static one"
	assert_eq "" "$(grep -o 'libasan[^ ]*' "/proc/$pid/maps" | head -n 1)" "no libasan mapped"
}

t_sanitized_agent() {
	require_controller
	new_ws ws || return 1
	run_cmd "$ws" 'echo hello; echo oops >&2; exit 3' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 3 "$(j .exitCode)" exitCode
	assert_eq hello "$(j .stdout)" stdout
	local pid
	pid=$(agent_pid "$ws")
	assert_match '^[0-9]+$' "$pid" "agent pid" || return 1
	assert_eq "$(readlink -f "$ASAN_AGENT")" "$(exe_of "$pid")" "the host agent is the sanitized one"
	assert_match 'libasan' "$(grep -o 'libasan[^ ]*' "/proc/$pid/maps" | head -n 1)" "libasan mapped"
	# its options came with it: reports go to this script's directory
	assert_contains "log_path=$STATION_TEST_SANITIZER_DIR/asan" \
		"$(tr '\0' '\n' <"/proc/$pid/environ" | grep '^ASAN_OPTIONS=')" "the agent's ASAN_OPTIONS"
}

t_report_fails_the_script() {
	local out rc
	out=$(STATION_TEST_CANARY_INNER=1 STATION_TEST_JOBS=1 \
		"$SRC/test/run-all" "$BUILD" --integration "$TEST_NAME" 2>&1)
	rc=$?
	assert_eq 1 "$rc" "run-all's exit status" || diag "$out"
	assert_contains "ok canary: create answered" "$out" "the inner script ran" || return 1
	assert_match "not ok $TEST_NAME: sanitizer report asan\.[0-9]+" "$out" "the failure named"
	assert_contains "ERROR: AddressSanitizer: heap-buffer-overflow" "$out" "the report printed"
	assert_contains "sanitizer_canary" "$out" "the report's stack names the canary"
	assert_eq "1 passed, 1 failed" "$(tail -n 1 <<<"$out")" "run-all's summary"
}

if [[ -z ${STATION_TEST_SANITIZE:-} ]]; then
	run_test "STATION_TEST_HOST_AGENT is ignored without sanitizers" t_ignored_without_sanitizers
	skip "the host agent is the sanitized one" "not a sanitizer build"
	skip "an agent's sanitizer report fails its script" "not a sanitizer build"
	exit 0
fi
if [[ ! -x $ASAN_AGENT || ${STATION_TEST_HOST_AGENT:-} != "$ASAN_AGENT" ]]; then
	not_ok "the host agent is the sanitized one" \
		"$ASAN_AGENT not built or not in STATION_TEST_HOST_AGENT (run by test/run-all?)"
	exit 1
fi
run_test "the host agent is the sanitized one" t_sanitized_agent
stop_controller TERM
run_test "an agent's sanitizer report fails its script" t_report_fails_the_script
