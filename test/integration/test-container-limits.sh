#!/bin/bash
# run-all: serial: measures the CPU share a quota leaves a burner, which other scripts beside it would skew
# Workspace limits inside a container (issue 3 item 7, DESIGN §5): a fork bomb stops at
# pidsLimit and the workspace keeps working; a memory hog is OOM-killed and its run says so; a
# CPU burner under cpus 0.5 is throttled. Each beside its positive control (the same command
# within the limit, or without one). CPU shares are a ratio of two measurements of this run.
. "$(dirname "$0")/container-lib.sh"

require_container_controller
new_cws LIMITED '{"cpus":0.5,"memoryMb":64,"pidsLimit":32}' || exit 1
new_cws FREE || exit 1

# Forks sleepers until fork fails, printing the count after each success.
FORK_LOOP='i=0; while :; do sleep 1000.61 & i=$((i + 1)); echo $i; done'

t_pids_limit() {
	run_cmd "$LIMITED" "$FORK_LOOP" '.timeoutMs = 20000' || return 1
	local count
	count=$(j .stdout | grep . | tail -n 1)
	note "forks before the pids limit stopped them: $count (pidsLimit 32)"
	assert_eq exited "$(j .status)" "status (the shell gives up when fork fails)"
	assert_contains "can't fork" "$(j .stderr)" stderr
	assert_match '^[0-9]+$' "$count" "fork count" || return 1
	assert_le 1 "$count" "forks that succeeded"
	assert_le "$count" 31 "forks that succeeded (below pidsLimit 32)"
	wait_for -t 60 no_process 'sleep 1000.61' ||
		_fail "sleepers left running: $(process_count 'sleep 1000.61')"
	# the workspace still runs the next command, and can fork again
	run_cmd "$LIMITED" 'sleep 0.01 & wait; echo next' || return 1
	assert_eq exited "$(j .status)" "next command"
	assert_eq next "$(j .stdout | tr -d '\n')" "next command's stdout"
	api -q GET "/v1/workspaces/$LIMITED"
	assert_eq ready "$(j .state)" "workspace state"
}

# Control: without a pids limit, 40 sleepers fork fine.
t_pids_control() {
	run_cmd "$FREE" 'i=0; while [ $i -lt 40 ]; do sleep 1000.62 & i=$((i + 1)); done; echo $i' \
		'.timeoutMs = 20000' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq 40 "$(j .stdout | tr -d '\n')" "forks"
	wait_for -t 60 no_process 'sleep 1000.62' || _fail "sleepers left running"
}

# The shell itself holds the bytes (a variable), so the OOM killer's victim is the run's main
# process.
hog() {
	printf 'x=$(head -c %s /dev/zero | tr "\\0" a); echo ${#x}' "$1"
}

t_memory_hog() {
	run_cmd "$LIMITED" "$(hog 200m)" '.timeoutMs = 30000' || return 1
	note "200 MB hog under 64 MB: status=$(j .status) signal=$(j .signal) peakMemoryBytes=$(j .peakMemoryBytes)"
	assert_eq killed "$(j .status)" status
	assert_eq 9 "$(j .signal)" signal
	assert_eq true "$(j .oomKilled)" oomKilled
	assert_eq null "$(j .exitCode)" exitCode
	assert_le "$(j .peakMemoryBytes)" $((64 << 20)) "peakMemoryBytes within the limit"
	run_cmd "$LIMITED" 'echo next' || return 1
	assert_eq next "$(j .stdout | tr -d '\n')" "next command"
}

t_memory_control() {
	run_cmd "$LIMITED" "$(hog 16m)" '.timeoutMs = 30000' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq false "$(j .oomKilled)" oomKilled
	assert_eq 16777216 "$(j .stdout | tr -d '\n')" "bytes held"
	note "16 MB under 64 MB: peakMemoryBytes=$(j .peakMemoryBytes)"
}

BURN='timeout 2 sh -c "while :; do :; done"'

# share WS: the burner's cpuMs as a percentage of its wall time.
share() {
	run_cmd "$1" "$BURN" '.timeoutMs = 30000' || return 1
	local cpu wall
	cpu=$(j .cpuMs)
	wall=$(j .durationMs)
	[[ $cpu =~ ^[0-9]+$ && $wall =~ ^[1-9][0-9]*$ ]] || {
		_fail "cpuMs '$cpu', durationMs '$wall'"
		return 1
	}
	SHARE=$((cpu * 100 / wall))
	note "$2: cpuMs=$cpu durationMs=$wall share=$SHARE%"
}

# nr_throttled WS: how often the kernel throttled the workspace cgroup (it holds the quota).
nr_throttled() {
	local d
	d=$(cgroup_dirs "$1" | grep -m1 "/cpu/station-sandbox/$1\$")
	awk '$1 == "nr_throttled" {print $2}' "$d/cpu.stat" 2>/dev/null
}

