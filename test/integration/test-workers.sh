#!/bin/bash
# Many workers: three controllers on loopback (w1, w2, w3, each its own root and TCP listener)
# and the CLI with a worker list. It creates on a chosen worker and on the one with the most free
# capacity, routes exec/runs/rm by the id's worker, lists across all three; with w2 stopped, ls
# names w2 and still lists w1 and w3, a command on a w2 id names w2 and its URL, w1 and w3 are
# still served; w2 restarted is back. The MCP server over stdio lists across the workers.
. "$(dirname "$0")/lib.sh"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

declare -A W_PID W_PORT W_MAX
W_MAX=([w1]=5 [w2]=5 [w3]=50) # w3 has visibly the most room

# w_start NAME: a controller on $TMP/NAME, listening on its port; waits until it is ready.
w_start() {
	local name=$1 root=$TMP/$1
	mkdir -p "$root"
	[[ -n ${W_PORT[$name]:-} ]] || W_PORT[$name]=$(free_port)
	"$DAEMON" --root "$root" --worker "$name" --log-format text --network-range none \
		--adapters host,container --default-adapter host \
		--max-workspaces "${W_MAX[$name]}" --listen "tcp:127.0.0.1:${W_PORT[$name]}" \
		>>"$root/controller.log" 2>&1 </dev/null &
	W_PID[$name]=$!
	wait_for -t 30 w_ready "$name"
}

w_ready() {
	kill -0 "${W_PID[$1]}" 2>/dev/null || return 1
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --unix-socket "$TMP/$1/station.sock" \
		http://x/v1/ready) == 200 ]]
}

# w_stop NAME: SIGTERM, then wait for it to exit.
w_stop() {
	local pid=${W_PID[$1]:-}
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null
	wait_for -t 30 _pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	W_PID[$1]=
}

