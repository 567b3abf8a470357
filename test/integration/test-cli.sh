#!/bin/bash
# The station-sandbox CLI as a user runs it: exit codes mirror the run's outcome (exited → its
# code, killed → 128+signal, timed_out → 124, cancelled → 130, failed_to_start → 127,
# lost → 125), both streams printed, no controller → message and exit 2.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
require_controller --listen "tcp:127.0.0.1:$PORT"
new_ws WS || exit 1

# clirun ARGS...: runs the CLI, sets RC, OUT (stdout) and ERR (stderr).
clirun() {
	cli "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" </dev/null
	RC=$?
	OUT=$(cat "$TMP/cli.out")
	ERR=$(cat "$TMP/cli.err")
}

t_no_controller() {
	local sock=$TMP/nobody-here.sock
	STATION_SOCKET=$sock "$CLI_BIN" ready >"$TMP/out" 2>"$TMP/err" </dev/null
	assert_eq 2 "$?" "exit status with STATION_SOCKET and no controller"
	assert_contains "$sock" "$(cat "$TMP/err")" "message names the socket"
	"$CLI_BIN" --socket "$sock" exec "$WS" -- true >"$TMP/out" 2>"$TMP/err" </dev/null
	assert_eq 2 "$?" "exit status of exec with --socket and no controller"
	assert_match '.' "$(cat "$TMP/err")" "a message on stderr"
	assert_eq '' "$(cat "$TMP/out")" "nothing on stdout"
	# A socket file nobody listens on (a controller that died).
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$TMP/stale.sock"
	"$CLI_BIN" --socket "$TMP/stale.sock" ls >"$TMP/out" 2>"$TMP/err" </dev/null
	assert_eq 2 "$?" "exit status with a stale socket"
	assert_contains "$TMP/stale.sock" "$(cat "$TMP/err")" "message names the socket"
}

t_acceptance() {
	clirun exec "$WS" -- 'echo hi; echo err >&2; exit 3'
	assert_eq 3 "$RC" "exit status"
	assert_eq hi "$OUT" stdout
	assert_eq err "$ERR" stderr
	assert_eq 3 "$(wc -c <"$TMP/cli.out")" "stdout is exactly hi\\n"
}

t_exit_zero() {
	clirun exec "$WS" -- 'echo a b'
	assert_eq 0 "$RC" "exit status"
	assert_eq 'a b' "$OUT" stdout
}

t_args_joined() {
	clirun exec "$WS" -- echo one two
	assert_eq 0 "$RC" "exit status"
	assert_eq 'one two' "$OUT" stdout
}

t_killed() {
	clirun exec "$WS" -- 'kill -9 $$'
	assert_eq 137 "$RC" "exit status (128+9)"
}

t_timed_out() {
	clirun exec --timeout 300 "$WS" -- 'sleep 1000.901'
	assert_eq 124 "$RC" "exit status"
	wait_for -t 3 no_process 'sleep 1000.901' || _fail "command left running"
}

t_failed_to_start() {
	clirun exec --cwd /nonexistent-cli-dir "$WS" -- true
	assert_eq 127 "$RC" "exit status"
	assert_contains /nonexistent-cli-dir "$ERR" "reason on stderr"
}

# find_running WS COMMAND: id of the running run with that command.
find_running() {
	api GET "/v1/workspaces/$1/commands" |
		jq -r --arg c "$2" '.commands[] | select(.command == $c and .status == "running") | .id' |
		head -n 1
}

t_cancelled() {
	cli exec "$WS" -- 'sleep 1000.902' >"$TMP/bg.out" 2>"$TMP/bg.err" </dev/null &
	local bg=$! run=
	wait_for -t 10 eval 'run=$(find_running "$WS" "sleep 1000.902"); [[ -n $run ]]' ||
		_fail "run not found"
	clirun cancel "$WS" "$run"
	assert_eq 0 "$RC" "cancel exit status"
	wait_for -t 15 _pid_gone "$bg" || _fail "exec did not return after the cancel"
	wait "$bg"
	assert_eq 130 "$?" "exec exit status" || diag "stderr: $(cat "$TMP/bg.err")"
}

