#!/usr/bin/env bash
# run-all: slow: kernels start, a 50 MB cell, an OOM and a controller restart take minutes
# Code contexts on host workspaces (docs/api.md, "Code contexts"): a Jupyter kernel the agent
# supervises, cells as runs, results read back and stored once.
source "$(dirname "$0")/lib.sh"

if ! /usr/bin/python3 -c 'import ipykernel, jupyter_client' 2>/dev/null; then
	skip "$TEST_NAME" "python3-ipykernel is not installed (scripts/install-deps)"
	exit 0
fi
require_controller

WS=
CTX=
new_ws WS || exit 1

# ctx_new VAR [WS] [BODY]: a python context; VAR its id.
ctx_new() {
	local _ws=${2:-$WS} _body=${3:-'{"language":"python"}'}
	api -q POST "/v1/workspaces/$_ws/contexts" "$_body"
	assert_eq 201 "$STATUS" "create context: $(_short "$BODY")" || return 1
	assert_eq idle "$(j .state)" "a new context is idle" || return 1
	printf -v "$1" '%s' "$(j .id)"
}

# cell CTX CODE [TIMEOUT_MS] [WS]: executes and waits (60 s); BODY is the execution.
cell() {
	local body
	body=$(jq -nc --arg c "$2" --argjson t "${3:-30000}" '{code: $c, timeoutMs: $t}')
	api -q POST "/v1/workspaces/${4:-$WS}/contexts/$1/execute?waitMs=60000" "$body"
	assert_eq 201 "$STATUS" "execute: $(_short "$BODY")"
}

t_state() {
	ctx_new CTX || return 1
	cell "$CTX" 'x = 41' || return 1
	assert_eq ok "$(j .status)" "x = 41" || return 1
	cell "$CTX" 'x + 1' || return 1
	assert_eq ok "$(j .status)" "x + 1" || return 1
	assert_eq 42 "$(j '.results[0].data["text/plain"]')" "the second cell sees x" || return 1
	assert_eq execute_result "$(j '.results[0].type')" "an execute_result" || return 1
	assert_eq 2 "$(j .executionCount)" "execution count"
	api -q GET "/v1/workspaces/$WS/contexts/$CTX"
	assert_eq 2 "$(j .executionCount)" "the context counts its cells"
	api -q GET "/v1/workspaces/$WS/services"
	assert_eq 0 "$(j '.services | length')" "the kernel's service is not listed"
}

t_stdout() {
	cell "$CTX" 'print("hello"); import sys; print("oops", file=sys.stderr)' || return 1
	assert_eq ok "$(j .status)" "status" || return 1
	assert_eq hello "$(j .stdout)" "stdout" || return 1
	assert_eq 6 "$(j .stdoutBytes)" "stdoutBytes"
	assert_eq 5 "$(j .stderrBytes)" "stderrBytes"
	local eid
	eid=$(j .id)
	api -q GET "/v1/workspaces/$WS/contexts/$CTX/executions/$eid/output"
	assert_contains "hello" "$BODY" "the execution's output stream"
}

t_png() {
	cell "$CTX" $'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()' ||
		return 1
	assert_eq ok "$(j .status)" "status" || return 1
	local png=$TMP/plot.png
	j '[.results[] | .data["image/png"] | select(. != null)][0]' | base64 -d >"$png"
	assert_eq 89504e470d0a1a0a "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" \
		"PNG signature" || return 1
	local size
	size=$(stat -c %s "$png")
	((size > 1000)) || _fail "the PNG is $size bytes"
}

t_error() {
	cell "$CTX" '1 / 0' || return 1
	assert_eq error "$(j .status)" "status" || return 1
	assert_eq ZeroDivisionError "$(j .error.name)" "error name" || return 1
	assert_contains "ZeroDivisionError" "$(j '.error.traceback | join("\n")')" "traceback"
}

