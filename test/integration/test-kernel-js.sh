#!/bin/bash
# station-kernel-js on its own, as the controller runs it in a workspace: `serve DIR` (one node
# process, one vm context), `exec DIR N TIMEOUT_MS` (one cell: its output on our stdout/stderr,
# DIR/cells/N/result.json), `interrupt DIR`. State survives from cell to cell and across an
# interrupt; errors carry their name and traceback; `while (true) {}` is interruptible, also
# after an await; a timed-out cell leaves no child process; DIR's sockets work however deep DIR
# is. No controller: node only.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KERNEL=$SRC/src/kernel/station-kernel-js
# as deep as a workspace's HOME may put it: DIR/kernel.sock is longer than a unix socket's
# address may be (108 bytes)
DIR=$ROOT/home-$(printf '%0100d' 0)/.station/contexts/c-1
OUT=$TMP/out

if ! command -v node >/dev/null; then
	skip kernel-js "node is not installed"
	exit 0
fi

# cell N CODE [TIMEOUT_MS]: runs one cell to its end (bounded); its stdout in $OUT.stdout, its
# stderr in $OUT.stderr, its result.json in RESULT, exec's exit status in RC.
cell() {
	mkdir -p "$DIR/cells/$1"
	printf '%s' "$2" >"$DIR/cells/$1/code"
	timeout 60 "$KERNEL" exec "$DIR" "$1" "${3:-20000}" >"$OUT.stdout" 2>"$OUT.stderr"
	RC=$?
	RESULT=$(cat "$DIR/cells/$1/result.json" 2>/dev/null)
}
r() { jq -r "$1" <<<"$RESULT"; }

kernel_pid() { cat "$DIR/kernel.pid" 2>/dev/null; }

# The probe (cell 0) first, as the controller starts it: before the kernel made DIR.
start_kernel() {
	rm -rf "$DIR"
	timeout 60 "$KERNEL" exec "$DIR" 0 20000 &
	local probe=$!
	wait_for -t 20 test -e "$DIR/exec.pid" || { _fail "the probe did not start"; return 1; }
	"$KERNEL" serve "$DIR" >"$TMP/kernel.out" 2>"$TMP/kernel.err" &
	wait "$probe"
	RC=$?
	RESULT=$(cat "$DIR/cells/0/result.json" 2>/dev/null)
	assert_eq "0 ok" "$RC $(r .status)" "readiness probe (cell 0, its directory made by exec): $RESULT" || return 1
}

test_start() {
	start_kernel || return 1
	assert_le 109 "${#DIR}" "DIR's length (a deep DIR)"
	assert_eq 700 "$(stat -c %a "$DIR")" "DIR's mode"
	assert_eq 600 "$(stat -c %a "$DIR/kernel.sock")" "kernel.sock's mode"
	assert_eq "$(kernel_pid)" "$(pgrep -f -- "$KERNEL serve $DIR" | head -n 1)" "kernel.pid names the kernel"
}

test_state() {
	cell 1 'let x = 41'
	assert_eq "0 ok 1" "$RC $(r '"\(.status) \(.executionCount)"')" "let x = 41: $RESULT" || return 1
	cell 2 'x + 1'
	assert_eq "ok 2" "$(r '"\(.status) \(.executionCount)"')" "x + 1: $RESULT" || return 1
	assert_eq '[{"type":"execute_result","data":{"text/plain":"42"}}]' "$(jq -c .results <<<"$RESULT")" "x + 1's result"
	cell 3 'process.stdout.write("raw\n"); console.log("out", x); console.error("err", x + 2); var v = "s"; function f() { return v + x }'
	assert_eq "ok" "$(r .status)" "output cell: $RESULT"
	assert_eq $'raw\nout 41' "$(cat "$OUT.stdout")" "the cell's stdout"
	assert_eq "err 43" "$(cat "$OUT.stderr")" "the cell's stderr"
	assert_eq "[]" "$(jq -c .results <<<"$RESULT")" "a cell ending in a declaration has no result"
	cell 4 'const y = await new Promise((res) => setTimeout(() => res(1), 50)); y + x'
	assert_eq '42' "$(r '.results[0].data."text/plain"')" "top-level await: $RESULT"
	cell 5 'f() + y'
	assert_eq "'s411'" "$(r '.results[0].data."text/plain"')" "var, function and an awaited const persist: $RESULT"
	cell 6 'display.mime({"text/html": "<b>x</b>", "image/png": Buffer.from([137, 80, 78, 71])}); ({ a: [x] })'
	assert_eq '[{"type":"display_data","data":{"text/html":"<b>x</b>","image/png":"iVBORw=="}},{"type":"execute_result","data":{"text/plain":"{ a: [ 41 ] }"}}]' \
		"$(jq -c .results <<<"$RESULT")" "display_data and an object literal's inspect"
}