t_lost() {
	local ws agent
	new_ws ws || return 1
	agent=$(agent_pid "$ws")
	cli exec "$ws" -- 'sleep 60.903' >"$TMP/bg.out" 2>"$TMP/bg.err" </dev/null &
	local bg=$!
	# '^sleep': the CLI's own argv holds the command too.
	wait_for -t 10 pgrep -f '^sleep 60.903' >/dev/null || _fail "command never started"
	kill -KILL "$agent"
	wait_for -t 20 _pid_gone "$bg" || _fail "exec did not return after the agent died"
	wait "$bg"
	assert_eq 125 "$?" "exec exit status" || diag "stderr: $(cat "$TMP/bg.err")"
	api -q DELETE "/v1/workspaces/$ws"
}

t_json() {
	clirun exec --json "$WS" -- 'echo j'
	assert_eq 0 "$RC" "exit status"
	assert_eq exited "$(jq -r .status <<<"$OUT")" "status in --json"
	assert_eq '"j\n"' "$(jq -c .stdout <<<"$OUT")" "stdout in --json"
	assert_eq 0 "$(jq -r .exitCode <<<"$OUT")" "exitCode in --json"
	clirun exec --json "$WS" -- 'exit 5'
	assert_eq 5 "$RC" "exit status with --json"
	assert_eq 5 "$(jq -r .exitCode <<<"$OUT")" "exitCode in --json"
}

t_env_and_cwd() {
	clirun exec --env A=b --env C=d --cwd /tmp "$WS" -- 'echo "$A$C $PWD"'
	assert_eq 0 "$RC" "exit status"
	assert_eq 'bd /tmp' "$OUT" stdout
}

t_stdin() {
	printf 'from-pipe' | cli exec --stdin-file - "$WS" -- 'cat' >"$TMP/out" 2>"$TMP/err"
	assert_eq 0 "$?" "exit status (stdin -)"
	assert_eq from-pipe "$(cat "$TMP/out")" "stdin from -"
	printf 'a\000b' >"$TMP/in.bin"
	clirun exec --stdin-file "$TMP/in.bin" "$WS" -- 'od -An -tx1 | tr -s " \n" " "'
	assert_eq 0 "$RC" "exit status (stdin file)"
	assert_eq ' 61 00 62 ' "$OUT" "binary stdin from a file"
}

t_max_output() {
	clirun exec --json --max-output 1024 "$WS" -- 'seq 1 1000 | head -c 2000'
	assert_eq 0 "$RC" "exit status"
	assert_eq true "$(jq -r .truncated <<<"$OUT")" truncated
	assert_eq 1024 "$(jq -r .maxOutputBytes <<<"$OUT")" maxOutputBytes
	assert_eq 2000 "$(jq -r .stdoutBytes <<<"$OUT")" stdoutBytes
}

# ---- exec's fast path: a run that ends within the start's wait (20 ms) comes back whole in
# the one answer; anything else is followed over a second connection from offset 0.

# A unix-socket proxy in front of the controller that appends a line to $TMP/conns for every
# connection it accepts: how many connections one CLI command opened.
start_counting_proxy() {
	PROXY_SOCK=$TMP/proxy.sock
	rm -f "$PROXY_SOCK" "$TMP/conns"
	: >"$TMP/conns"
	python3 - "$PROXY_SOCK" "$SOCK" "$TMP/conns" <<'PY' &
import os, socket, sys, threading
listen, target, log = sys.argv[1:4]
srv = socket.socket(socket.AF_UNIX)
srv.bind(listen)
srv.listen(16)
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = srv.accept()
    with open(log, "a") as f:
        f.write("conn\n")
    u = socket.socket(socket.AF_UNIX)
    u.connect(target)
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
PY
	PROXY_PID=$!
	wait_for -t 10 test -S "$PROXY_SOCK"
}

stop_counting_proxy() {
	kill "$PROXY_PID" 2>/dev/null
	wait "$PROXY_PID" 2>/dev/null
	return 0
}

# pexec ARGS...: `exec ARGS...` through the proxy; sets RC, CONNS and the output files.
pexec() {
	: >"$TMP/conns"
	STATION_SOCKET=$PROXY_SOCK "$CLI_BIN" exec "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" </dev/null
	RC=$?
	CONNS=$(wc -l <"$TMP/conns")
}