t_interrupt() {
	local body eid
	body=$(jq -nc --arg c 'while True: pass' '{code: $c, timeoutMs: 60000}')
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/execute" "$body"
	assert_eq 201 "$STATUS" "execute" || return 1
	eid=$(j .id)
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/execute" '{"code":"1"}'
	assert_eq 409 "$STATUS" "a busy context refuses a second cell" || return 1
	assert_eq busy "$(j .error.code)" "busy"
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/interrupt"
	assert_eq 200 "$STATUS" "interrupt: $(_short "$BODY")" || return 1
	assert_eq "$eid" "$(j .id)" "the interrupted execution" || return 1
	assert_eq interrupted "$(j .status)" "status" || return 1
	cell "$CTX" 'x' || return 1
	assert_eq 41 "$(j '.results[0].data["text/plain"]')" "x survives the interrupt"
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/interrupt"
	assert_eq 409 "$STATUS" "nothing to interrupt"
}

t_timeout_tree() {
	# a duration of this script's own: other scripts beside it run their own sleeps
	local dur=1000.$$
	local code=$'import subprocess\np = subprocess.Popen(["sleep", "'$dur$'"])\nimport time\ntime.sleep(60)'
	local mark="^sleep ${dur//./\\.}\$"
	no_process "$mark" || _fail "a sleep $dur runs before the test"
	cell "$CTX" "$code" 1500 || return 1
	assert_eq timed_out "$(j .status)" "status" || return 1
	no_process "$mark" || _fail "sleep $dur survived the timeout: $(pgrep -af "$mark")"
	cell "$CTX" 'x' || return 1
	assert_eq 41 "$(j '.results[0].data["text/plain"]')" "x survives the timeout"
}

# A process the cell detached (its parent exited: the agent reaped it, not the kernel) is in
# the kernel's cgroup still, and goes with the cell's timeout too.
t_timeout_detached() {
	local dur=1001.$$
	local code=$'import subprocess\nsubprocess.run(["sh", "-c", "sleep '$dur$' >/dev/null 2>&1 &"])\nimport time\ntime.sleep(60)'
	local mark="^sleep ${dur//./\\.}\$"
	no_process "$mark" || _fail "a sleep $dur runs before the test"
	cell "$CTX" "$code" 1500 || return 1
	assert_eq timed_out "$(j .status)" "status" || return 1
	no_process "$mark" || _fail "the detached sleep $dur survived the timeout: $(pgrep -af "$mark")"
	cell "$CTX" 'x' || return 1
	assert_eq 41 "$(j '.results[0].data["text/plain"]')" "x survives the timeout"
}

t_big_output() {
	cell "$CTX" $'import sys\nline = "y" * 999 + "\\n"\nfor _ in range(50000): sys.stdout.write(line)' 120000 ||
		return 1
	# 50 MB through the pipe may take past the 60 s wait on a loaded machine: waited for again
	local eid tries=0
	eid=$(j .id)
	while [[ $(j .status) == running ]] && ((tries++ < 3)); do
		api -q GET "/v1/workspaces/$WS/contexts/$CTX/executions/$eid?waitMs=60000"
	done
	assert_eq ok "$(j .status)" "status" || return 1
	assert_eq 50000000 "$(j .stdoutBytes)" "every byte counted" || return 1
	assert_eq true "$(j .truncated)" "bounded" || return 1
	local kept
	kept=$(($(j '.stdout' | wc -c) + $(j '.stdoutTail // ""' | wc -c)))
	((kept < 1000000)) || _fail "kept $kept bytes"
}

t_two_contexts() {
	local other
	ctx_new other || return 1
	cell "$other" 'x' || return 1
	assert_eq error "$(j .status)" "x is not defined in another context" || return 1
	assert_eq NameError "$(j .error.name)" "NameError"
	api -q DELETE "/v1/workspaces/$WS/contexts/$other"
	assert_eq 204 "$STATUS" "delete"
	api -q GET "/v1/workspaces/$WS/contexts/$other"
	assert_eq 404 "$STATUS" "deleted"
}