# The kernel's own account: the limited workspace's group has the quota and was throttled
# during the burn; the unlimited one has none and never is.
t_cpu_throttled() {
	local d before after
	d=$(cgroup_dirs "$LIMITED" | grep -m1 "/cpu/station-sandbox/$LIMITED\$")
	assert_eq 50000 "$(cat "$d/cpu.cfs_quota_us" 2>/dev/null)" "cpu.cfs_quota_us of $d"
	assert_eq 100000 "$(cat "$d/cpu.cfs_period_us" 2>/dev/null)" "cpu.cfs_period_us of $d"
	before=$(nr_throttled "$LIMITED")
	share "$LIMITED" "cpus 0.5" || return 1
	after=$(nr_throttled "$LIMITED")
	assert_le "$SHARE" 60 "CPU share under cpus 0.5 (%)"
	assert_match '^[0-9]+$' "$before" "nr_throttled before" || return 1
	note "nr_throttled of the limited workspace: $before -> $after"
	assert_le $((before + 1)) "$after" "nr_throttled grew during the burn"
	before=$(nr_throttled "$FREE")
	share "$FREE" "no limit" || return 1
	assert_eq "$before" "$(nr_throttled "$FREE")" "nr_throttled of the unlimited workspace"
}

# The ratio of the two shares: the unlimited burner gets a whole CPU when the host has one to
# give. On a host busy with other work it cannot, whatever we do: three tries, then a skip
# that says so rather than a failure that is the host's.
t_cpu_ratio() {
	local limited best=0 i
	share "$LIMITED" "cpus 0.5" || return 1
	limited=$SHARE
	for i in 1 2 3; do
		share "$FREE" "no limit, try $i" || return 1
		((SHARE > best)) && best=$SHARE
		((best >= 80)) && break
	done
	assert_le "$limited" 60 "CPU share under cpus 0.5 (%)"
	if ((best < 80)); then
		note "host busy: load $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
		return 2
	fi
	assert_le 80 "$best" "CPU share without a limit (%)"
}

run_cpu_ratio() {
	_t_failed=0
	t_cpu_ratio
	local rc=$?
	if [[ $rc -eq 2 && $_t_failed -eq 0 ]]; then
		skip "CPU share ratio: <= 60% under cpus 0.5, >= 80% without" \
			"host too busy to give an unlimited burner 80% of a CPU"
	elif [[ $rc -eq 0 && $_t_failed -eq 0 ]]; then
		ok "CPU share ratio: <= 60% under cpus 0.5, >= 80% without"
	else
		not_ok "CPU share ratio: <= 60% under cpus 0.5, >= 80% without"
	fi
}

# The limits live on the root-owned workspace group and are set again when restart makes a new
# container.
t_limits_survive_restart() {
	api -q POST "/v1/workspaces/$LIMITED/restart"
	assert_status 200 restart || return 1
	local cpu mem pids
	cpu=$(cgroup_dirs "$LIMITED" | grep -m1 "/cpu/station-sandbox/$LIMITED\$")
	mem=$(cgroup_dirs "$LIMITED" | grep -m1 "/memory/station-sandbox/$LIMITED\$")
	pids=$(cgroup_dirs "$LIMITED" | grep -m1 "/pids/station-sandbox/$LIMITED\$")
	assert_eq 50000 "$(cat "$cpu/cpu.cfs_quota_us" 2>/dev/null)" "cpu.cfs_quota_us"
	assert_eq $((64 << 20)) "$(cat "$mem/memory.limit_in_bytes" 2>/dev/null)" "memory.limit_in_bytes"
	assert_eq 32 "$(cat "$pids/pids.max" 2>/dev/null)" "pids.max"
	# nothing inside can raise them: the group is root-owned and not in the container
	assert_eq 0 "$(stat -c %u "$mem/memory.limit_in_bytes" 2>/dev/null)" "owner of memory.limit_in_bytes"
	run_cmd "$LIMITED" 'for f in /run/station/cgroup/*/memory.limit_in_bytes; do
		echo 1073741824 >$f 2>/dev/null && echo raised || echo refused; done;
		cat /run/station/cgroup/*/memory.limit_in_bytes' || return 1
	note "inside, W/c memory.limit_in_bytes: $(j .stdout | tr '\n' ' ')"
	assert_eq $((64 << 20)) "$(cat "$mem/memory.limit_in_bytes" 2>/dev/null)" \
		"memory.limit_in_bytes of the workspace group after the attempt"
	run_cmd "$LIMITED" "$(hog 200m)" '.timeoutMs = 30000' || return 1
	assert_eq killed "$(j .status)" "200 MB hog after restart: status"
	assert_eq true "$(j .oomKilled)" "200 MB hog after restart: oomKilled"
}

run_test "fork bomb stops below pidsLimit 32, workspace keeps working" t_pids_limit
run_test "control: 40 forks without a pids limit" t_pids_control
run_test "memory hog (200 MB under 64 MB): killed, signal 9, oomKilled" t_memory_hog
run_test "control: 16 MB under 64 MB exits 0" t_memory_control
run_test "CPU burner throttled under cpus 0.5 (cfs quota, nr_throttled)" t_cpu_throttled
run_cpu_ratio
run_test "limits are set again on restart and cannot be raised from inside" t_limits_survive_restart