# A run that ends at once: its exact bytes (binary and invalid UTF-8 included, so the answer
# is base64) and exit status from one connection. Under load a run may outlive the 20 ms wait
# and be followed instead (the same bytes, two connections): a few attempts, one must be fast.
t_fast_path_one_connection() {
	start_counting_proxy || return 1
	local i fast=0
	printf 'out\000\377\n' >"$TMP/want.out"
	printf 'err\303\n' >"$TMP/want.err"
	for i in 1 2 3 4 5 6 7 8; do
		pexec "$WS" -- 'printf "out\000\377\n"; printf "err\303\n" >&2; exit 42'
		assert_eq 42 "$RC" "exit status" || break
		assert_files_eq "$TMP/want.out" "$TMP/cli.out" "stdout bytes" || break
		assert_files_eq "$TMP/want.err" "$TMP/cli.err" "stderr bytes" || break
		if ((CONNS == 1)); then
			fast=1
			break
		fi
		assert_eq 2 "$CONNS" "connections of a followed run"
	done
	assert_eq 1 "$fast" "one of 8 runs of an instant command used a single connection"
	# The statuses of other endings come through the fast path too.
	pexec "$WS" -- 'kill -9 $$'
	assert_eq 137 "$RC" "killed: exit status"
	assert_eq 'station-sandbox: killed by signal 9' "$(cat "$TMP/cli.err")" "killed: stderr"
	pexec --cwd /nonexistent-fast-dir "$WS" -- true
	assert_eq 127 "$RC" "failed_to_start: exit status"
	assert_contains /nonexistent-fast-dir "$(cat "$TMP/cli.err")" "failed_to_start: reason"
	pexec "$WS" -- true
	assert_eq 0 "$RC" "true: exit status"
	assert_eq 0 "$(cat "$TMP/cli.out" "$TMP/cli.err" | wc -c)" "true: no output"
	stop_counting_proxy
}

# A run that outlives the wait, with output before and after it: followed from offset 0 over
# a second connection, no byte lost or doubled.
t_fast_path_outlived() {
	start_counting_proxy || return 1
	pexec "$WS" -- 'echo before; echo e1 >&2; sleep 0.4; echo after; echo e2 >&2; exit 5'
	assert_eq 5 "$RC" "exit status"
	assert_eq $'before\nafter' "$(cat "$TMP/cli.out")" stdout
	assert_eq 13 "$(wc -c <"$TMP/cli.out")" "stdout is exactly before\\nafter\\n"
	assert_eq $'e1\ne2' "$(cat "$TMP/cli.err")" stderr
	assert_eq 6 "$(wc -c <"$TMP/cli.err")" "stderr is exactly e1\\ne2\\n"
	assert_eq 2 "$CONNS" "connections: the start and the follow"
	stop_counting_proxy
}

# More output than the answer holds (--max-output 64 keeps 32 + 32 bytes per stream): never
# printed from the answer; followed, so either every byte (the follow kept up with a run still
# going) or the kept head and tail with the gap reported, exactly as a follow shows them.
t_fast_path_truncated() {
	start_counting_proxy || return 1
	local all head tail
	all=$(printf '%0100d' 0 | tr 0 x)$(printf '%0100d' 0 | tr 0 y)
	head=${all:0:32}
	tail=${all:168:32}
	pexec --max-output 64 "$WS" -- "printf '%s' '$all'; exit 3"
	assert_eq 3 "$RC" "exit status"
	assert_eq 2 "$CONNS" "a truncated run is followed"
	if [[ $(cat "$TMP/cli.out") == "$all" ]]; then
		assert_eq '' "$(cat "$TMP/cli.err")" "no gap when every byte came"
	else
		assert_eq "$head$tail" "$(cat "$TMP/cli.out")" "head and tail"
		assert_eq '[station-sandbox: 136 bytes of stdout not shown]' \
			"$(cat "$TMP/cli.err")" "the gap on stderr"
	fi
	stop_counting_proxy
}

# A large output within what a run keeps (100,000 bytes, base64-free digits): exact bytes.
t_fast_path_large() {
	seq 1 20000 | head -c 100000 >"$TMP/want.out"
	clirun exec "$WS" -- 'seq 1 20000 | head -c 100000'
	assert_eq 0 "$RC" "exit status"
	assert_files_eq "$TMP/want.out" "$TMP/cli.out" "100,000 bytes of stdout"
}

