#!/bin/bash
# The core of the container suite with runsc (gVisor; issue 3: "runsc if it runs here"): exec,
# the timeout tree kill, cancel, the posture, the limits as runsc keeps them, and delete
# cleanup. What differs from runc and crun is in docs/operations.md, "runsc (gVisor)", and in
# each test's comment.
#
# Environment: STATION_TEST_RUNSC (default runsc) names the runsc binary or a path to one.
# Skips (with the reason) only when that runsc is not installed; a runsc that is installed but
# cannot start a sandbox here fails.
CONTAINER_RUNTIME=${STATION_TEST_RUNSC:-runsc}
. "$(dirname "$0")/container-lib.sh"

# runsc's flags are Go flags: `list -q` is not one of them.
RUNTIME_LIST_QUIET=-quiet

require_container_controller
new_cws WS '{"cpus":1,"memoryMb":256,"pidsLimit":128}' || exit 1
RUNSC_NAME=$(basename "$RUNTIME_BIN")

# host_cg CONTROLLER ID [SUB]: the workspace group W (or W/SUB) in a host hierarchy.
host_cg() {
	echo "/sys/fs/cgroup/$1/station-sandbox/$2${3:+/$3}"
}

# in_ws_count WS PATTERN: how many processes inside the sandbox have PATTERN in their command
# line (gVisor's processes are not host processes: ask from inside).
in_ws_count() {
	run_cmd "$1" "ps -o args | grep -F -- '$2' | grep -vc -e grep -e 'ps -o'" >/dev/null || return 1
	j .stdout | tr -d '\n'
}

in_ws_none() {
	[[ $(in_ws_count "$1" "$2") == 0 ]]
}

# The sandbox (sentry, gofer) is in W/c on the host, where W holds the limits; pids.max of W is
# the sandbox's host task budget (256 + 12 per process of pidsLimit), not pidsLimit itself.
t_runtime_is_runsc() {
	api -q GET /v1/worker
	assert_eq "$RUNSC_NAME" "$(j .runtime)" "worker runtime"
	api -q GET "/v1/workspaces/$WS"
	assert_eq "$RUNSC_NAME" "$(j .runtime)" "workspace runtime"
	api -q GET /v1/ready
	assert_match '^runsc version ' "$(j '.checks[] | select(.name == "runtime") | .message')" \
		"ready runtime check"
	runtime_knows "$WS" || _fail "runsc does not list $WS"
	assert_eq running "$(runtime_cli state "$WS" 2>/dev/null | jq -r .status)" "runsc state"
	local init procs
	init=$(container_init_pid "$WS")
	procs=$(tr '\n' ' ' <"$(host_cg memory "$WS" c)/cgroup.procs" 2>/dev/null)
	assert_match "(^| )$init( |\$)" "$procs" "the sandbox (pid $init) in W/c (memory)"
	assert_match "(^| )$init( |\$)" "$(tr '\n' ' ' <"$(host_cg pids "$WS" c)/cgroup.procs")" \
		"the sandbox in W/c (pids)"
	assert_eq $((256 << 20)) "$(cat "$(host_cg memory "$WS")/memory.limit_in_bytes")" \
		"W memory.limit_in_bytes"
	assert_eq 100000 "$(cat "$(host_cg cpu "$WS")/cpu.cfs_quota_us")" "W cpu.cfs_quota_us"
	assert_eq $((256 + 12 * 128)) "$(cat "$(host_cg pids "$WS")/pids.max")" "W pids.max"
	assert_le 1 "$(cat "$(host_cg pids "$WS")/pids.current")" "W pids.current"
}

# The sandbox's own user namespace is gVisor's (the application sees the full range); on the
# host the gofer writes as the mapped ids: container root is host uid 300000.
t_exec() {
	run_cmd "$WS" 'echo out; echo err >&2; cat /proc/self/uid_map; touch $HOME/by-root; exit 3' ||
		return 1
	assert_eq exited "$(j .status)" status
	assert_eq 3 "$(j .exitCode)" exitCode
	assert_match "^out"$'\n'" +0 +0 +4294967295\$" "$(j .stdout)" stdout
	assert_eq '"err\n"' "$(j '.stderr | tojson')" stderr
	# gVisor's cgroupfs has no cpuacct and no memory high-water mark: both read 0
	assert_eq 0 "$(j .cpuMs)" cpuMs
	assert_eq 0 "$(j .peakMemoryBytes)" peakMemoryBytes
	assert_eq "$HOST_ID_BASE:$HOST_ID_BASE" \
		"$(stat -c %u:%g "$ROOT/workspaces/$WS/home/by-root" 2>/dev/null)" \
		"host owner of a file container root made in HOME"
	# each run is a group of the sandbox's own cgroupfs
	run_cmd "$WS" 'grep memory /proc/self/cgroup' || return 1
	assert_match '^[0-9]+:memory:/[pr]-[0-9]+$' "$(j .stdout | tr -d '\n')" "run's cgroup"
}

