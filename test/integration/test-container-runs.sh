#!/bin/bash
# Everything the host adapter guarantees for runs holds inside a container (issue 3 item 7):
# every terminal status with its fields, both streams, accounting, a timeout that kills the
# whole tree (daemonized descendants included) but neither a sibling run nor the container.
. "$(dirname "$0")/container-lib.sh"

require_container_controller
new_cws WS || exit 1

t_exited_both_streams() {
	run_cmd "$WS" 'echo out; echo err >&2; exit 3' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 3 "$(j .exitCode)" exitCode
	assert_eq null "$(j .signal)" signal
	assert_eq '"out\n"' "$(j '.stdout | tojson')" stdout
	assert_eq '"err\n"' "$(j '.stderr | tojson')" stderr
	assert_eq 4 "$(j .stdoutBytes)" stdoutBytes
	assert_eq 4 "$(j .stderrBytes)" stderrBytes
	assert_eq false "$(j .truncated)" truncated
	assert_match '^[0-9]+$' "$(j .durationMs)" durationMs
	assert_match '^[0-9]+$' "$(j .cpuMs)" cpuMs
	assert_match '^[1-9][0-9]*$' "$(j .peakMemoryBytes)" peakMemoryBytes
	note "echo run: durationMs=$(j .durationMs) cpuMs=$(j .cpuMs) peakMemoryBytes=$(j .peakMemoryBytes)"
}

t_environment() {
	run_cmd "$WS" 'echo "$HOME|$PWD|$(pwd)|$PATH"; id -u' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq "/home/node|/home/node/workspace|/home/node/workspace|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"$'\n'"0" \
		"$(j .stdout)" "HOME, PWD, cwd, PATH, uid"
}

# The command's processes are the container's: on the host they run as the mapped uid.
t_runs_inside() {
	run_start "$WS" "$(json_cmd 'sleep 1000.7391')" || return 1
	local run=$RUN pid
	wait_for -t 5 pgrep -f 'sleep 1000.7391' >/dev/null || _fail "the command never started"
	pid=$(pgrep -f 'sleep 1000.7391' | head -n 1)
	assert_eq "$HOST_ID_BASE" "$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")" "host uid of the command"
	grep -qF "$WS" "/proc/$pid/cgroup" || _fail "the command is not in the workspace's cgroup: $(tr '\n' ' ' <"/proc/$pid/cgroup")"
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 200 cancel
}

t_killed() {
	run_cmd "$WS" 'kill -9 $$' || return 1
	assert_eq killed "$(j .status)" status
	assert_eq 9 "$(j .signal)" signal
	assert_eq null "$(j .exitCode)" exitCode
	assert_eq false "$(j .oomKilled)" oomKilled
	run_cmd "$WS" 'kill -TERM $$' || return 1
	assert_eq killed "$(j .status)" "status (TERM)"
	assert_eq 15 "$(j .signal)" "signal (TERM)"
}

t_timeout_tree() {
	local init_before sibling run
	init_before=$(container_init_pid "$WS")
	assert_match '^[0-9]+$' "$init_before" "container init pid" || return 1
	run_start "$WS" "$(json_cmd 'sleep 30.0772')" || return 1
	sibling=$RUN
	wait_for -t 5 pgrep -f 'sleep 30.0772' >/dev/null || _fail "sibling never started"

	run_start "$WS" "$(json_cmd 'setsid sh -c "sleep 1000.77" & sleep 1000.77' '.timeoutMs = 3000')" ||
		return 1
	run=$RUN
	# control: both sleeps (the daemonized one and the main one) are there to find
	wait_for -t 5 eval '(( $(process_count "sleep 1000.77") >= 2 ))' ||
		_fail "expected two 'sleep 1000.77' processes, found $(process_count 'sleep 1000.77')"
	run_wait "$WS" "$run" 20 || return 1
	assert_eq timed_out "$(j .status)" status
	assert_eq null "$(j .exitCode)" exitCode
	assert_eq 3000 "$(j .timeoutMs)" timeoutMs
	wait_for -t 3 no_process 'sleep 1000.77' ||
		_fail "left running: $(pgrep -af 'sleep 1000.77' | tr '\n' ';')"

	run_get "$WS" "$sibling"
	assert_eq running "$(j .status)" "sibling still running after the timeout"
	pgrep -f 'sleep 30.0772' >/dev/null || _fail "sibling process is gone"
	run_wait "$WS" "$sibling" 45 || return 1
	assert_eq exited "$(j .status)" "sibling status"
	assert_eq 0 "$(j .exitCode)" "sibling exitCode"

	# the container was not stopped: same init, workspace ready, next command works
	assert_eq "$init_before" "$(container_init_pid "$WS")" "container init pid after the timeout"
	assert_eq running "$(runtime_cli state "$WS" 2>/dev/null | jq -r .status)" "runtime status"
	api -q GET "/v1/workspaces/$WS"
	assert_eq ready "$(j .state)" "workspace state"
	run_cmd "$WS" 'echo next' || return 1
	assert_eq exited "$(j .status)" "next command"
	assert_eq next "$(j .stdout | tr -d '\n')" "next command's stdout"
}