t_workspace_commands() {
	local ws
	clirun create --env K=V
	assert_eq 0 "$RC" "create exit status"
	ws=$OUT
	assert_match '^test-[a-z2-7]{26}$' "$ws" "create prints the id" || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq '{"K":"[redacted]"}' "$(j .env)" "env given to create (names only)"
	clirun create --json
	assert_eq 0 "$RC" "create --json exit status"
	assert_eq ready "$(jq -r .state <<<"$OUT")" "create --json prints the workspace"
	local ws2
	ws2=$(jq -r .id <<<"$OUT")

	clirun ls
	assert_eq 0 "$RC" "ls exit status"
	assert_contains "$ws" "$OUT" "ls lists the workspace"
	clirun ls --json
	assert_eq 0 "$RC" "ls --json exit status"
	assert_eq 1 "$(jq -r --arg id "$ws" '[.. | strings | select(. == $id)] | length' <<<"$OUT")" \
		"ls --json lists the workspace once"

	clirun restart "$ws"
	assert_eq 0 "$RC" "restart exit status"
	clirun rm "$ws" "$ws2"
	assert_eq 0 "$RC" "rm exit status"
	api -q GET "/v1/workspaces/$ws"
	assert_status 404 "workspace after rm"
	api -q GET "/v1/workspaces/$ws2"
	assert_status 404 "second workspace after rm"
	clirun rm "$ws"
	assert_ne 0 "$RC" "rm of an unknown workspace fails"
	assert_match '.' "$ERR" "with a message"
}

t_status_and_runs() {
	run_cmd "$WS" 'echo via-api' || return 1
	local run=$RUN
	clirun status --json "$WS" "$run"
	assert_eq 0 "$RC" "status exit status"
	assert_eq exited "$(jq -r .status <<<"$OUT")" "status --json"
	assert_eq '"via-api\n"' "$(jq -c .stdout <<<"$OUT")" "status --json stdout"
	clirun status "$WS" "$run"
	assert_eq 0 "$RC" "status exit status"
	assert_contains exited "$OUT" "status output"
	clirun runs "$WS"
	assert_eq 0 "$RC" "runs exit status"
	assert_contains "$run" "$OUT" "runs lists the run"
}

# runs --json prints what GET …/commands answers, the same document (with ?limit=N too).
t_runs_json_api_shape() {
	run_cmd "$WS" 'echo listed' || return 1
	clirun runs --json "$WS"
	assert_eq 0 "$RC" "runs --json exit status"
	api -q GET "/v1/workspaces/$WS/commands"
	assert_status 200 "GET …/commands"
	assert_eq "$(jq -S . <<<"$BODY")" "$(jq -S . <<<"$OUT")" "runs --json is the API's answer"
	assert_eq "$RUN" "$(jq -r '.commands[0].id' <<<"$OUT")" "the newest run first"
	clirun runs --json --limit 1 "$WS"
	api -q GET "/v1/workspaces/$WS/commands?limit=1"
	assert_eq "$(jq -S . <<<"$BODY")" "$(jq -S . <<<"$OUT")" "runs --json --limit 1"
	assert_eq 1 "$(jq '.commands | length' <<<"$OUT")" "one run with --limit 1"
}

# events prints one JSON object a line (docs/cli.md), each the event as the stream sent it.
t_events_lines() {
	local line n=0
	run_cmd "$WS" 'true' || return 1
	cli events --workspace "$WS" --since 0 --count 3 >"$TMP/events.out" 2>"$TMP/events.err" \
		</dev/null
	assert_eq 0 "$?" "events exit status" || diag "stderr: $(cat "$TMP/events.err")"
	assert_eq 3 "$(wc -l <"$TMP/events.out")" "3 events, 3 lines"
	while IFS= read -r line; do
		n=$((n + 1))
		assert_eq object "$(jq -r type <<<"$line" 2>&1)" "line $n is a JSON object: $line" ||
			return 1
		assert_eq "$WS" "$(jq -r .workspaceId <<<"$line")" "line $n is of the workspace"
		assert_match '^[0-9]+$' "$(jq -r .seq <<<"$line")" "line $n has its seq"
	done <"$TMP/events.out"
}

