#!/bin/bash
# The core of the container suite with crun (issue 3: "runc and crun both pass"): exec, the
# timeout tree kill, the posture, and delete cleanup. On a hybrid cgroup host crun runs in a
# private mount namespace without the unified mount (DESIGN §6). The whole suite runs with crun
# too: STATION_TEST_RUNTIME=crun test/run-all BUILD --integration container.
CONTAINER_RUNTIME=crun
. "$(dirname "$0")/container-lib.sh"

require_container_controller
new_cws WS '{"cpus":1,"memoryMb":256,"pidsLimit":128}' || exit 1

t_runtime_is_crun() {
	api -q GET /v1/worker
	assert_eq crun "$(j .runtime)" "worker runtime"
	api -q GET "/v1/workspaces/$WS"
	assert_eq crun "$(j .runtime)" "workspace runtime"
	api -q GET /v1/ready
	assert_match '^crun version ' "$(j '.checks[] | select(.name == "runtime") | .message')" \
		"ready runtime check"
	runtime_knows "$WS" || _fail "crun does not list $WS"
	assert_eq running "$(runtime_cli state "$WS" 2>/dev/null | jq -r .status)" "crun state"
}

t_exec() {
	run_cmd "$WS" 'echo out; echo err >&2; cat /proc/self/uid_map; exit 3' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 3 "$(j .exitCode)" exitCode
	assert_match "^out"$'\n'" +0 +$HOST_ID_BASE +65536\$" "$(j .stdout)" stdout
	assert_eq '"err\n"' "$(j '.stderr | tojson')" stderr
	assert_match '^[0-9]+$' "$(j .cpuMs)" cpuMs
	assert_match '^[1-9][0-9]*$' "$(j .peakMemoryBytes)" peakMemoryBytes
}

t_timeout_tree() {
	local init sibling run
	init=$(container_init_pid "$WS")
	run_start "$WS" "$(json_cmd 'sleep 30.0882')" || return 1
	sibling=$RUN
	wait_for -t 5 pgrep -f 'sleep 30.0882' >/dev/null || _fail "sibling never started"
	run_start "$WS" "$(json_cmd 'setsid sh -c "sleep 1000.88" & sleep 1000.88' '.timeoutMs = 3000')" ||
		return 1
	run=$RUN
	wait_for -t 5 eval '(( $(process_count "sleep 1000.88") >= 2 ))' ||
		_fail "expected two 'sleep 1000.88' processes, found $(process_count 'sleep 1000.88')"
	run_wait "$WS" "$run" 20 || return 1
	assert_eq timed_out "$(j .status)" status
	wait_for -t 3 no_process 'sleep 1000.88' ||
		_fail "left running: $(pgrep -af 'sleep 1000.88' | tr '\n' ';')"
	run_get "$WS" "$sibling"
	assert_eq running "$(j .status)" "sibling still running after the timeout"
	run_wait "$WS" "$sibling" 45 || return 1
	assert_eq exited "$(j .status)" "sibling status"
	assert_eq 0 "$(j .exitCode)" "sibling exitCode"
	assert_eq "$init" "$(container_init_pid "$WS")" "container init pid after the timeout"
	run_cmd "$WS" 'echo next' || return 1
	assert_eq next "$(j .stdout | tr -d '\n')" "next command"
}

t_posture() {
	probe "$WS" uid caps mounts fds ifaces unshare proc1 || return 1
	assert_probe uid_map "0 $HOST_ID_BASE 65536"
	assert_probe CapEff 00000000000005fb
	assert_probe CapBnd 00000000000005fb
	assert_probe NoNewPrivs 1
	assert_probe Seccomp 2
	assert_probe mount./ overlay
	assert_probe mount./tmp tmpfs
	assert_match "/workspaces/$WS/home\$" "$(pval mountroot./home/node)" "/home/node bind"
	assert_probe mountopts./run/station/agent/station-agent ro
	assert_probe fds 0,1,2
	assert_probe ifaces lo
	assert_probe unshare_user EPERM
	assert_probe proc1_environ denied
}

# Control for the posture's seccomp denial, with crun.
t_unconfined_control() {
	local ws prof=$PROFILES/unconfined.json
	echo '{"defaultAction":"SCMP_ACT_ALLOW"}' >"$prof"
	new_cws ws "$(jq -nc --arg p "$prof" '{seccompProfile: $p}')" || return 1
	probe "$ws" unshare || return 1
	assert_probe unshare_user ok
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 delete
}

t_delete_cleanup() {
	local ws
	new_cws ws || return 1
	run_start "$ws" "$(json_cmd 'sleep 1000.89')" || return 1
	wait_for -t 5 pgrep -f 'sleep 1000.89' >/dev/null || _fail "the command never started"
	assert_present "$ws"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 DELETE || return 1
	assert_clean "$ws"
	no_process 'sleep 1000.89' || _fail "left running: $(pgrep -af 'sleep 1000.89' | tr '\n' ';')"
}

run_test "crun: the worker and workspace name crun as their runtime" t_runtime_is_crun
run_test "crun: exec with both streams, code, accounting, inside the user namespace" t_exec
run_test "crun: timeout kills the tree, not the sibling nor the container" t_timeout_tree
run_test "crun: posture (uid map, caps, no_new_privs, seccomp, mounts, fds, lo)" t_posture
run_test "crun: control: an allow-all profile allows unshare -U" t_unconfined_control
run_test "crun: DELETE removes mounts, cgroups, runtime state, directory" t_delete_cleanup