t_exit_kills_leftovers() {
	run_cmd "$WS" 'setsid sh -c "sleep 1000.74" >/dev/null 2>&1 & echo started' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq '"started\n"' "$(j '.stdout | tojson')" stdout
	wait_for -t 3 no_process 'sleep 1000.74' ||
		_fail "left running: $(pgrep -af 'sleep 1000.74' | tr '\n' ';')"
}

t_cancel() {
	run_start "$WS" "$(json_cmd 'setsid sh -c "sleep 1000.78" & sleep 1000.78')" || return 1
	local run=$RUN
	assert_eq running "$(j .status)" "status before cancel"
	wait_for -t 5 eval '(( $(process_count "sleep 1000.78") >= 2 ))' ||
		_fail "expected two 'sleep 1000.78' processes, found $(process_count 'sleep 1000.78')"
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 200 cancel || return 1
	assert_eq cancelled "$(j .status)" "status in the cancel response"
	assert_eq null "$(j .exitCode)" exitCode
	wait_for -t 3 no_process 'sleep 1000.78' ||
		_fail "left running: $(pgrep -af 'sleep 1000.78' | tr '\n' ';')"
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 409 "a second cancel"
	run_cmd "$WS" 'echo after-cancel' || return 1
	assert_eq after-cancel "$(j .stdout | tr -d '\n')" "next command"
}

t_failed_to_start() {
	run_cmd "$WS" 'echo never' '.cwd = "/nonexistent-station-dir"' || return 1
	assert_eq failed_to_start "$(j .status)" status
	assert_eq null "$(j .exitCode)" exitCode
	assert_contains /nonexistent-station-dir "$(j .reason)" reason
	assert_eq '' "$(j .stdout)" stdout
	# control: an existing directory of the container (not of the host) works as cwd
	run_cmd "$WS" 'pwd' '.cwd = "/opt/old"' || return 1
	assert_eq exited "$(j .status)" "status with cwd /opt/old"
	assert_eq /opt/old "$(j .stdout | tr -d '\n')" "pwd in /opt/old"
}

t_accounting() {
	run_cmd "$WS" 'i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done; head -c 8000000 /dev/zero | tail -c 1 >/dev/null' || return 1
	assert_eq exited "$(j .status)" status
	assert_match '^[0-9]+$' "$(j .cpuMs)" cpuMs
	assert_match '^[0-9]+$' "$(j .peakMemoryBytes)" peakMemoryBytes
	assert_le 1 "$(j .cpuMs)" "cpuMs of a busy loop"
	note "busy loop: durationMs=$(j .durationMs) cpuMs=$(j .cpuMs) peakMemoryBytes=$(j .peakMemoryBytes)"
}

# A command (root in the container) signalling PID 1 cannot stop the agent; the runtime, from
# outside the sandbox, still can (positive control).
t_agent_ignores_inside_signals() {
	local ws
	new_cws ws || return 1
	run_cmd "$ws" 'kill -TERM 1; kill -INT 1; echo sent' || return 1
	assert_eq exited "$(j .status)" "status of the killing command"
	assert_eq 'sent' "$(j .stdout | tr -d '\n')" stdout
	run_cmd "$ws" 'echo still here' || return 1
	assert_eq 'still here' "$(j .stdout | tr -d '\n')" "the agent still answers"
	api -q GET "/v1/workspaces/$ws"
	assert_eq ready "$(j .state)" "workspace state"
	runtime_cli kill "$ws" TERM || return 1
	wait_for -t 10 ws_state_is "$ws" stopped || _fail "SIGTERM from the runtime did not stop it"
	api -q DELETE "/v1/workspaces/$ws"
}

ws_state_is() {
	api -q GET "/v1/workspaces/$1"
	[[ $(j .state) == "$2" ]]
}

run_test "exited with its code and both streams" t_exited_both_streams
run_test "HOME, working directory, PATH, uid 0 inside" t_environment
run_test "a command runs as the mapped uid in the workspace cgroup" t_runs_inside
run_test "killed by a signal" t_killed
run_test "timeout kills the tree, not the sibling run nor the container" t_timeout_tree
run_test "leftovers of a finished command are killed" t_exit_kills_leftovers
run_test "cancel kills the tree" t_cancel
run_test "failed_to_start for a missing cwd" t_failed_to_start
run_test "cpuMs and peakMemoryBytes reported" t_accounting
run_test "signals from inside the sandbox cannot stop the agent (PID 1)" t_agent_ignores_inside_signals