test_errors() {
	cell 7 'let z = 1;
null.foo'
	assert_eq "0 error TypeError" "$RC $(r '"\(.status) \(.error.name)"')" "null.foo: $RESULT" || return 1
	assert_eq "Cannot read properties of null (reading 'foo')" "$(r .error.value)" "its message"
	assert_eq "TypeError: Cannot read properties of null (reading 'foo')|    at cell-7:2:6" \
		"$(r '.error.traceback | join("|")')" "its traceback: the cell's frame, none of the kernel's"
	cell 8 'await Promise.reject(new RangeError("nope"))'
	assert_eq "error RangeError nope" "$(r '"\(.status) \(.error.name) \(.error.value)"')" "a rejected await: $RESULT"
	cell 9 'x +'
	assert_eq "error SyntaxError" "$(r '"\(.status) \(.error.name)"')" "a syntax error: $RESULT"
	cell 10 'throw 5'
	assert_eq "error 5" "$(r '"\(.status) \(.error.value)"')" "a thrown number: $RESULT"
	cell 11 'x'
	assert_eq "ok 41 11" "$(r '"\(.status) \(.results[0].data."text/plain") \(.executionCount)"')" "state after errors: $RESULT"
}

# interrupt_cell N CODE: starts the cell, waits for it to write DIR/started, interrupts it.
interrupt_cell() {
	rm -f "$DIR/started"
	mkdir -p "$DIR/cells/$1"
	printf 'require("fs").writeFileSync(%s, "");\n%s' "$(jq -nc --arg p "$DIR/started" '$p')" "$2" \
		>"$DIR/cells/$1/code"
	timeout 60 "$KERNEL" exec "$DIR" "$1" 60000 >"$OUT.stdout" 2>"$OUT.stderr" &
	local exec_pid=$!
	wait_for -t 20 test -e "$DIR/started" || { _fail "cell $1 did not start: $(cat "$OUT.stderr")"; return 1; }
	local t0=${EPOCHREALTIME/./}
	"$KERNEL" interrupt "$DIR" || _fail "interrupt DIR failed"
	wait "$exec_pid"
	RC=$?
	ELAPSED_MS=$(((${EPOCHREALTIME/./} - t0) / 1000))
	RESULT=$(cat "$DIR/cells/$1/result.json" 2>/dev/null)
}

test_interrupt() {
	interrupt_cell 12 'while (true) {}' || return 1
	assert_eq "0 interrupted" "$RC $(r .status)" "while (true) {} interrupted: $RESULT" || return 1
	assert_le "$ELAPSED_MS" 3000 "ms from interrupt to the cell's end"
	cell 13 'x + 1'
	assert_eq "ok 42" "$(r '"\(.status) \(.results[0].data."text/plain")"')" "x after the interrupt: $RESULT"
	"$KERNEL" interrupt "$DIR" 2>"$OUT.stderr"
	assert_eq "1 station-kernel-js: no cell runs in $DIR" "$? $(cat "$OUT.stderr")" "interrupt with no cell running"
}

# The loop runs after an await, outside vm's breakOnSigint: the kernel's watchdog thread stops it.
test_interrupt_after_await() {
	interrupt_cell 14 'await null; x = 7; while (true) {}' || return 1
	assert_eq "0 interrupted" "$RC $(r .status)" "await; while (true) {} interrupted: $RESULT" || return 1
	cell 15 'setTimeout(() => { while (true) {} }, 0); x' 1000
	cell 16 'x * 6' 2000
	assert_eq "ok 42" "$(r '"\(.status) \(.results[0].data."text/plain")"')" "a timer callback's loop stopped, x kept: $RESULT"
	assert_eq "$(kernel_pid)" "$(pgrep -f -- "$KERNEL serve $DIR" | head -n 1)" "the same kernel"
}

sleeper_gone() { no_process "sleep $1"; }

test_timeout() {
	local s1=1000.$RANDOM s2=1001.$RANDOM
	cell 17 "require('child_process').spawn('sleep', ['$s1']); await new Promise(() => {})" 1000
	assert_eq "0 timed_out" "$RC $(r .status)" "a cell waiting forever: $RESULT" || return 1
	wait_for -t 5 sleeper_gone "$s1" || _fail "sleep $s1 outlived its cell: $(pgrep -af "sleep $s1")"
	cell 18 "require('child_process').execSync('sleep $s2'); 1" 1000
	assert_eq "0 timed_out" "$RC $(r .status)" "a cell blocked in execSync: $RESULT"
	wait_for -t 5 sleeper_gone "$s2" || _fail "sleep $s2 outlived its cell: $(pgrep -af "sleep $s2")"
	cell 19 'while (true) {}' 1000
	assert_eq "timed_out" "$(r .status)" "while (true) {} past its deadline: $RESULT"
	cell 20 'x + 35'
	assert_eq "ok 42" "$(r '"\(.status) \(.results[0].data."text/plain")"')" "state after timeouts: $RESULT"
}

test_dead() {
	local pid
	pid=$(kernel_pid)
	kill -KILL "$pid"
	wait_for -t 5 _pid_gone "$pid" || { _fail "kernel $pid did not die"; return 1; }
	cell 21 '1'
	assert_eq "0 dead" "$RC $(r .status)" "a cell on a dead kernel: $RESULT"
	# a new kernel in the same DIR: the variables are gone
	start_kernel || return 1
	cell 22 'typeof x'
	assert_eq "'undefined'" "$(r '.results[0].data."text/plain"')" "a new kernel starts empty: $RESULT"
	kill -TERM "$(kernel_pid)"
}

run_test kernel-js-start test_start
run_test kernel-js-state test_state
run_test kernel-js-errors test_errors
run_test kernel-js-interrupt test_interrupt
run_test kernel-js-interrupt-after-await test_interrupt_after_await
run_test kernel-js-timeout-kills-children test_timeout
run_test kernel-js-dead test_dead
