#!/bin/bash
# Attack: stop a workspace from inside by signalling its agent. As a container's PID 1 the agent
# ignores SIGTERM/SIGINT whose sender is inside the sandbox (si_pid set), but container root can
# forge the sender: rt_sigqueueinfo / rt_tgsigqueueinfo take any si_pid, 0 ("from outside the
# pid namespace") included, with a negative si_code (SI_QUEUE, SI_MESGQ...). The agent accepts a
# stopping signal only with SI_USER or SI_KERNEL and, as PID 1, si_pid 0; on the host (host
# adapter) only from outside its own process tree.
#
# The probe (test/helpers/signal-probe, in the busybox image) runs as container root. Positive
# controls: the same forged signal reaches a child of the probe that waits for it (si_pid 0
# arrives), and the runtime's kill from the host still stops the agent; on the host, a kill
# from this script (outside the agent's tree) stops it.
. "$(dirname "$0")/../integration/container-lib.sh"

SIGNAL_PROBE=/usr/local/bin/signal-probe

ws_state_is() {
	api -q GET "/v1/workspaces/$1"
	[[ $(j .state) == "$2" ]]
}

# ignored_count WS: how many stop signals the agent logged as ignored.
ignored_count() {
	grep -c 'ignored a stop signal' "$ROOT/workspaces/$1/agent.log" 2>/dev/null || true
}

t_forgery_reaches_a_receiver() {
	local how
	for how in queue tgqueue mesgq; do
		run_cmd "$WS" "$SIGNAL_PROBE control 15 $how" || return 1
		assert_eq exited "$(j .status)" "control ($how) status"
		local code=-1
		[[ $how == mesgq ]] && code=-3
		assert_eq "received signo=15 pid=0 code=$code" "$(j .stdout | tr -d '\n')" \
			"what the probe's child received ($how)"
	done
}

# forge_and_wait WS ARGS...: one forged signal to PID 1 from inside, then waits until the agent
# has logged it as ignored (standard signals pending twice coalesce: one at a time).
forge_and_wait() {
	local ws=$1 before
	shift
	before=$(ignored_count "$ws")
	run_cmd "$ws" "$SIGNAL_PROBE forge 1 $*" || return 1
	assert_eq "forge=ok" "$(j .stdout | tr -d '\n')" "the kernel delivered the forgery ($*)" ||
		return 1
	wait_for -t 10 eval '(( $(ignored_count "$ws") > before ))' ||
		_fail "the agent did not log the forged signal ($*) as ignored"
}

t_forged_stop_signals_ignored() {
	local init
	init=$(container_init_pid "$WS")
	forge_and_wait "$WS" 15 queue || return 1
	forge_and_wait "$WS" 2 queue || return 1
	forge_and_wait "$WS" 15 tgqueue || return 1
	forge_and_wait "$WS" 15 mesgq || return 1
	api -q GET "/v1/workspaces/$WS"
	assert_eq ready "$(j .state)" "workspace state after the forged signals"
	run_cmd "$WS" 'echo still here' || return 1
	assert_eq 'still here' "$(j .stdout | tr -d '\n')" "a later exec"
	assert_eq "$init" "$(container_init_pid "$WS")" "the same agent is the container's init"
}

# Positive control: SIGTERM from the host through the runtime stops the agent.
t_runtime_kill_stops() {
	runtime_cli kill "$WS" TERM || return 1
	wait_for -t 10 ws_state_is "$WS" stopped ||
		_fail "SIGTERM from the runtime did not stop the workspace (state $(j .state))"
}

# host_signal WS SENDER: a command of the host workspace signals its agent with SENDER (shell
# text; $A is the agent's pid) and stays alive until the agent logged the signal as ignored, so
# the agent can tell the sender is of its tree (bounded by the command's timeout).
host_signal() {
	local log=$ROOT/workspaces/$1/agent.log
	run_cmd "$1" "A=$AGENT; n=\$(grep -c 'ignored a stop' $log); $2; \
		while [ \$(grep -c 'ignored a stop' $log) -le \$n ]; do sleep 0.05; done; echo ignored" \
		'.timeoutMs = 10000' || return 1
	assert_eq "exited ignored" "$(j .status) $(j .stdout | tr -d '\n')" "$2"
}

# The host adapter's agent: its own commands (its tree) cannot stop it, by kill or forgery.
t_host_tree_ignored() {
	local ws
	new_ws ws || return 1
	AGENT=$(agent_pid "$ws")
	[[ -n $AGENT ]] || {
		_fail "no agent for $ws"
		return 1
	}
	host_signal "$ws" 'kill -TERM $PPID' || return 1
	host_signal "$ws" 'kill -INT $A' || return 1
	host_signal "$ws" "(setsid sh -c 'kill -TERM $AGENT; exec sleep 10' &)" || return 1
	host_signal "$ws" "$SIGNAL_PROBE_BIN forge \$A 15 >/dev/null" || return 1
	run_cmd "$ws" 'echo still here' || return 1
	assert_eq 'still here' "$(j .stdout | tr -d '\n')" "a later exec on the host"
	assert_eq "$AGENT" "$(agent_pid "$ws")" "the same host agent"
	# control: from outside its tree (this script), SIGTERM stops it
	kill -TERM "$AGENT"
	wait_for -t 10 ws_state_is "$ws" stopped ||
		_fail "SIGTERM from outside the tree did not stop the host agent (state $(j .state))"
}

container_prereqs
[[ -x $SIGNAL_PROBE_BIN ]] || _container_skip_all "$SIGNAL_PROBE_BIN not built"
require_container_controller
new_cws WS || exit 1
run_test "control: a forged si_pid=0 signal reaches a receiver inside the sandbox" \
	t_forgery_reaches_a_receiver
run_test "forged SIGTERM/SIGINT to PID 1 (si_pid 0, negative si_code) leave the workspace ready" \
	t_forged_stop_signals_ignored
run_test "control: SIGTERM from the runtime (outside) stops the agent" t_runtime_kill_stops
run_test "host agent: SIGTERM, SIGINT and forgeries from its own commands are ignored; from outside stop it" \
	t_host_tree_ignored