# exec's output that cannot be written whole (a full disk, a reader gone): a message naming the
# run and the cause, exit 74, on every path (an answer that held the output, a followed run,
# --json). A normal redirect, a pipe read to the end: the command's status and its bytes.
t_exec_write_error() {
	local what rc
	for what in 'echo fast' 'sleep 0.3; echo followed' 'seq 1 100000'; do
		cli exec "$WS" -- "$what" >/dev/full 2>"$TMP/cli.err" </dev/null
		assert_eq 74 "$?" "[$what] >/dev/full: exit status"
		assert_match '^station-sandbox: cannot write the output of run r-[a-z0-9]+: No space left on device' \
			"$(cat "$TMP/cli.err")" "[$what] >/dev/full: the message"
		cli exec --json "$WS" -- "$what" >/dev/full 2>"$TMP/cli.err" </dev/null
		assert_eq 74 "$?" "[$what] --json >/dev/full: exit status"
		assert_match '^station-sandbox: cannot write the output of run r-[a-z0-9]+: No space left on device' \
			"$(cat "$TMP/cli.err")" "[$what] --json >/dev/full: the message"
	done
	cli exec "$WS" -- 'seq 1 1000000' 2>"$TMP/cli.err" </dev/null | head -c 1 >/dev/null
	rc=${PIPESTATUS[0]}
	assert_eq 74 "$rc" "a reader gone: exit status"
	# (A line about bytes the follow missed may come first: the run kept 128 KiB of 6.9 MB.)
	assert_match '^station-sandbox: cannot write the output of run r-[a-z0-9]+: Broken pipe$' \
		"$(tail -n 1 "$TMP/cli.err")" "a reader gone: the message"
	# Positive controls.
	cli exec "$WS" -- 'echo into-a-file; exit 3' >"$TMP/exec.file" 2>"$TMP/cli.err" </dev/null
	assert_eq 3 "$?" "> file: the command's status"
	assert_eq into-a-file "$(cat "$TMP/exec.file")" "> file: the bytes"
	seq 1 20000 | head -c 100000 >"$TMP/want.out"
	for what in 'seq 1 20000 | head -c 100000' 'sleep 0.3; seq 1 20000 | head -c 100000'; do
		cli exec "$WS" -- "$what" 2>"$TMP/cli.err" </dev/null | cat >"$TMP/exec.file"
		assert_eq "0 0" "${PIPESTATUS[*]}" "[$what] | cat: exit statuses"
		assert_files_eq "$TMP/want.out" "$TMP/exec.file" "[$what] | cat: every byte"
	done
	cli exec --json "$WS" -- 'exit 4' >"$TMP/exec.file" 2>"$TMP/cli.err" </dev/null
	assert_eq 4 "$?" "--json > file: the command's status"
	assert_eq 4 "$(jq .exitCode "$TMP/exec.file")" "--json > file: the run"
}

t_ready_worker() {
	clirun ready
	assert_eq 0 "$RC" "ready exit status"
	clirun worker
	assert_eq 0 "$RC" "worker exit status"
	assert_contains test "$OUT" "worker output names the worker"
}

t_tcp_url_token() {
	local token
	token=$(tr -d '\n' <"$ROOT/admin.token")
	"$CLI_BIN" --url "http://127.0.0.1:$PORT" --token "$token" exec "$WS" -- 'echo over-tcp' \
		>"$TMP/out" 2>"$TMP/err" </dev/null
	assert_eq 0 "$?" "exec over TCP with --url/--token"
	assert_eq over-tcp "$(cat "$TMP/out")" stdout
	STATION_URL=http://127.0.0.1:$PORT STATION_TOKEN=$token "$CLI_BIN" worker >/dev/null 2>&1 </dev/null
	assert_eq 0 "$?" "STATION_URL and STATION_TOKEN"
	STATION_URL=http://127.0.0.1:$PORT "$CLI_BIN" worker >/dev/null 2>"$TMP/err" </dev/null
	assert_ne 0 "$?" "TCP without a token fails"
}

