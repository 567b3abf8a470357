#!/bin/bash
# station-sandbox code and context on host workspaces (the host's python3-ipykernel and
# python3-matplotlib): state kept between invocations in the workspace's one context, code from
# stdin, a plot written as a PNG file, a raised error's exit status and traceback, a timeout, ^C
# interrupting the cell with the context's variables kept, context ls/restart/rm.
. "$(dirname "$0")/lib.sh"

if ! /usr/bin/python3 -c 'import ipykernel, matplotlib' 2>/dev/null; then
	skip "$TEST_NAME" "python3-ipykernel and python3-matplotlib are needed (scripts/install-deps)"
	exit 0
fi
require_controller
new_ws WS || exit 1
OUT=$TMP/out
mkdir -p "$OUT"

t_state() {
	local out
	out=$(cli code "$WS" 'x = 41' 2>&1) || { _fail "first cell: $out"; return 1; }
	out=$(cli code "$WS" 'print("seen", x); x + 1' 2>&1) || { _fail "second cell: $out"; return 1; }
	assert_eq $'seen 41\n42' "$out" "the second cell's stdout and value" || return 1
	out=$(printf 'print(x * 2)\n' | cli code "$WS" - 2>&1)
	assert_eq 82 "$out" "a cell from stdin" || return 1
	assert_eq 1 "$(cli context ls --json "$WS" | jq '[.[] | select(.language == "python")] | length')" \
		"python contexts in the workspace (one kept)"
}
run_test "code keeps one context per workspace and language: x = 41, then x + 1 is 42" t_state

t_plot() {
	local out png
	# bbox_inches None: the inline backend's default ("tight") crops the figure
	out=$(cli code --out-dir "$OUT" "$WS" '%config InlineBackend.print_figure_kwargs = {"bbox_inches": None}
import matplotlib.pyplot as plt
fig = plt.figure(figsize=(4, 3), dpi=50)
plt.plot([1, 2, 3])
plt.show()' 2>&1) || { _fail "plot cell: $out"; return 1; }
	png=$(sed -n 's/^\[image\/png [0-9]* bytes: \(.*\)\]$/\1/p' <<<"$out")
	assert_match "^$OUT/out-e-[a-z0-9]+-0\.png$" "$png" "where the CLI said the image went ($out)" || return 1
	assert_eq "89504e470d0a1a0a" "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" "the PNG signature" || return 1
	# IHDR: width and height, big-endian, at bytes 16-23: figsize 4x3 at 50 dpi
	assert_eq "200 150" "$(/usr/bin/python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(); print(*struct.unpack(">II", d[16:24]))' "$png")" "the image's size"
}
run_test "code writes a matplotlib plot as out-<eid>-<n>.png and says where" t_plot

t_error() {
	local rc
	cli code "$WS" '1 / 0' >"$TMP/err.out" 2>"$TMP/err.err"
	rc=$?
	assert_eq 1 "$rc" "exit status of a cell that raised" || return 1
	assert_contains "ZeroDivisionError: division by zero" "$(cat "$TMP/err.err")" "the traceback on stderr" || return 1
	assert_contains "----> 1 1 / 0" "$(cat "$TMP/err.err")" "the traceback's line" || return 1
	# Positive control: the next cell runs, exit 0.
	cli code "$WS" 'x' >/dev/null 2>&1
	assert_eq 0 "$?" "a cell after the error"
}
run_test "a cell raising ZeroDivisionError exits 1 with the traceback on stderr" t_error

t_timeout() {
	local rc out
	cli code --timeout 1s "$WS" 'while True: pass' >/dev/null 2>"$TMP/to.err"
	rc=$?
	assert_eq 124 "$rc" "exit status of a cell that timed out ($(tail -n 1 "$TMP/to.err"))" || return 1
	out=$(cli code "$WS" 'x' 2>&1)
	assert_eq 41 "$out" "x after the timeout"
}
run_test "code --timeout 1s on an endless loop exits 124, the context keeps x" t_timeout

t_sigint() {
	local pid rc out
	# The CLI itself in the background (not a function's subshell), so that $! is its pid.
	STATION_SOCKET=$SOCK "$CLI_BIN" code "$WS" 'print("looping", flush=True)
while True: pass' >"$TMP/int.out" 2>"$TMP/int.err" &
	pid=$!
	wait_for -t 60 grep -q looping "$TMP/int.out" || { _fail "the loop never printed; stderr: $(cat "$TMP/int.err")"; kill "$pid"; return 1; }
	kill -INT "$pid"
	wait "$pid"
	rc=$?
	assert_eq 130 "$rc" "exit status after ^C ($(tail -n 1 "$TMP/int.err"))" || return 1
	assert_contains "KeyboardInterrupt" "$(cat "$TMP/int.err")" "the interrupted cell's traceback" || return 1
	out=$(cli code "$WS" 'x' 2>&1)
	assert_eq 41 "$out" "x after the interrupt"
}
run_test "^C (SIGINT) interrupts the cell through the API: exit 130, x still there" t_sigint

t_context_cmds() {
	local cid out
	cid=$(cli context ls --json "$WS" | jq -r '.[0].id')
	assert_match '^c-' "$cid" "the context's id" || return 1
	assert_contains "$cid" "$(cli context ls "$WS")" "context ls" || return 1
	cli context restart "$WS" "$cid" >/dev/null || { _fail "context restart failed"; return 1; }
	cli code --context "$cid" "$WS" 'x' >/dev/null 2>"$TMP/ne.err"
	assert_eq 1 "$?" "x after a restart: NameError" || return 1
	assert_contains "NameError" "$(cat "$TMP/ne.err")" "the error" || return 1
	cli context rm "$WS" "$cid" || { _fail "context rm failed"; return 1; }
	assert_eq 0 "$(cli context ls --json "$WS" | jq length)" "contexts after rm" || return 1
	cli context rm "$WS" "$cid" 2>/dev/null
	assert_eq 1 "$?" "rm of a context that is gone"
}
run_test "context ls, restart (variables gone), rm" t_context_cmds
((_n_fail == 0))