# No freezer in gVisor's cgroupfs: the kill is cgroup_kill's kill-every-member loop.
t_timeout_tree() {
	local init sibling run
	init=$(container_init_pid "$WS")
	run_start "$WS" "$(json_cmd 'sleep 20.0882')" || return 1
	sibling=$RUN
	run_start "$WS" "$(json_cmd 'setsid sh -c "sleep 1000.88" & sleep 1000.88' '.timeoutMs = 3000')" ||
		return 1
	run=$RUN
	# both sleeps (the daemonized one and the main one) are there to find: waited for, as the
	# run is reported started before its processes have exec'd
	wait_for -t 5 eval '[[ $(in_ws_count "$WS" "sleep 1000.88") == 2 ]]' ||
		_fail "'sleep 1000.88' processes before the timeout: $(in_ws_count "$WS" 'sleep 1000.88'), not 2"
	run_wait "$WS" "$run" 20 || return 1
	assert_eq timed_out "$(j .status)" status
	wait_for -t 3 in_ws_none "$WS" 'sleep 1000.88' ||
		_fail "left running: $(in_ws_count "$WS" 'sleep 1000.88')"
	run_get "$WS" "$sibling"
	assert_eq running "$(j .status)" "sibling still running after the timeout"
	run_wait "$WS" "$sibling" 20 || return 1
	assert_eq exited "$(j .status)" "sibling status"
	assert_eq 0 "$(j .exitCode)" "sibling exitCode"
	assert_eq "$init" "$(container_init_pid "$WS")" "sandbox pid after the timeout"
	run_cmd "$WS" 'echo next' || return 1
	assert_eq next "$(j .stdout | tr -d '\n')" "next command"
}

t_cancel_tree() {
	run_start "$WS" "$(json_cmd 'setsid sh -c "sleep 1000.87" & sleep 1000.87')" || return 1
	local run=$RUN
	wait_for -t 5 eval '[[ $(in_ws_count "$WS" "sleep 1000.87") == 2 ]]' ||
		_fail "expected two 'sleep 1000.87' processes"
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 200 cancel || return 1
	run_wait "$WS" "$run" 20 || return 1
	assert_eq cancelled "$(j .status)" status
	wait_for -t 3 in_ws_none "$WS" 'sleep 1000.87' || _fail "left running after cancel"
}

# gVisor's posture: the same capability set, no_new_privs and our seccomp profile (runsc
# --oci-seccomp) inside the sentry; the root filesystem is served by the gofer (9p); the
# masked /proc paths do not exist in gVisor's procfs; its /proc/<pid>/status has no NoNewPrivs
# line (runsc applies process.noNewPrivileges; not observable through the probe). The agent's
# memory is not readable; its environ is (gVisor checks only file modes there) and holds nothing
# secret. The agent's socket is a host socket the gofer will not even show inside.
t_posture() {
	probe "$WS" uid caps mounts masked fds ifaces unshare proc1 || return 1
	assert_probe uid_map "0 0 4294967295"
	assert_probe CapEff 00000000000005fb
	assert_probe CapBnd 00000000000005fb
	assert_probe CapInh 0000000000000000
	assert_probe NoNewPrivs '<missing>'
	assert_probe Seccomp 2
	assert_probe mount./ 9p
	assert_probe mount./tmp tmpfs
	assert_probe mount./home/node 9p
	assert_probe mountopts./run/station/agent/station-agent ro
	assert_probe masked./proc/kcore absent
	assert_probe masked./proc/keys absent
	assert_probe fds 0,1,2
	assert_probe ifaces lo
	assert_probe unshare_user EPERM
	assert_probe proc1_environ readable
	run_cmd "$WS" 'cat /proc/1/mem >/dev/null 2>&1 && echo readable || echo denied' || return 1
	assert_eq denied "$(j .stdout | tr -d '\n')" "/proc/1/mem"
	run_cmd "$WS" 'ls /sys/fs/cgroup; ls /run/station' || return 1
	assert_eq "cpu memory agent" "$(j .stdout | xargs)" \
		"the sandbox's cgroupfs; no host cgroup is bound in"
}

# Control for the seccomp denial: an allow-all profile lets unshare -U through to gVisor.
t_unconfined_control() {
	local ws prof=$PROFILES/unconfined.json
	echo '{"defaultAction":"SCMP_ACT_ALLOW"}' >"$prof"
	new_cws ws "$(jq -nc --arg p "$prof" '{seccompProfile: $p}')" || return 1
	probe "$ws" unshare || return 1
	assert_probe unshare_user ok
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 delete
}