# What the CLI refuses itself, before any request; the manager's answers belong to the network
# suite.
t_network_usage() {
	clirun network --help
	assert_eq 0 "$RC" "network --help exit status"
	assert_contains 'DEST[:PORTS][/tcp|/udp]' "$OUT" "help documents the --allow syntax"
	clirun create --help
	assert_contains '--network MODE' "$OUT" "create --help documents --network"
	assert_contains '--egress FILE|-' "$OUT" "create --help documents --egress"

	clirun network
	assert_eq 64 "$RC" "network without a workspace"
	assert_contains 'no workspace given' "$ERR" "message"
	clirun network "$WS" --allow github.com --set "$TMP/policy.json"
	assert_eq 64 "$RC" "--allow with --set"
	assert_contains '--allow and --set are exclusive' "$ERR" "message"
	clirun create --network bridge --allow github.com
	assert_eq 64 "$RC" "--allow with --network bridge"
	assert_contains "need --network restricted, not 'bridge'" "$ERR" "message"
	clirun create --allow 'github.com:0'
	assert_eq 64 "$RC" "port 0"
	assert_contains "--allow 'github.com:0': ports must be numbers from 1 to 65535" "$ERR" \
		"message"
	clirun create --allow 'github.com:443,'
	assert_eq 64 "$RC" "a port list ending in ','"
	clirun create --allow ':443'
	assert_eq 64 "$RC" "no destination"
	assert_contains 'no destination before the ports' "$ERR" "message"
	clirun network "$WS" --allow '2001:db8::/32'
	assert_eq 64 "$RC" "an IPv6 rule"
	assert_contains 'IPv6 egress is not available' "$ERR" "message"
	clirun network "$WS" --set "$TMP/no-such-policy.json"
	assert_eq 1 "$RC" "--set of a missing file"
	assert_contains "cannot read --set '$TMP/no-such-policy.json'" "$ERR" "message"
	echo '["github.com"]' | cli network "$WS" --set - >"$TMP/cli.out" 2>"$TMP/cli.err"
	assert_eq 1 "$?" "--set - with a policy that is not an object"
	assert_contains 'must be a JSON object' "$(cat "$TMP/cli.err")" "message"
	assert_eq '' "$(cat "$TMP/cli.out")" "nothing on stdout"
	echo '{"allow": [' | cli create --egress - >"$TMP/cli.out" 2>"$TMP/cli.err"
	assert_eq 1 "$?" "create --egress - with broken JSON"
	assert_contains 'egress policy is not valid JSON' "$(cat "$TMP/cli.err")" "message"
	# Positive control: the same command line with a valid rule gets past the CLI (whatever
	# the controller then answers, the message is not one of the CLI's usage errors).
	clirun network "$WS" --allow '203.0.113.0/24:443,80/tcp'
	assert_ne 64 "$RC" "a valid rule is not a usage error"
}