t_restart_ctx() {
	local c
	ctx_new c || return 1
	cell "$c" 'y = 7' || return 1
	api -q POST "/v1/workspaces/$WS/contexts/$c/restart"
	assert_eq 200 "$STATUS" "restart: $(_short "$BODY")" || return 1
	assert_eq idle "$(j .state)" "idle after restart"
	cell "$c" 'y' || return 1
	assert_eq NameError "$(j .error.name)" "variables gone after a restart"
	api -q DELETE "/v1/workspaces/$WS/contexts/$c"
}

t_oom() {
	local ws c
	new_ws ws '{"memoryMb":160}' || return 1
	ctx_new c "$ws" || return 1
	cell "$c" $'blocks = []\nwhile True: blocks.append(bytearray(16 << 20))' 60000 "$ws" ||
		return 1
	assert_eq error "$(j .status)" "status: $(_short "$BODY")" || return 1
	assert_eq OOMKilled "$(j .error.name)" "error name" || return 1
	api -q GET "/v1/workspaces/$ws/contexts/$c"
	assert_eq dead "$(j .state)" "the context is dead" || return 1
	assert_contains "out of memory" "$(j .reason)" "its reason"
	# a dead kernel: its CPU time from the report of its end, no memory
	assert_eq "number 0" "$(j '"\(.cpuMs | type) \(.memoryBytes)"')" "cpuMs and memoryBytes"
	api -q POST "/v1/workspaces/$ws/contexts/$c/execute" '{"code":"1"}'
	assert_eq 409 "$STATUS" "a dead context refuses cells"
	api -q POST "/v1/workspaces/$ws/contexts/$c/restart"
	assert_eq 200 "$STATUS" "a restart revives it"
}

# The workspace's memory reaches its limit through a command (a run: a cgroup of its own) that
# the OOM killer ends; then the kernel is killed by a signal: that is no OOM of the kernel.
t_not_oom() {
	local ws c
	new_ws ws '{"memoryMb":160}' || return 1
	ctx_new c "$ws" || return 1
	run_cmd "$ws" "python3 -c 'open(\"/proc/self/oom_score_adj\", \"w\").write(\"1000\"); b = bytearray(400 << 20)'" || return 1
	assert_eq "true" "$(j .oomKilled)" "the command is OOM-killed: $(_short "$BODY")" || return 1
	cell "$c" $'import os, signal\nos.kill(os.getpid(), signal.SIGKILL)' 30000 "$ws" || return 1
	assert_eq error "$(j .status)" "status: $(_short "$BODY")" || return 1
	assert_eq KernelDied "$(j .error.name)" "error name" || return 1
	api -q GET "/v1/workspaces/$ws/contexts/$c"
	assert_eq "dead the kernel exited" "$(j '"\(.state) \(.reason)"')" "the context"
	api -q DELETE "/v1/workspaces/$ws"
}

# cpuMs and memoryBytes: the kernel's service attempt's cgroup as the agent reports it.
t_usage() {
	local before after
	api -q GET "/v1/workspaces/$WS/contexts/$CTX"
	assert_eq 200 "$STATUS" "get: $(_short "$BODY")" || return 1
	assert_eq "number true" "$(j '"\(.cpuMs | type) \(.memoryBytes > 0)"')" \
		"a live kernel's cpuMs and memoryBytes: $(_short "$BODY")" || return 1
	before=$(j .cpuMs)
	cell "$CTX" $'import time\nt = time.process_time()\nwhile time.process_time() - t < 1.1: pass' || return 1
	assert_eq ok "$(j .status)" "the CPU-bound cell" || return 1
	api -q GET "/v1/workspaces/$WS/contexts/$CTX"
	after=$(j .cpuMs)
	((after - before >= 1000)) || _fail "cpuMs $before -> $after after 1.1 s of CPU in the kernel"
	api -q GET "/v1/workspaces/$WS/contexts"
	assert_eq number "$(jq -r --arg c "$CTX" '.contexts[] | select(.id == $c) | .cpuMs | type' <<<"$BODY")" \
		"the list's cpuMs" || return 1
	# the workspace's usage: the kernel under contexts, never as its hidden service
	api -q GET "/v1/workspaces/$WS/usage"
	assert_eq 200 "$STATUS" "usage: $(_short "$BODY")" || return 1
	assert_eq true "$(jq -r --arg c "$CTX" '[.contexts[] | select(.id == $c) | .cpuMs >= 1000] == [true]' <<<"$BODY")" \
		"usage's contexts: $(_short "$BODY")" || return 1
	assert_eq "" "$(j '[.services[].name | select(startswith("ctx-"))] | join(",")')" \
		"usage's services hold no kernel"
}

