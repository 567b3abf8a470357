#!/bin/bash
# The serving controller across workers: three controllers on loopback (w1, w2, w3; host
# adapter, TCP listeners, one bearer token shared), w1 started with --workers naming all three
# and a fourth, w9, whose listener accepts and never answers. GET /v1/workers reports each
# worker's state (w2 stopped: down, with the error), /v1/workers/NAME/v1/... forwards with the
# caller's own token (a token w1 takes and w3 does not: w3's 401 comes back), refuses a name
# it does not know, forwarding of forwarding and event streams, and a hung worker does not hold
# the serving controller's other requests. WebSockets are relayed (ws-relay-client.py): a
# run's output live, a terminal that echoes what is typed, a service's logs followed, the
# worker's 401 for a token it does not take, a refused path never reaching the worker, and the
# worker going away closing the client's socket. PATCH is forwarded as the other methods are.
# The dashboard's list of every worker's workspaces filters by label and name on each worker.
. "$(dirname "$0")/lib.sh"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

P1=$(free_port)
P2=$(free_port)
P3=$(free_port)
P9=$(free_port)
W1=http://127.0.0.1:$P1

# A listener that accepts and never answers; it notes each connection in a file.
HUNG_LOG=$TMP/hung.log
: >"$HUNG_LOG"
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
with open(sys.argv[2], "a") as f: f.write("listening\n")
held = []
while True:
    c, _ = s.accept(); held.append(c)
    with open(sys.argv[2], "a") as f: f.write("accepted\n")
' "$P9" "$HUNG_LOG" &
HUNG_PID=$!
hung_listening() {
	grep -q listening "$HUNG_LOG"
}