# w_api NAME METHOD PATH: one request on that worker's unix socket (sets STATUS and BODY).
w_api() {
	STATUS=$(curl -sS --max-time 60 --unix-socket "$TMP/$1/station.sock" -X "$2" -o "$TMP/w-body" \
		-w '%{http_code}' "http://x$3" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/w-body")
}

w_cleanup() {
	local name id
	for name in w1 w2 w3; do
		[[ -n ${W_PID[$name]:-} ]] || continue
		w_api "$name" GET /v1/workspaces
		for id in $(jq -r '.workspaces[]?.id' <<<"$BODY" 2>/dev/null); do
			w_api "$name" DELETE "/v1/workspaces/$id"
		done
		w_stop "$name"
	done
}
trap 'rc=$?; w_cleanup; (exit $rc); _cleanup' EXIT

for name in w1 w2 w3; do
	if ! w_start "$name"; then
		not_ok "worker $name starts" "see its log"
		tail -n 30 "$TMP/$name/controller.log" >&2
		exit 1
	fi
done

# The workers file: per-worker token files (each controller made its own admin token).
WORKERS_FILE=$TMP/workers
{
	echo "# three workers on loopback"
	for name in w1 w2 w3; do
		echo "$name http://127.0.0.1:${W_PORT[$name]} $TMP/$name/admin.token"
	done
} >"$WORKERS_FILE"

# wcli ARGS...: the CLI with the worker list (and nothing else that could choose a controller).
wcli() {
	STATION_WORKERS_FILE=$WORKERS_FILE HOME=$TMP "$CLI_BIN" "$@"
}

t_capacity() {
	w_api w3 GET /v1/worker
	assert_status 200 "GET /v1/worker" || return 1
	assert_eq 50 "$(j .capacity.workspaces.max)" "capacity.workspaces.max is --max-workspaces"
	assert_eq 0 "$(j .capacity.workspaces.used)" "nothing used yet"
	assert_eq 50 "$(j .capacity.workspaces.free)" "free"
	assert_eq true "$(j '.capacity.memoryBytes.available > 0 and
		.capacity.memoryBytes.total >= .capacity.memoryBytes.available')" "memory" || return 1
	assert_eq true "$(j '.capacity.cpus >= 1')" "cpus"
}

t_worker_ls() {
	local out
	out=$(wcli worker ls --json) || { _fail "worker ls failed"; return 1; }
	assert_eq "w1 w2 w3" "$(jq -r '[.[].name] | join(" ")' <<<"$out")" "names in list order"
	assert_eq "up up up" "$(jq -r '[.[].state] | join(" ")' <<<"$out")" "all up"
	assert_eq "5 5 50" "$(jq -r '[.[].worker.capacity.workspaces.free] | map(tostring) | join(" ")' <<<"$out")" \
		"capacity of each"
	out=$(wcli worker ls)
	assert_match "^w3 +http://127.0.0.1:${W_PORT[w3]} +up +[0-9.]+ +0 +50 " "$(grep '^w3 ' <<<"$out")" \
		"the table row of w3"
}

WS1= WS2= WS3= WSF=
t_create_on_each() {
	WS1=$(wcli create --worker w1) && WS2=$(wcli create --worker w2) && WS3=$(wcli create --worker w3) || {
		_fail "create --worker failed"
		return 1
	}
	assert_match '^w1-[a-z2-7]{26}$' "$WS1" "on w1"
	assert_match '^w2-[a-z2-7]{26}$' "$WS2" "on w2"
	assert_match '^w3-[a-z2-7]{26}$' "$WS3" "on w3"
	w_api w2 GET "/v1/workspaces/$WS2"
	assert_status 200 "w2 holds it"
	w_api w1 GET "/v1/workspaces/$WS2"
	assert_status 404 "w1 does not"
}

t_create_most_free() {
	WSF=$(wcli create) || { _fail "create failed"; return 1; }
	assert_match '^w3-' "$WSF" "the worker with the most free workspaces"
	local err
	err=$(wcli create --worker w9 2>&1 >/dev/null)
	assert_contains "worker w9 is not in the worker list" "$err" "an unknown worker is named"
}

t_route_by_id() {
	local ws out
	for ws in "$WS1" "$WS2" "$WS3"; do
		out=$(wcli exec "$ws" -- 'echo "hi from $PWD"') || { _fail "exec on $ws failed"; return 1; }
		assert_match "^hi from .*/workspaces/$ws/" "$out" "exec ran on ${ws%%-*}" || return 1
		out=$(wcli runs --json "$ws") || { _fail "runs on $ws failed"; return 1; }
		assert_eq 1 "$(jq ".commands | length" <<<"$out")" "the run is listed on its worker"
	done
	# Files and events of one workspace go to its worker too.
	out=$(wcli files put "$WS2" - note.txt <<<"on w2" >/dev/null && wcli files cat "$WS2" note.txt)
	assert_eq "on w2" "$out" "files on w2"
	out=$(timeout 60 env STATION_WORKERS_FILE="$WORKERS_FILE" HOME="$TMP" "$CLI_BIN" events \
		--workspace "$WS2" --since 0 --count 1)
	assert_eq "$WS2" "$(jq -r .workspaceId <<<"$out")" "events of a w2 workspace"
}

t_ls_across() {
	local out
	out=$(wcli ls --json) || { _fail "ls failed"; return 1; }
	assert_eq "$(printf '%s\n' "$WS1" "$WS2" "$WS3" "$WSF" | sort | tr '\n' ' ')" \
		"$(jq -r '.[].id' <<<"$out" | sort | tr '\n' ' ')" "every worker's workspaces"
	out=$(wcli ls)
	assert_match "^ID +WORKER +STATE" "$(head -n1 <<<"$out")" "a WORKER column"
	assert_match "^$WS2 +w2 +ready" "$(grep "^$WS2" <<<"$out")" "w2's row"
}

t_env_form() {
	# STATION_WORKERS over the unix sockets (no token needed there).
	local out
	out=$(STATION_WORKERS="w1=unix:$TMP/w1/station.sock,w2=unix:$TMP/w2/station.sock,w3=unix:$TMP/w3/station.sock" \
		HOME=$TMP "$CLI_BIN" ls --json) || { _fail "ls failed"; return 1; }
	assert_eq 4 "$(jq length <<<"$out")" "all four"
	out=$(STATION_WORKERS="w1=unix:$TMP/w1/station.sock" HOME=$TMP "$CLI_BIN" exec "$WS1" -- 'echo env') ||
		{ _fail "exec failed"; return 1; }
	assert_eq env "$out" "routed by STATION_WORKERS"
}

t_unknown_prefix() {
	local err rc
	err=$(wcli exec w9-aaaaaaaaaaaaaaaaaaaaaaaaaa -- true 2>&1 >/dev/null)
	rc=$?
	assert_ne 0 "$rc" "exit status"
	assert_contains "workspace w9-aaaaaaaaaaaaaaaaaaaaaaaaaa is on worker w9, which is not in the worker list" \
		"$err" "the message names the worker"
}

t_bad_config() {
	local err rc
	err=$(STATION_WORKERS="W1=http://127.0.0.1:1" HOME=$TMP "$CLI_BIN" ls 2>&1)
	rc=$?
	assert_eq 64 "$rc" "a bad name is a usage error"
	assert_contains "bad worker name 'W1'" "$err" "named"
	err=$(STATION_WORKERS="w1=http://127.0.0.1:1,w1=http://127.0.0.1:2" HOME=$TMP "$CLI_BIN" ls 2>&1)
	assert_contains "worker w1 is named twice" "$err" "a duplicate"
	# A token file others may read is refused (positive control: the 0600 files above work).
	cp "$TMP/w1/admin.token" "$TMP/open.token"
	chmod 0644 "$TMP/open.token"
	echo "w1 http://127.0.0.1:${W_PORT[w1]} $TMP/open.token" >"$TMP/workers-open"
	err=$(STATION_WORKERS_FILE=$TMP/workers-open HOME=$TMP "$CLI_BIN" ls 2>&1)
	rc=$?
	assert_ne 0 "$rc" "refused"
	assert_contains "has mode 0644" "$err" "the mode is named"
	chmod 0600 "$TMP/open.token"
	err=$(STATION_WORKERS_FILE=$TMP/workers-open HOME=$TMP "$CLI_BIN" ls --json 2>&1)
	assert_eq 0 "$?" "the same file at 0600 works: $err"
}

t_misnamed() {
	# w1's controller listed under another name: its workspaces would route elsewhere, so the
	# list refuses them naming the worker (positive control: w3 under its own name is listed).
	local out err rc
	out=$(STATION_WORKERS="wx=unix:$TMP/w1/station.sock,w3=unix:$TMP/w3/station.sock" HOME=$TMP \
		"$CLI_BIN" ls --json 2>"$TMP/ls-err")
	rc=$?
	err=$(cat "$TMP/ls-err")
	assert_eq 0 "$rc" "exit 0: w3 answered"
	assert_contains "worker wx (unix:$TMP/w1/station.sock) listed workspace '$WS1', whose id does not name it" \
		"$err" "the misnamed worker is named"
	assert_contains "$WS3" "$(jq -r '.[].id' <<<"$out")" "w3's workspaces listed"
	assert_eq "" "$(jq -r '.[] | select(.worker == "w1") | .id' <<<"$out")" "none of w1's"
}

t_w2_down() {
	w_stop w2
	local out err rc url=http://127.0.0.1:${W_PORT[w2]}
	out=$(wcli ls --json 2>"$TMP/ls-err")
	rc=$?
	err=$(cat "$TMP/ls-err")
	assert_eq 0 "$rc" "ls exits 0 while some workers answer"
	assert_eq "$(printf '%s\n' "$WS1" "$WS3" "$WSF" | sort | tr '\n' ' ')" \
		"$(jq -r '.[].id' <<<"$out" | sort | tr '\n' ' ')" "w1's and w3's workspaces"
	assert_contains "worker w2 ($url) did not answer" "$err" "ls names w2 on stderr"
	err=$(wcli exec "$WS2" -- true 2>&1 >/dev/null)
	rc=$?
	assert_ne 0 "$rc" "exec on a w2 id fails"
	assert_contains "worker w2 ($url) did not answer" "$err" "the error names w2 and its URL"
	out=$(wcli exec "$WS1" -- 'echo one') && out+=$(wcli exec "$WS3" -- 'echo three')
	assert_eq onethree "$out" "w1 and w3 still served"
	out=$(wcli worker ls --json)
	assert_eq "up down up" "$(jq -r '[.[].state] | join(" ")' <<<"$out")" "worker ls: w2 down"
	assert_contains "did not answer" "$(jq -r '.[1].error' <<<"$out")" "with the error"
	local ws
	ws=$(wcli create) || { _fail "create while w2 is down failed"; return 1; }
	assert_match '^w3-' "$ws" "create skips w2"
	WSF2=$ws
}

t_w2_back() {
	w_start w2 || { _fail "w2 did not start again"; return 1; }
	local out
	out=$(wcli ls --json 2>"$TMP/ls-err") || { _fail "ls failed"; return 1; }
	assert_eq "" "$(cat "$TMP/ls-err")" "nothing unreachable"
	assert_contains "$WS2" "$(jq -r '.[].id' <<<"$out")" "w2's workspace is listed again"
	out=$(wcli exec "$WS2" -- 'echo back')
	assert_eq back "$out" "exec on w2 again"
	wcli rm "$WS2" >/dev/null || { _fail "rm failed"; return 1; }
	w_api w2 GET "/v1/workspaces/$WS2"
	assert_status 404 "rm routed to w2"
}

t_all_down() {
	local err rc
	err=$(STATION_WORKERS="w8=http://127.0.0.1:1,w9=unix:$TMP/none.sock" HOME=$TMP "$CLI_BIN" ls 2>&1)
	rc=$?
	assert_eq 1 "$rc" "ls exits 1 when no worker answers"
	assert_contains "worker w8 (http://127.0.0.1:1) did not answer" "$err" "w8 named"
	assert_contains "worker w9 (unix:$TMP/none.sock) did not answer" "$err" "w9 named"
}

t_mcp_across() {
	STATION_WORKERS_FILE=$WORKERS_FILE HOME=$TMP python3 - "$CLI_BIN" "$WS1" "$WS3" <<'PY'
import json, os, select, subprocess, sys, time
cli, ws1, ws3 = sys.argv[1:4]
p = subprocess.Popen([cli, "mcp", "--adapters", "host"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
buf = b""
def rpc(i, method, params):
    global buf
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
    p.stdin.flush()
    end = time.monotonic() + 120
    while True:
        while b"\n" not in buf:
            r, _, _ = select.select([p.stdout], [], [], max(0, end - time.monotonic()))
            if not r:
                sys.exit("no answer to %s" % method)
            chunk = os.read(p.stdout.fileno(), 1 << 20)
            if not chunk:
                sys.exit("the server closed its output")
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        m = json.loads(line)
        if m.get("id") == i:
            return m
rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); p.stdin.flush()
tools = rpc(2, "tools/list", {})["result"]["tools"]
create = [t for t in tools if t["name"] == "workspace_create"][0]
if "worker" not in create["inputSchema"]["properties"]:
    sys.exit("workspace_create has no worker argument")
res = rpc(3, "tools/call", {"name": "workspace_list", "arguments": {}})["result"]
ids = [w["id"] for w in res["structuredContent"]["workspaces"]]
if ws1 not in ids or ws3 not in ids or not any(i.startswith("w2-") for i in ids):
    sys.exit("workspace_list does not span the workers: %r" % ids)
if res["structuredContent"].get("unreachable") != []:
    sys.exit("unreachable: %r" % res["structuredContent"].get("unreachable"))
res = rpc(4, "tools/call", {"name": "workspace_create", "arguments": {"worker": "w1"}})["result"]
if res.get("isError") or not res["structuredContent"]["id"].startswith("w1-"):
    sys.exit("workspace_create on w1: %r" % res)
wid = res["structuredContent"]["id"]
res = rpc(5, "tools/call", {"name": "exec", "arguments": {"workspaceId": wid, "command": "echo mcp"}})["result"]
if res.get("isError") or "mcp" not in json.dumps(res):
    sys.exit("exec on the w1 workspace: %r" % res)
res = rpc(6, "tools/call", {"name": "workspace_delete", "arguments": {"workspaceId": wid}})["result"]
p.stdin.close()
p.wait(timeout=60)
PY
	assert_eq 0 "$?" "the MCP server lists across workers and creates on one"
}

run_test capacity t_capacity
run_test worker_ls t_worker_ls
run_test create_on_each t_create_on_each
run_test create_most_free t_create_most_free
run_test route_by_id t_route_by_id
run_test ls_across t_ls_across
run_test env_form t_env_form
run_test unknown_prefix t_unknown_prefix
run_test bad_config t_bad_config
run_test mcp_across t_mcp_across
run_test misnamed t_misnamed
run_test w2_down t_w2_down
run_test w2_back t_w2_back
run_test all_down t_all_down