# pidsLimit is the sandbox's RLIMIT_NPROC (the sentry counts its own processes): a fork loop
# stops below it and the workspace keeps working.
t_pids_limit() {
	local ws
	new_cws ws '{"pidsLimit":32}' || return 1
	run_cmd "$ws" 'i=0; while :; do sleep 1000.61 & i=$((i + 1)); echo $i; done' \
		'.timeoutMs = 30000' || return 1
	local count
	count=$(j .stdout | grep . | tail -n 1)
	note "forks before the limit stopped them: $count (pidsLimit 32)"
	assert_eq exited "$(j .status)" "status (the shell gives up when fork fails)"
	assert_contains "can't fork" "$(j .stderr)" stderr
	assert_match '^[0-9]+$' "$count" "fork count" || return 1
	assert_le 1 "$count" "forks that succeeded"
	assert_le "$count" 31 "forks that succeeded (below pidsLimit 32)"
	wait_for -t 5 in_ws_none "$ws" 'sleep 1000.61' || _fail "sleepers left running"
	run_cmd "$ws" 'sleep 0.01 & wait; echo next' || return 1
	assert_eq next "$(j .stdout | tr -d '\n')" "next command"
	api -q GET "/v1/workspaces/$ws"
	assert_eq ready "$(j .state)" "workspace state"
	api -q DELETE "/v1/workspaces/$ws"
}

# memoryMb holds on the host, for the whole sandbox: past it the host's OOM killer takes the
# sentry, so the workspace stops (its runs lost), never the host; a restart brings it back.
# (runc and crun kill only the command: there the limit is per process tree.)
t_memory_limit() {
	local ws
	new_cws ws '{"memoryMb":64}' || return 1
	run_cmd "$ws" 'dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1' '.timeoutMs = 30000'
	assert_eq lost "$(j .status)" "run status"
	api -q GET "/v1/workspaces/$ws"
	assert_eq stopped "$(j .state)" "workspace state"
	assert_eq "the workspace agent exited" "$(j .reason)" "workspace reason"
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 restart || return 1
	run_cmd "$ws" 'echo next' || return 1
	assert_eq next "$(j .stdout | tr -d '\n')" "next command after the restart"
	api -q DELETE "/v1/workspaces/$ws"
}

# The agent's socket is a host socket (runsc --host-uds=create): a controller restarted after
# SIGKILL reconnects to it and adopts the sandbox, a run started before it is still running.
t_controller_restart_adopts() {
	local init run
	init=$(container_init_pid "$WS")
	run_start "$WS" "$(json_cmd 'sleep 3; echo done')" || return 1
	run=$RUN
	stop_controller KILL
	restart_controller || return 1
	run_wait "$WS" "$run" 30 || return 1
	assert_eq exited "$(j .status)" "run across the controller restart"
	assert_eq done "$(j .stdout | tr -d '\n')" "its stdout"
	assert_eq "$init" "$(container_init_pid "$WS")" "the same sandbox"
	run_cmd "$WS" 'echo next' || return 1
	assert_eq next "$(j .stdout | tr -d '\n')" "next command"
}

t_delete_cleanup() {
	local ws
	new_cws ws || return 1
	run_start "$ws" "$(json_cmd 'sleep 1000.89')" || return 1
	wait_for -t 5 eval '[[ $(in_ws_count "$ws" "sleep 1000.89") == 1 ]]' ||
		_fail "the command never started"
	assert_present "$ws"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 DELETE || return 1
	assert_clean "$ws"
}

run_test "runsc: the sandbox runs in the workspace cgroup, which holds the limits" t_runtime_is_runsc
run_test "runsc: exec with both streams and code; HOME files owned by the mapped host uid" t_exec
run_test "runsc: timeout kills the tree, not the sibling nor the sandbox" t_timeout_tree
run_test "runsc: cancel kills the tree" t_cancel_tree
run_test "runsc: posture (caps, no_new_privs, seccomp, mounts, fds, lo, PID 1)" t_posture
run_test "runsc: control: an allow-all profile allows unshare -U" t_unconfined_control
run_test "runsc: a fork loop stops below pidsLimit, the workspace keeps working" t_pids_limit
run_test "runsc: past memoryMb the sandbox is OOM-killed on the host, restart recovers" \
	t_memory_limit
run_test "runsc: a controller restarted after SIGKILL adopts the sandbox" \
	t_controller_restart_adopts
run_test "runsc: DELETE removes mounts, cgroups, runtime state, directory" t_delete_cleanup