# Controllers besides lib.sh's own (w1): NAME → pid, root in $TMP/NAME.
declare -A XPID
start_extra() {
	local name=$1 port=$2 root=$TMP/$1
	mkdir -p "$root"
	"$DAEMON" --root "$root" --worker "$name" --log-format text --network-range none \
		--adapters host --default-adapter host --listen "tcp:127.0.0.1:$port" \
		--admin-token-file "$TMP/shared.token" >>"$root/controller.log" 2>&1 </dev/null &
	XPID[$name]=$!
	wait_for -t 20 extra_ready "$name" "$port"
}
extra_ready() {
	kill -0 "${XPID[$1]}" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$TMP/$1/station.sock" http://x/v1/ready) == 200 ]]
}
stop_extra() {
	local pid=${XPID[$1]:-}
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null
	wait_for -t 20 _pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	XPID[$1]=
}
extra_cleanup() {
	local n id
	for n in w2 w3 w4; do
		[[ -n ${XPID[$n]:-} ]] || continue
		for id in $(curl -s --unix-socket "$TMP/$n/station.sock" http://x/v1/workspaces | jq -r '.workspaces[].id' 2>/dev/null); do
			curl -s -o /dev/null -X DELETE --unix-socket "$TMP/$n/station.sock" "http://x/v1/workspaces/$id"
		done
		stop_extra "$n"
	done
	kill "$HUNG_PID" 2>/dev/null
	wait "$HUNG_PID" 2>/dev/null
}
trap '_rc=$?; extra_cleanup; (exit $_rc); _cleanup' EXIT

# tcp METHOD URL [TOKEN] [BODY]: one request over TCP; STATUS and BODY as api() sets them.
tcp() {
	local method=$1 url=$2 token=${3:-$TOKEN} args
	args=(-sS --max-time 90 -X "$method" -o "$TMP/tcp-body" -w '%{http_code}' -H "Authorization: Bearer $token")
	if [[ $# -ge 4 ]]; then
		args+=(-H 'Content-Type: application/json' --data-binary "$4")
	fi
	STATUS=$(curl "${args[@]}" "$url" 2>"$TMP/curl-err") || STATUS=000
	BODY=$(cat "$TMP/tcp-body")
}

# The token of w1, shared by w2 and w3 (given to them as their admin token file).
require_controller --worker w1 --adapters host --listen "tcp:127.0.0.1:$P1" \
	--workers "w1=$W1,w2=http://127.0.0.1:$P2,w3=http://127.0.0.1:$P3,w9=http://127.0.0.1:$P9" \
	--max-wait-ms 5000
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")
wait_for -t 60 hung_listening || {
	not_ok "the listener that never answers listens"
	exit 1
}
(umask 077 && printf '%s\n' "$TOKEN" >"$TMP/shared.token")
for n in w2 w3; do
	port=$([[ $n == w2 ]] && echo "$P2" || echo "$P3")
	if ! start_extra "$n" "$port"; then
		not_ok "controller $n starts"
		exit 1
	fi
done
# A second token w1 takes and the others do not.
tcp POST "$W1/v1/tokens" "$TOKEN" '{"name":"only-w1","scope":"admin"}'
ONLY_W1=$(j .token)
[[ $STATUS == 201 && $ONLY_W1 == sst_* ]] || {
	not_ok "a token only w1 takes: $STATUS $(_short "$BODY")"
	exit 1
}

worker_field() {
	j ".workers[] | select(.name == \"$1\") | $2"
}

t_list_up() {
	tcp GET "$W1/v1/workers"
	assert_eq 200 "$STATUS" "GET /v1/workers" || return 1
	assert_eq '["w1","w2","w3","w9"]' "$(j '[.workers[].name]')" "the workers, in list order"
	assert_eq up "$(worker_field w1 .state)" "w1 (this controller)"
	assert_eq true "$(worker_field w1 .self)" "w1 is this controller"
	assert_eq up "$(worker_field w2 .state)" "w2"
	assert_eq up "$(worker_field w3 .state)" "w3"
	assert_eq 0.1.0 "$(worker_field w3 .version)" "w3's version"
	assert_eq 0 "$(worker_field w3 .workspaces)" "w3's workspace count"
	assert_eq down "$(worker_field w9 .state)" "w9 (accepts, never answers)"
	assert_eq "worker w9 (http://127.0.0.1:$P9) did not answer: no answer within 5000 ms" \
		"$(worker_field w9 .error)" "w9's error"
}

WS3=
t_forward() {
	tcp POST "$W1/v1/workers/w3/v1/workspaces" "$TOKEN" '{"adapter":"host"}'
	assert_eq 201 "$STATUS" "create on w3 through w1: $BODY" || return 1
	WS3=$(j .id)
	assert_match '^w3-' "$WS3" "the id names w3"
	assert_eq w3 "$(j .worker)" "the workspace's worker"
	tcp POST "$W1/v1/workers/w3/v1/workspaces/$WS3/commands?waitMs=4000" "$TOKEN" \
		'{"command":"echo forwarded; hostname >/dev/null","timeoutMs":20000}'
	assert_eq 201 "$STATUS" "a command through w1: $BODY" || return 1
	local run
	run=$(j .id)
	wait_for -t 60 run_done_remote "$run" || _fail "the run did not end: $BODY"
	assert_eq exited "$(j .status)" "status"
	assert_eq 0 "$(j .exitCode)" "exit code"
	assert_eq "forwarded" "$(j .stdout | tr -d '\n')" "stdout"
	# The same workspace and run, asked of w3 itself (positive control: it is there, not on w1).
	STATUS=$(curl -s -o "$TMP/direct" -w '%{http_code}' --unix-socket "$TMP/w3/station.sock" \
		"http://x/v1/workspaces/$WS3/commands/$run")
	assert_eq 200 "$STATUS" "w3 has the run"
	assert_eq exited "$(jq -r .status "$TMP/direct")" "w3's own answer"
	api -q GET "/v1/workspaces/$WS3"
	assert_eq 404 "$STATUS" "w1 itself has no such workspace"
	# The worker's content type comes back; the serving origin never renders it as a page.
	curl -s -D "$TMP/headers" -o /dev/null -H "Authorization: Bearer $TOKEN" \
		"$W1/v1/workers/w3/v1/workspaces/$WS3"
	assert_match '^application/json' "$(awk -F': ' 'tolower($1) == "content-type" {print $2}' "$TMP/headers" | tr -d '\r')" "content type"
	assert_eq nosniff "$(awk -F': ' 'tolower($1) == "x-content-type-options" {print $2}' "$TMP/headers" | tr -d '\r')" "nosniff"
	assert_match '^sandbox' "$(awk -F': ' 'tolower($1) == "content-security-policy" {print $2}' "$TMP/headers" | tr -d '\r')" "CSP sandbox"
	# A query passes on encoded.
	tcp POST "$W1/v1/workers/w3/v1/workspaces/$WS3/files/mkdir" "$TOKEN" '{"path":"a b/c&d","parents":true}'
	assert_eq 201 "$STATUS" "mkdir through w1: $BODY"
	tcp GET "$W1/v1/workers/w3/v1/workspaces/$WS3/files/stat?path=a%20b%2Fc%26d"
	assert_eq 200 "$STATUS" "a query with an encoded space, slash and ampersand: $BODY"
	assert_eq dir "$(j .type)" "stat of the directory"
	# A merge patch goes on as the other methods do: w3 itself has the name and labels.
	tcp PATCH "$W1/v1/workers/w3/v1/workspaces/$WS3" "$TOKEN" '{"name":"far","labels":{"team":"x"}}'
	assert_eq 200 "$STATUS" "PATCH through w1: $BODY" || return 1
	assert_eq far "$(j .name)" "the answer's name"
	STATUS=$(curl -s -o "$TMP/direct" -w '%{http_code}' --unix-socket "$TMP/w3/station.sock" \
		"http://x/v1/workspaces/far")
	assert_eq 200 "$STATUS" "w3 finds its workspace by the new name"
	assert_eq "$WS3 x" "$(jq -r '.id + " " + .labels.team' "$TMP/direct")" "w3's own answer"
	tcp PATCH "$W1/v1/workers/w3/v1/workspaces/far" "$TOKEN" '{"labels":{"team":null}}'
	assert_eq 200 "$STATUS" "PATCH by name through w1: $BODY"
	assert_eq '{}' "$(j .labels)" "the label removed"
}
run_done_remote() {
	tcp GET "$W1/v1/workers/w3/v1/workspaces/$WS3/commands/$1?waitMs=2000"
	[[ $STATUS == 200 && $(j .status) != running && $(j .status) != queued ]]
}

t_token() {
	# Positive control: w1 takes this token for itself.
	tcp GET "$W1/v1/workspaces" "$ONLY_W1"
	assert_eq 200 "$STATUS" "w1 takes its own token"
	tcp GET "$W1/v1/workers/w3/v1/workspaces" "$ONLY_W1"
	assert_eq 401 "$STATUS" "w3 refuses a token it does not know, and w1 passes that on"
	assert_eq "a valid bearer token is required" "$(j .error.message)" "w3's own message"
	tcp GET "$W1/v1/workers/w3/v1/workspaces" "$TOKEN"
	assert_eq 200 "$STATUS" "the shared token works there (positive control)"
	assert_eq "[\"$WS3\"]" "$(j '[.workspaces[].id]')" "w3's workspaces"
	# Without a token, nothing is forwarded.
	STATUS=$(curl -s -o /dev/null -w '%{http_code}' "$W1/v1/workers/w3/v1/workspaces")
	assert_eq 401 "$STATUS" "no token: refused by w1"
}

t_refusals() {
	tcp GET "$W1/v1/workers/w7/v1/workspaces"
	assert_eq 404 "$STATUS" "an unconfigured name"
	assert_eq "worker w7 is not configured on this controller (GET /v1/workers lists them)" \
		"$(j .error.message)" "the message names it"
	tcp GET "$W1/v1/workers/w3/v1/workers/w2/v1/workspaces"
	assert_eq 400 "$STATUS" "forwarding of forwarding"
	assert_eq "a forwarded request cannot be forwarded again" "$(j .error.message)" "why"
	tcp PATCH "$W1/v1/workers/w3/v1/workers/w2/v1/workspaces/x" "$TOKEN" '{"name":"y"}'
	assert_eq 400 "$STATUS" "forwarding of forwarding, PATCH"
	tcp PATCH "$W1/v1/workers/w7/v1/workspaces/x" "$TOKEN" '{"name":"y"}'
	assert_eq 404 "$STATUS" "an unconfigured name, PATCH"
	STATUS=$(curl -s --path-as-is -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		"$W1/v1/workers/w3/v1/workspaces/$WS3/../../workspaces")
	assert_eq 400 "$STATUS" "a dot segment"
	tcp GET "$W1/v1/workers/w1/v1/workspaces"
	assert_eq 400 "$STATUS" "this controller's own name"
	tcp GET "$W1/v1/workers/w3/v1/workspaces/$WS3/services/x/logs?follow=1"
	assert_eq 501 "$STATUS" "a stream is refused, not held"
	assert_eq "event streams are not forwarded to worker w3: use the WebSocket variant of the endpoint, or poll (no follow, no text/event-stream)" \
		"$(j .error.message)" "what to do instead"
	# A body over the cap is refused before anything is forwarded.
	head -c $((3 * 1024 * 1024)) /dev/zero | tr '\0' 'a' >"$TMP/big"
	STATUS=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/json' --data-binary @"$TMP/big" \
		"$W1/v1/workers/w3/v1/workspaces")
	assert_eq 413 "$STATUS" "a body over --max-body-bytes"
}

# ---- WebSockets through w1 ------------------------------------------------------------------

WSC=$SRC/test/integration/ws-relay-client.py
# wsc PATH [ARGS...]: one WebSocket to w1; its JSON result in WR.
wsc() {
	local path=$1
	shift
	WR=$(python3 "$WSC" "$P1" "$path" "$@" 2>"$TMP/wsc.err")
	[[ -n $WR ]] || WR="{\"error\":\"no result: $(tail -c 300 "$TMP/wsc.err" | tr '\n"' '  ')\"}"
}
wr() {
	j "$1" "$WR"
}
run_state_remote() {
	tcp GET "$W1/v1/workers/w3/v1/workspaces/$WS3/commands/$1"
	[[ $STATUS == 200 ]] && RUN_STATE=$(j .status)
}
file_there() {
	[[ -e $1 ]]
}

t_ws_output() {
	local run
	[[ -n $WS3 ]] || return 1
	# The run prints, then waits for a directory only this test makes, then prints again.
	tcp POST "$W1/v1/workers/w3/v1/workspaces/$WS3/commands" "$TOKEN" \
		'{"command":"echo live-one; while [ ! -e go-output ]; do sleep 0.1; done; echo live-two","timeoutMs":120000}'
	assert_eq 201 "$STATUS" "a command through w1: $BODY" || return 1
	run=$(j .id)
	wsc "/v1/workers/w3/v1/workspaces/$WS3/commands/$run/output" --subprotocol-token "$TOKEN" --until live-one
	assert_eq 101 "$(wr .status)" "the upgrade through w1: $WR" || return 1
	assert_eq station-sandbox "$(wr .protocol)" "the subprotocol selected"
	assert_eq true "$(wr .found)" "the first line came: $WR"
	# Live: the run cannot have ended, it waits for go-output.
	run_state_remote "$run"
	assert_eq running "$RUN_STATE" "the run still runs while its output came"
	tcp POST "$W1/v1/workers/w3/v1/workspaces/$WS3/files/mkdir" "$TOKEN" '{"path":"go-output"}'
	assert_eq 201 "$STATUS" "go-output: $BODY"
	# Followed to its end: both lines, the end message, w3's close 1000.
	wsc "/v1/workers/w3/v1/workspaces/$WS3/commands/$run/output" --token "$TOKEN"
	assert_eq 101 "$(wr .status)" "again, with Authorization" || return 1
	# (The end message's run holds the command line: the first two are the output's.)
	assert_eq 'live-one live-two' "$(wr .data | grep -ao 'live-[a-z]*' | head -n 2 | tr '\n' ' ' | sed 's/ $//')" "the output"
	assert_eq exited "$(wr '.texts[-1] | fromjson | .run.status // .status // empty' 2>/dev/null || true)" "the end message: $(wr '.texts[-1]')"
	assert_eq 1000 "$(wr .close)" "w3's close comes through"
}

t_ws_terminal() {
	local term
	tcp POST "$W1/v1/workers/w3/v1/workspaces/$WS3/terminals" "$TOKEN" '{"command":"/bin/sh","cols":80,"rows":24}'
	assert_eq 201 "$STATUS" "a terminal through w1: $BODY" || return 1
	term=$(j .id)
	# What is typed reaches the shell: its answer is 42, which the typed line does not hold.
	wsc "/v1/workers/w3/v1/workspaces/$WS3/terminals/$term/attach" --subprotocol-token "$TOKEN" \
		--send $'echo typed-$((40+2))\n' --until typed-42
	assert_eq 101 "$(wr .status)" "attach through w1: $WR" || return 1
	assert_eq true "$(wr .found)" "the shell's answer came back: $(wr .data | tail -c 300)"
	tcp DELETE "$W1/v1/workers/w3/v1/workspaces/$WS3/terminals/$term"
	assert_eq 200 "$STATUS" "closing the terminal"
}

t_ws_logs() {
	tcp POST "$W1/v1/workers/w3/v1/workspaces/$WS3/services" "$TOKEN" \
		'{"name":"relayed","command":"echo svc-one; while [ ! -e go-logs ]; do sleep 0.1; done; echo svc-two; exec sleep 1000"}'
	assert_eq 201 "$STATUS" "a service through w1: $BODY" || return 1
	rm -f "$TMP/logs-open"
	python3 "$WSC" "$P1" "/v1/workers/w3/v1/workspaces/$WS3/services/relayed/logs?follow=1" \
		--token "$TOKEN" --until svc-two --ready-file "$TMP/logs-open" >"$TMP/logs.json" 2>&1 &
	local pid=$!
	wait_for -t 60 file_there "$TMP/logs-open" || _fail "the logs' WebSocket did not open: $(cat "$TMP/logs.json")"
	# svc-two is only written after this, so it can only reach a follower.
	tcp POST "$W1/v1/workers/w3/v1/workspaces/$WS3/files/mkdir" "$TOKEN" '{"path":"go-logs"}'
	assert_eq 201 "$STATUS" "go-logs: $BODY"
	wait "$pid"
	WR=$(cat "$TMP/logs.json")
	assert_eq 101 "$(wr .status)" "logs through w1: $WR" || return 1
	assert_eq true "$(wr .found)" "the line written after the follow began came"
	assert_contains svc-one "$(wr .data | tr -d '\0')" "the earlier line too"
	tcp DELETE "$W1/v1/workers/w3/v1/workspaces/$WS3/services/relayed"
	assert_eq 200 "$STATUS" "removing the service: $BODY"
}

t_ws_token() {
	wsc "/v1/workers/w3/v1/events" --subprotocol-token "$ONLY_W1"
	assert_eq 401 "$(wr .status)" "w3 refuses a token only w1 takes: $WR"
	assert_eq "a valid bearer token is required" "$(wr .body | jq -r .error.message)" "w3's own message"
	wsc "/v1/workers/w3/v1/events" --token "$ONLY_W1"
	assert_eq 401 "$(wr .status)" "the same as Authorization"
	# Positive control: the shared token is taken; w3's events follow (its workspace's
	# creation replayed), and this side closes.
	wsc "/v1/workers/w3/v1/events?since=0" --subprotocol-token "$TOKEN" --until "$WS3"
	assert_eq 101 "$(wr .status)" "the shared token: $WR"
	assert_eq true "$(wr .found)" "w3's events name its workspace"
	# No token: refused by w1 itself.
	wsc "/v1/workers/w3/v1/events"
	assert_eq 401 "$(wr .status)" "no token"
}

t_ws_refused() {
	local before
	before=$(grep -c accepted "$HUNG_LOG")
	wsc "/v1/workers/w9/v1/workers/w3/v1/events" --token "$TOKEN"
	assert_eq 400 "$(wr .status)" "forwarding of forwarding over a WebSocket"
	assert_eq "a forwarded request cannot be forwarded again" "$(wr .body | jq -r .error.message)" "why"
	wsc "/v1/workers/w9/v1/events/../workspaces" --token "$TOKEN"
	assert_eq 400 "$(wr .status)" "a dot segment: $(wr .body)"
	wsc "/v1/workers/w7/v1/events" --token "$TOKEN"
	assert_eq 404 "$(wr .status)" "an unconfigured worker"
	assert_eq "$before" "$(grep -c accepted "$HUNG_LOG")" "w9 never saw the refused upgrades"
	# Positive control: a path that is allowed reaches w9 (which never answers: 504).
	wsc "/v1/workers/w9/v1/events" --token "$TOKEN"
	assert_eq 504 "$(wr .status)" "w9 never answers the handshake: $(wr .body)"
	assert_eq "worker w9 (http://127.0.0.1:$P9) did not answer: no answer within 15000 ms" \
		"$(wr .body | jq -r .error.message)" "the error names it"
	assert_eq $((before + 1)) "$(grep -c accepted "$HUNG_LOG")" "w9 saw that one"
}

# w2 goes away while a client follows its events through w1: the client's socket closes with
# w2's own going-away close.
t_ws_gone() {
	local pid
	rm -f "$TMP/gone-open"
	python3 "$WSC" "$P1" "/v1/workers/w2/v1/events" --token "$TOKEN" \
		--ready-file "$TMP/gone-open" >"$TMP/gone.json" 2>&1 &
	pid=$!
	wait_for -t 60 file_there "$TMP/gone-open" || _fail "the WebSocket to w2 did not open: $(cat "$TMP/gone.json")"
	stop_extra w2
	wait "$pid"
	WR=$(cat "$TMP/gone.json")
	assert_eq 101 "$(wr .status)" "events of w2 through w1: $WR" || return 1
	assert_eq 1001 "$(wr .close)" "w2 stopping closes the client's socket (1001)"
	assert_eq null "$(wr .error)" "no timeout"
}

# The serving controller stopping closes the relays through it; the worker serves on.
t_ws_serving_stops() {
	local p4 pid root=$TMP/w4
	p4=$(free_port)
	mkdir -p "$root"
	"$DAEMON" --root "$root" --worker w4 --log-format text --network-range none \
		--adapters host --default-adapter host --listen "tcp:127.0.0.1:$p4" \
		--admin-token-file "$TMP/shared.token" --workers "w4=http://127.0.0.1:$p4,w3=http://127.0.0.1:$P3" \
		>>"$root/controller.log" 2>&1 </dev/null &
	XPID[w4]=$!
	wait_for -t 20 extra_ready w4 "$p4" || {
		_fail "w4 did not start: $(tail -n 5 "$root/controller.log")"
		return 1
	}
	rm -f "$TMP/w4-open"
	python3 "$WSC" "$p4" "/v1/workers/w3/v1/events" --subprotocol-token "$TOKEN" \
		--ready-file "$TMP/w4-open" >"$TMP/w4.json" 2>&1 &
	pid=$!
	wait_for -t 60 file_there "$TMP/w4-open" || _fail "the WebSocket through w4 did not open: $(cat "$TMP/w4.json")"
	stop_extra w4
	wait "$pid"
	WR=$(cat "$TMP/w4.json")
	assert_eq 101 "$(wr .status)" "events of w3 through w4: $WR" || return 1
	assert_eq 0 "$(wr .close)" "w4 stopping closed the client's socket"
	assert_eq null "$(wr .error)" "no timeout"
	tcp GET "$W1/v1/workers/w3/v1/workspaces"
	assert_eq 200 "$STATUS" "w3 serves on"
}

t_down() {
	stop_extra w2
	tcp GET "$W1/v1/workers"
	assert_eq 200 "$STATUS" "GET /v1/workers with w2 stopped" || return 1
	assert_eq down "$(worker_field w2 .state)" "w2"
	assert_eq "worker w2 (http://127.0.0.1:$P2) did not answer: connection refused" \
		"$(worker_field w2 .error)" "w2's error"
	assert_eq up "$(worker_field w1 .state)" "w1"
	assert_eq up "$(worker_field w3 .state)" "w3"
	assert_eq 1 "$(worker_field w3 .workspaces)" "w3's workspace count"
	tcp GET "$W1/v1/workers/w2/v1/workspaces"
	assert_eq 502 "$STATUS" "forwarding to a stopped worker"
	assert_eq "worker w2 (http://127.0.0.1:$P2) did not answer: connection refused" \
		"$(j .error.message)" "the error names it"
	tcp GET "$W1/v1/workers/w3/v1/workspaces"
	assert_eq 200 "$STATUS" "w3 still served"
}

hung_accepted() {
	[[ $(grep -c accepted "$HUNG_LOG") -ge $1 ]]
}

t_hung() {
	local before pid
	before=$(grep -c accepted "$HUNG_LOG")
	curl -s -o "$TMP/hung-body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		"$W1/v1/workers/w9/v1/workspaces" >"$TMP/hung-status" 2>/dev/null &
	pid=$!
	wait_for -t 30 hung_accepted $((before + 1)) || _fail "w9 never saw the forwarded request"
	api -q GET /v1/workspaces
	assert_eq 200 "$STATUS" "GET /v1/workspaces on w1 while a call to w9 hangs"
	tcp GET "$W1/v1/workers/w3/v1/workspaces"
	assert_eq 200 "$STATUS" "forwarding to w3 while a call to w9 hangs"
	kill -0 "$pid" 2>/dev/null || _fail "the hung request ended before the others were answered"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
}

t_alone() {
	# Positive control for the single-worker shape: w3 knows no workers.
	STATUS=$(curl -s -o "$TMP/alone" -w '%{http_code}' --unix-socket "$TMP/w3/station.sock" http://x/v1/workers)
	assert_eq 200 "$STATUS" "GET /v1/workers without --workers"
	assert_eq '[["w3",true,"up"]]' "$(jq -c '[.workers[] | [.name, .self, .state]]' "$TMP/alone")" "itself only"
	STATUS=$(curl -s -o "$TMP/alone" -w '%{http_code}' --unix-socket "$TMP/w3/station.sock" \
		http://x/v1/workers/w1/v1/workspaces)
	assert_eq 404 "$STATUS" "it forwards to none"
}

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
t_browser() {
	local r run
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	[[ -n $WS3 ]] || {
		_fail "no workspace on w3 (the forwarding test failed)"
		return 1
	}
	# A label on w3's workspace (through w1) and on one of w1's: the fleet's list finds both.
	tcp PATCH "$W1/v1/workers/w3/v1/workspaces/$WS3" "$TOKEN" '{"labels":{"fleet":"yes"}}'
	assert_eq 200 "$STATUS" "w3's workspace labelled: $BODY" || return 1
	local w1ws w1other
	new_ws w1ws '{"adapter":"host","labels":{"fleet":"yes"}}' || return 1
	new_ws w1other '{"adapter":"host","labels":{"fleet":"no"}}' || return 1
	r=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 600 node \
		"$SRC/test/integration/workers-dashboard.mjs" "$W1" "$TOKEN" "$WS3" "$w1ws" 2>"$TMP/browser.err")
	[[ -n $r ]] || r="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' '  ')\"}"
	if [[ $(j .ok "$r") != true ]]; then
		_fail "the session stopped at \"$(j .step "$r")\": $(j .error "$r")"
		diag "page: $(j .pageText "$r" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$r")"
		return 1
	fi
	assert_eq '["w1","w2","w3","w9"]' "$(j '[.workers[].name]' "$r")" "the workers on the page"
	assert_eq "$(jq -nc --arg a "w1 $w1ws" --arg b "w3 $WS3" '[$a, $b] | sort')" "$(j .fleetByLabel "$r")" \
		"the fleet's list filtered by label: w1's and w3's (not w1's fleet=no)"
	assert_eq "[\"w3 $WS3\"]" "$(j .fleetByName "$r")" "filtered by name: w3's far"
	assert_eq '["up","down","up","down"]' "$(j '[.workers[].state]' "$r")" "their states"
	assert_eq "worker w2 (http://127.0.0.1:$P2) did not answer: connection refused" \
		"$(j '.workers[1].error' "$r")" "w2's error on the page"
	assert_eq 1 "$(j '.workers[2].workspaces' "$r")" "w3's workspace count"
	assert_eq "[\"$WS3\"]" "$(j .w3Workspaces "$r")" "opening w3 lists its workspaces"
	assert_contains w3 "$(j .crumbs "$r")" "the crumbs name w3"
	assert_eq "$WS3" "$(j .workspace "$r")" "#/w/ID opened the workspace on w3"
	assert_eq "from-the-dashboard" "$(j .runStdout "$r" | tr -d '\n')" "the command's output"
	assert_eq 4 "$(j .runExit "$r")" "its exit code"
	assert_eq running "$(j .liveStatusAtFirst "$r")" "the run still ran when its first line showed"
	assert_eq 201 "$(j .liveMkdir "$r")" "the directory the run waited for"
	assert_eq '["live-one","live-two"]' "$(j .liveOutput "$r")" "the live output"
	assert_eq 201 "$(j .termCreate "$r")" "a terminal on w3"
	assert_eq true "$(j .termEchoed "$r")" "the terminal echoed what was typed"
	assert_eq true "$(j .watchLive "$r")" "the Files tab's watch is live"
	assert_eq 201 "$(j .svcCreate "$r")" "a service on w3"
	assert_eq 201 "$(j .svcMkdir "$r")" "the directory the service waited for"
	assert_eq '["svc-one","svc-two"]' "$(j .svcLogs "$r")" "the service's logs, followed"
	assert_eq '["attach","logs","output","watch"]' \
		"$(j '[.sockets[] | select(test("^/v1/workers/w3/v1/workspaces/")) | split("/") | last] | unique' "$r")" \
		"the streams went through /v1/workers/w3 as WebSockets"
	assert_eq '[]' "$(j '[.sockets[] | select(startswith("/") | not)]' "$r")" "no WebSocket to another origin"
	assert_eq '[]' "$(j '[.requests[] | select(.[1] | startswith("/") | not)]' "$r")" "no request to another origin"
	assert_le 3 "$(j '[.requests[] | select(.[1] | startswith("/v1/workers/w3/v1/workspaces/"))] | length' "$r")" \
		"the workspace's calls went through /v1/workers/w3"
	assert_eq '[]' "$(j .console "$r")" "no console errors (answers of 400 and above: $(j .failed "$r"))"
	# A workspace on w2, which is down: the page names it and offers to try again.
	assert_eq w2 "$(j .down.worker "$r")" "the unreachable workspace's worker"
	assert_eq "Worker w2 is down" "$(j .down.title "$r")" "the page says w2 is down"
	assert_eq "worker w2 (http://127.0.0.1:$P2) did not answer: connection refused" \
		"$(j .down.error "$r")" "with the forward's error"
	assert_eq false "$(j .down.loading "$r")" "no Loading… left on the page"
	assert_eq "Try again" "$(j .down.retry "$r")" "a retry"
	assert_le 1 "$(j .down.askedAgain "$r")" "Try again asks w2 again"
	assert_eq '[]' "$(j '[.downFailed[] | select(.[0] != 502 or (.[2] | startswith("/v1/workers/w2/") | not))]' "$r")" \
		"the failed answers were w2's 502s: $(j .downFailed "$r")"
	# The run is w3's (positive control: asked of w3 itself).
	run=$(j .runId "$r")
	STATUS=$(curl -s -o "$TMP/direct" -w '%{http_code}' --unix-socket "$TMP/w3/station.sock" \
		"http://x/v1/workspaces/$WS3/commands/$run")
	assert_eq 200 "$STATUS" "w3 has the dashboard's run $run"
	assert_eq 4 "$(jq -r .exitCode "$TMP/direct")" "w3's record of it"
}

run_test "GET /v1/workers: each worker's state, version and workspace count; a hung one is down" t_list_up
run_test "a workspace and a command on w3 through w1, with the caller's token" t_forward
run_test "the caller's own token goes on: w3's 401 comes back" t_token
run_test "an unconfigured name, forwarding of forwarding, streams and big bodies are refused" t_refusals
run_test "WebSocket through w1: a run's output on w3 arrives live" t_ws_output
run_test "WebSocket through w1: a terminal on w3 echoes what is typed" t_ws_terminal
run_test "WebSocket through w1: a service's logs on w3 followed" t_ws_logs
run_test "WebSocket through w1: w3's 401 for a token it does not take comes back" t_ws_token
run_test "WebSocket through w1: refused paths never reach the worker" t_ws_refused
run_test "WebSocket through w1: the worker going away closes the client's socket" t_ws_gone
run_test "WebSocket through another serving controller: its stop closes the client's socket" t_ws_serving_stops
run_test "w2 stopped: down with the error, w1 and w3 still served" t_down
run_or_skip "dashboard: the workers (w2 down), w3's workspaces, a command on w3 from w1's page" t_browser
run_test "a hung worker does not hold the serving controller's other requests" t_hung
run_test "a controller without --workers lists itself and forwards nothing" t_alone