# What --allow sends and how `network` prints an answer, against a loopback stand-in for the
# controller that records each request body and answers with a fixed network.
t_network_requests() {
	local port pid
	cat >"$TMP/recorder.py" <<'PY'
import http.server, json, sys
answer = {"mode": "restricted", "address": "10.200.0.2", "gateway": "10.200.0.1",
          "egress": {"allow": [{"domain": "github.com"},
                               {"cidr": "203.0.113.0/24", "ports": [80, 443], "proto": "tcp"}]},
          "counters": {"allowed": 5, "denied": 2, "dnsAllowed": 7, "dnsRefused": 1}}
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, doc):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.reply(200, answer)
    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        with open(sys.argv[1], "a") as f:
            f.write(self.command + " " + self.path + " " + self.rfile.read(n).decode() + "\n")
        self.reply(200 if self.command == "PUT" else 201,
                   answer if self.command == "PUT" else {"id": "w1-new", "state": "ready"})
    do_POST = do_PUT
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
	python3 "$TMP/recorder.py" "$TMP/requests" >"$TMP/recorder.port" &
	pid=$!
	wait_for -t 30 test -s "$TMP/recorder.port" || { kill "$pid"; _fail "recorder did not start"; return 1; }
	port=$(cat "$TMP/recorder.port")
	rec() { "$CLI_BIN" --url "http://127.0.0.1:$port" --token t "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" </dev/null; RC=$?; OUT=$(cat "$TMP/cli.out"); }

	rec network w1 --allow github.com --allow '*.npmjs.org:443' --allow '203.0.113.0/24:443,80/tcp' \
		--allow '198.51.100.7/udp'
	assert_eq 0 "$RC" "network --allow exit status"
	assert_eq 'PUT /v1/workspaces/w1/network {"egress":{"allow":[{"domain":"github.com"},{"domain":"*.npmjs.org","ports":[443]},{"cidr":"203.0.113.0/24","ports":[443,80],"proto":"tcp"},{"cidr":"198.51.100.7","proto":"udp"}]}}' \
		"$(tail -n 1 "$TMP/requests")" "the rules sent"
	assert_contains 'mode:     restricted' "$OUT" "prints the mode"
	assert_contains '5 connections allowed, 2 packets denied' "$OUT" "prints the counters"
	assert_match '203\.0\.113\.0/24 +80,443 +tcp' "$OUT" "prints a rule"
	assert_match 'github\.com +all +tcp' "$OUT" "prints a domain rule's defaults"

	rec create --allow 'registry.npmjs.org:443' --json
	assert_eq 0 "$RC" "create --allow exit status"
	assert_eq 'POST /v1/workspaces {"network":"restricted","egress":{"allow":[{"domain":"registry.npmjs.org","ports":[443]}]}}' \
		"$(tail -n 1 "$TMP/requests")" "create implies restricted"
	echo '{"allow": [{"cidr": "203.0.113.9"}]}' >"$TMP/policy.json"
	rec create --network restricted --egress "$TMP/policy.json"
	assert_eq 0 "$RC" "create --egress exit status"
	assert_eq w1-new "$OUT" "create prints the id"
	assert_eq 'POST /v1/workspaces {"network":"restricted","egress":{"allow":[{"cidr":"203.0.113.9"}]}}' \
		"$(tail -n 1 "$TMP/requests")" "create --egress FILE"
	rec network --json w1
	assert_eq 0 "$RC" "network --json exit status"
	assert_eq 7 "$(jq -r .counters.dnsAllowed <<<"$OUT")" "network --json prints the document"
	kill "$pid"
	wait "$pid" 2>/dev/null
	return 0
}

# The library the CLI links exports its API and nothing of what it is built from.
t_library_exports() {
	local syms
	syms=$(nm -D --defined-only "$BUILD/src/client/libstation-client.so" | awk '{ print $3 }')
	assert_contains station_client_new "$syms" "the API is exported"
	assert_eq '' "$(grep -v '^station_' <<<"$syms")" "nothing else is exported"
}

run_test "no controller: message and exit 2" t_no_controller
run_test "exec prints both streams and exits 3" t_acceptance
run_test "exec exits 0" t_exit_zero
run_test "exec joins arguments after --" t_args_joined
run_test "killed: exit 137" t_killed
run_test "timed_out: exit 124" t_timed_out
run_test "failed_to_start: exit 127" t_failed_to_start
run_test "cancelled: exit 130" t_cancelled
run_test "lost: exit 125" t_lost
run_test "exec --json prints the final run" t_json
run_test "exec --env and --cwd" t_env_and_cwd
run_test "exec --stdin-file" t_stdin
run_test "exec --max-output" t_max_output
run_test "exec fast path: an instant run over one connection, exact bytes" \
	t_fast_path_one_connection
run_test "exec fast path: a run outliving the wait is followed from offset 0" \
	t_fast_path_outlived
run_test "exec fast path: a truncated run is followed" t_fast_path_truncated
run_test "exec fast path: 100,000 bytes exact" t_fast_path_large
run_test "create, ls, restart, rm" t_workspace_commands
run_test "status and runs" t_status_and_runs
run_test "runs --json is GET …/commands' answer" t_runs_json_api_shape
run_test "events: one JSON object a line" t_events_lines
run_test "exec: output not written whole exits 74" t_exec_write_error
run_test "ready and worker" t_ready_worker
run_test "--url and --token over TCP" t_tcp_url_token
run_test "network and create --allow: usage errors" t_network_usage
run_test "network and create --allow: requests and output" t_network_requests
run_test "libstation-client exports station_* only" t_library_exports