# kernelCpuMs and kernelMemoryBytes: the kernel's CPU time during the cell (the agent's usage
# report asked as the cell starts and as it ends) and its memory in use at the end; the cell's
# cpuMs is its run's (the exec client's).
t_kernel_usage() {
	cell "$CTX" $'import time; t=time.process_time()\nwhile time.process_time()-t<1: pass' || return 1
	assert_eq ok "$(j .status)" "the CPU-bound cell: $(_short "$BODY")" || return 1
	assert_eq "number number" "$(j '"\(.kernelCpuMs | type) \(.cpuMs | type)"')" \
		"kernelCpuMs and cpuMs: $(_short "$BODY")" || return 1
	(($(j .kernelCpuMs) >= 900)) || _fail "kernelCpuMs $(j .kernelCpuMs) after 1 s of CPU"
	(($(j .cpuMs) < 500)) || _fail "the run's cpuMs $(j .cpuMs) (the exec client's)"
	note "1 s of CPU: kernelCpuMs $(j .kernelCpuMs), the run's cpuMs $(j .cpuMs)"
	cell "$CTX" 'x = bytearray(200*1024*1024)' || return 1
	assert_eq ok "$(j .status)" "the 200 MiB cell: $(_short "$BODY")" || return 1
	(($(j '.kernelMemoryBytes // 0') >= 200 << 20)) ||
		_fail "kernelMemoryBytes $(j .kernelMemoryBytes) with 200 MiB held"
	note "200 MiB held: kernelMemoryBytes $(j .kernelMemoryBytes)"
	cell "$CTX" '1+1' || return 1
	assert_eq number "$(j '.kernelCpuMs | type')" "1+1's kernelCpuMs: $(_short "$BODY")" || return 1
	(($(j .kernelCpuMs) < 500)) || _fail "kernelCpuMs $(j .kernelCpuMs) for 1+1"
	api -q GET "/v1/workspaces/$WS/contexts/$CTX/executions/$(j .id)"
	assert_eq number "$(j '.kernelCpuMs | type')" "a GET of the execution: $(_short "$BODY")"
	cell "$CTX" 'del x' || return 1
}

t_tenant() {
	api -q GET "/v1/workspaces/$WS/contexts/c-doesnotexist"
	assert_eq 404 "$STATUS" "unknown context"
	api -q GET "/v1/workspaces/$WS/contexts/$CTX/executions"
	assert_eq 200 "$STATUS" "executions" || return 1
	local n
	n=$(j '.executions | length')
	((n >= 5)) || _fail "only $n executions listed"
	api -q POST "/v1/workspaces/$WS/contexts" '{"language":"cobol"}'
	assert_eq 400 "$STATUS" "unknown language"
	api -q POST "/v1/workspaces/$WS/services" '{"name":"ctx-mine","command":"sleep 1"}'
	assert_eq 400 "$STATUS" "ctx- names are kept"
}

t_paused() {
	local ws c
	new_ws ws || return 1
	ctx_new c "$ws" || return 1
	api -q POST "/v1/workspaces/$ws/pause"
	assert_eq 200 "$STATUS" "pause: $(_short "$BODY")" || return 1
	api -q POST "/v1/workspaces/$ws/contexts/$c/execute" '{"code":"1"}'
	assert_eq 409 "$STATUS" "paused" || return 1
	assert_eq paused "$(j .error.code)" "the code"
	api -q POST "/v1/workspaces/$ws/resume"
}

