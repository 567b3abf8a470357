#!/bin/bash
# 1 GiB of output goes through with bounded memory: the controller's and the agent's peak
# resident size (VmHWM) stay under 64 MiB, and the counts are exact.
. "$(dirname "$0")/lib.sh"

BOUND_KB=$((64 * 1024))

require_controller
new_ws WS || exit 1

t_one_gib() {
	local agent
	agent=$(agent_pid "$WS")
	assert_match '^[0-9]+$' "$agent" "agent pid" || return 1
	run_cmd "$WS" 'head -c 1073741824 /dev/zero; echo done >&2' '.timeoutMs = 600000' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq 1073741824 "$(j .stdoutBytes)" stdoutBytes
	assert_eq true "$(j .truncated)" truncated
	assert_eq base64 "$(j .encoding)" encoding
	head -c 65536 /dev/zero >"$TMP/expected"
	jq -j .stdout <<<"$BODY" | base64 -d >"$TMP/got-head"
	jq -j .stdoutTail <<<"$BODY" | base64 -d >"$TMP/got-tail"
	assert_files_eq "$TMP/expected" "$TMP/got-head" "stdout head"
	assert_files_eq "$TMP/expected" "$TMP/got-tail" "stdoutTail"
	assert_eq "$(printf 'done\n' | base64)" "$(j .stderr)" stderr

	local c_kb a_kb
	c_kb=$(vmhwm_kb "$CONTROLLER_PID")
	a_kb=$(vmhwm_kb "$agent")
	note "VmHWM after 1 GiB of output: controller ${c_kb:-?} KiB, agent ${a_kb:-?} KiB" \
		"(bound $BOUND_KB KiB)"
	if [[ -n ${STATION_TEST_SANITIZE:-} ]]; then
		note "sanitizer build ($STATION_TEST_SANITIZE): memory bound not asserted"
		return 0
	fi
	assert_le "${c_kb:-x}" "$BOUND_KB" "controller VmHWM (KiB)"
	assert_le "${a_kb:-x}" "$BOUND_KB" "agent VmHWM (KiB)"
}

run_test "1 GiB of output with bounded controller and agent memory" t_one_gib