t_controller_kill() {
	local body eid
	body=$(jq -nc --arg c $'import time\nprint("before", flush=True)\ntime.sleep(4)\nprint("after")\nz = 5' '{code: $c}')
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/execute" "$body"
	assert_eq 201 "$STATUS" "execute" || return 1
	eid=$(j .id)
	stop_controller KILL
	sleep 5 # the cell ends while the controller is away: the point of the test
	restart_controller || return 1
	api -q GET "/v1/workspaces/$WS/contexts/$CTX/executions/$eid?waitMs=30000"
	assert_eq ok "$(j .status)" "recorded after the restart: $(_short "$BODY")" || return 1
	assert_eq $'before\nafter' "$(j .stdout)" "its output" || return 1
	assert_eq null "$(j .kernelCpuMs)" "kernelCpuMs across a controller restart (no reading at the start)"
	api -q GET "/v1/workspaces/$WS/contexts/$CTX/executions"
	assert_eq 1 "$(j "[.executions[] | select(.id == \"$eid\")] | length")" "recorded once"
	cell "$CTX" 'z' || return 1
	assert_eq 5 "$(j '.results[0].data["text/plain"]')" "the kernel survived the controller"
}

ws_state_is() {
	api -q GET "/v1/workspaces/$1"
	[[ $(j .state) == "$2" ]]
}

# A context's kernel does not keep its workspace awake (a hidden service), a running cell does
# (a run): a cell sleeping past idleTimeoutMs ends ok, then the workspace idles out.
t_idle() {
	local ws c
	new_ws ws '{"idleTimeoutMs":3000}' || return 1
	ctx_new c "$ws" || return 1
	cell "$c" $'import time\ntime.sleep(6)\n7' 30000 "$ws" || return 1
	assert_eq "ok 7" "$(j '"\(.status) \(.results[0].data["text/plain"])"')" \
		"a cell longer than the idle timeout: $(_short "$BODY")" || return 1
	wait_for -t 60 ws_state_is "$ws" stopped || {
		_fail "still $(j .state) 60 s after the cell: the kernel keeps the workspace awake"
		return 1
	}
	assert_match '^idle: ' "$(j .reason)" "stopped for being idle"
}

measure() {
	local t0 t1 t2 c
	t0=${EPOCHREALTIME/./}
	api -q POST "/v1/workspaces/$WS/contexts" '{"language":"python"}'
	t1=${EPOCHREALTIME/./}
	c=$(j .id)
	cell "$c" '1+1' >/dev/null
	t2=${EPOCHREALTIME/./}
	note "context start $(((t1 - t0) / 1000)) ms, 1+1 round trip $(((t2 - t1) / 1000)) ms"
	api -q DELETE "/v1/workspaces/$WS/contexts/$c"
}

run_test "context: x = 41 then x + 1 gives 42" t_state
run_test "context: stdout and stderr as a run's" t_stdout
run_test "context: a matplotlib chart comes back as a PNG" t_png
run_test "context: ZeroDivisionError is an error with its traceback" t_error
run_test "context: interrupt, and the next cell sees x" t_interrupt
run_test "context: a timed-out cell leaves no process behind" t_timeout_tree
run_test "context: a timed-out cell leaves no detached process behind" t_timeout_detached
run_test "context: 50 MB of output bounded and counted" t_big_output
run_test "context: two contexts do not share variables" t_two_contexts
run_test "context: restart gives a fresh kernel" t_restart_ctx
run_test "context: a kernel OOM is reported and the context dead" t_oom
run_test "context: a kernel killed after the workspace's memory peaked is no OOM" t_not_oom
run_test "context: cpuMs and memoryBytes of the kernel, cpuMs rising after a CPU-bound cell" t_usage
run_test "context: kernelCpuMs and kernelMemoryBytes are the kernel's during the cell" t_kernel_usage
run_test "context: lookups, limits and reserved names" t_tenant
run_test "context: a paused workspace answers 409 paused" t_paused
run_test "context: a controller SIGKILL during a cell loses nothing" t_controller_kill
run_test "context: the kernel keeps no workspace awake, a running cell does" t_idle
measure
exit $((_n_fail > 0))
