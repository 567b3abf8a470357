#!/bin/bash
# Placement across workers (docs/operations.md, "Placement"): three container controllers on
# loopback, each with --workers naming all three: W1 shared (room for 20), W2 private to tenant
# b (--tenant b, room for 1000: the most free), W3 full (--max-workspaces 0). Tenant a's and
# tenant b's tokens are the same on every worker (minted on W1, their rows copied into the
# others' stores, as a fleet sharing its tokens has them). Tenant a's creates through the CLI
# (STATION_WORKERS), the Python SDK, the TypeScript SDK and the server-side "placement":"any"
# (sent to W2, W3 and W1) all land on W1, never on W2 (another tenant's) or W3 (full); tenant
# b's go to W2, its own, first (W2 restarted with less room than W1 for that); the operator's
# go to the most free. With W1 stopped, a's create fails naming why each worker was skipped.
# Discovery: a client given W1's URL alone (the CLI and the Python SDK with
# STATION_WORKERS=discover:URL, the TypeScript SDK's StationClient.discover()) lists the
# workspaces of all three.
# run-all: slow: three container controllers and fifteen container creates
. "$(dirname "$0")/container-lib.sh"

container_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# One admin token for all three (--admin-token-file), so that the operator sees every worker.
ADMIN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && printf '%s\n' "$ADMIN" >"$TMP/admin.token")

declare -A PID PORT NAME URL
for i in 1 2 3; do
	NAME[$i]=${WORKER}$i
	PORT[$i]=$(free_port)
	URL[$i]=http://127.0.0.1:${PORT[$i]}
done
LIST="${NAME[1]}=${URL[1]},${NAME[2]}=${URL[2]},${NAME[3]}=${URL[3]}"
declare -A EXTRA=([1]="--max-workspaces 20" [2]="--tenant b" [3]="--max-workspaces 0")

w_ready() {
	kill -0 "${PID[$1]}" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --unix-socket "$TMP/w$1/station.sock" \
		http://x/v1/ready) == 200 ]]
}

# w_start I: worker I on $TMP/wI; waits until it is ready.
w_start() {
	local i=$1
	mkdir -p "$TMP/w$i"
	# shellcheck disable=SC2086 # EXTRA holds flags
	"$DAEMON" --root "$TMP/w$i" --worker "${NAME[$i]}" --log-format text --network-range none \
		--adapters container --runtime "$RUNTIME" --seccomp-dir "$PROFILES" --import-dir "$TMP" \
		--tenant-images 'busybox@*' --tenant-networks none --workers "$LIST" \
		--admin-token-file "$TMP/admin.token" \
		--listen "tcp:127.0.0.1:${PORT[$i]}" ${EXTRA[$i]} \
		>>"$TMP/w$i/controller.log" 2>&1 </dev/null &
	PID[$i]=$!
	wait_for -t 30 w_ready "$i" || {
		diag "worker ${NAME[$i]} did not become ready"
		tail -n 20 "$TMP/w$i/controller.log" | sed 's/^/#   /'
		return 1
	}
}

w_stop() {
	local pid=${PID[$1]:-}
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null
	wait_for -t 30 _pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	PID[$1]=
}

# w_api I METHOD PATH [BODY]: on worker I's unix socket (the operator); sets STATUS and BODY.
w_api() {
	STATUS=$(curl -sS --max-time 120 --unix-socket "$TMP/w$1/station.sock" -X "$2" \
		-H 'Content-Type: application/json' ${4:+--data-binary "$4"} -o "$TMP/w-body" \
		-w '%{http_code}' "http://x$3" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/w-body")
}

# t_api I TOKEN METHOD PATH [BODY]: on worker I's TCP listener with TOKEN.
t_api() {
	STATUS=$(curl -sS --max-time 120 -H "Authorization: Bearer $2" -X "$3" \
		-H 'Content-Type: application/json' ${5:+--data-binary "$5"} -o "$TMP/w-body" \
		-w '%{http_code}' "${URL[$1]}$4" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/w-body")
}

cleanup_workers() {
	local rc=$? i id
	for i in 1 2 3; do
		[[ -n ${PID[$i]:-} ]] || continue
		w_api "$i" GET /v1/workspaces
		for id in $(jq -r '.workspaces[]?.id' <<<"$BODY" 2>/dev/null); do
			w_api "$i" DELETE "/v1/workspaces/$id"
		done
		w_stop "$i"
	done
	(exit "$rc")
	_container_cleanup
}
trap cleanup_workers EXIT

for i in 1 2 3; do
	w_start "$i" || {
		not_ok "worker $i starts" "see the diagnostics above"
		exit 1
	}
done
for i in 1 2; do
	w_api "$i" POST /v1/images "$(jq -nc --arg p "$TMP/image" '{path: $p, name: "busybox"}')"
	[[ $STATUS == 201 ]] || {
		not_ok "busybox imports on worker $i" "HTTP $STATUS $(_short "$BODY")"
		exit 1
	}
done
IMAGE=busybox@$IMAGE_DIGEST

# Tenant tokens minted on W1, then the same rows in W2's and W3's stores (stopped meanwhile).
mint() {
	w_api 1 POST /v1/tokens "{\"name\":\"$1\",\"scope\":\"tenant\",\"tenant\":\"$1\"}"
	[[ $STATUS == 201 ]] || return 1
	jq -r .token <<<"$BODY"
}
if ! TA=$(mint a) || ! TB=$(mint b); then
	not_ok "tenant tokens are minted" "see the controller's log"
	exit 1
fi
COLS=$(sqlite3 "$TMP/w1/station.db" "SELECT group_concat(name) FROM pragma_table_info('tokens') WHERE name != 'id'")
for i in 2 3; do
	w_stop "$i"
	if ! sqlite3 "$TMP/w$i/station.db" "ATTACH '$TMP/w1/station.db' AS w1;
		INSERT INTO tokens ($COLS) SELECT $COLS FROM w1.tokens WHERE token_id != 'admin'" ||
		! w_start "$i"; then
		not_ok "worker $i takes the tenant tokens" "see the diagnostics above"
		exit 1
	fi
done

# worker_of ID: the worker name an id carries (everything before its last '-').
worker_of() {
	printf '%s\n' "${1%-*}"
}

t_worker_says_who_calls() {
	t_api 2 "$TA" GET /v1/worker
	assert_status 200 "a's GET /v1/worker on W2" || return 1
	assert_eq b "$(j .tenant)" "W2 is b's"
	assert_eq '{"scope":"tenant","tenant":"a"}' "$(jq -c .caller <<<"$BODY")" "the caller is tenant a"
	t_api 1 "$ADMIN" GET /v1/worker
	assert_eq '{"scope":"admin","tenant":null}' "$(jq -c .caller <<<"$BODY")" "the operator"
}

pcli() {
	STATION_WORKERS=$LIST HOME=$TMP "$CLI_BIN" "$@"
}

# Each client's create, with TOKEN and no worker named: prints the new workspace's worker.
cli_create() {
	local id
	id=$(STATION_TOKEN=$1 pcli create --image "$IMAGE") || return 1
	worker_of "$id"
}

SDK_PY=$SRC/sdk/python/src
python_create() {
	PYTHONPATH=$SDK_PY python3 - "$LIST" "$IMAGE" "$1" <<'EOF'
import sys
from station_sandbox import Client
workers = dict(item.split("=", 1) for item in sys.argv[1].split(","))
print(Client(workers=workers, token=sys.argv[3]).workspaces.create(image=sys.argv[2]).worker)
EOF
}

SDK_TS=$SRC/sdk/typescript
TS_BUILT=
typescript_build() {
	[[ -n $TS_BUILT ]] && return 0
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		diag "node and npm are needed (scripts/install-deps)"
		return 1
	fi
	# shellcheck disable=SC2016 # expanded by the inner shell
	flock -w 600 "$SDK_TS" bash -c 'cd "$1" && { npm ls --offline --all >/dev/null 2>&1 ||
		npm ci --prefer-offline --no-audit --no-fund; } && npx tsc -p tsconfig.json' _ "$SDK_TS" \
		>"$TMP/tsc.log" 2>&1 || {
		diag "the TypeScript SDK does not build: $(tail -n 5 "$TMP/tsc.log")"
		return 1
	}
	TS_BUILT=1
}
typescript_create() {
	typescript_build || return 1
	node --input-type=module - "$LIST" "$IMAGE" "$1" <<EOF
import { StationClient } from "$SDK_TS/dist/index.js";
const [list, image, token] = process.argv.slice(2);
const workers = Object.fromEntries(list.split(",").map((e) => e.split("=")));
console.log((await new StationClient({ workers, token }).createWorkspace({ image })).worker);
EOF
}

# server_create I TOKEN: "placement":"any" sent to worker I.
server_create() {
	t_api "$1" "$2" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i, placement: "any"}')"
	[[ $STATUS == 201 ]] || {
		echo "HTTP $STATUS $BODY"
		return 1
	}
	worker_of "$(j .id)"
}

# lands WANT WHAT COMMAND...: the create COMMAND makes lands on worker WANT.
lands() {
	local want=$1 what=$2 got
	shift 2
	got=$("$@" 2>"$TMP/err") || {
		_fail "$what: ${got:+$got }$(tail -n 5 "$TMP/err")"
		return 1
	}
	assert_eq "$want" "$got" "$what"
}

t_tenant_a() {
	lands "${NAME[1]}" "CLI" cli_create "$TA"
	lands "${NAME[1]}" "CLI again" cli_create "$TA"
	lands "${NAME[1]}" "Python SDK" python_create "$TA"
	lands "${NAME[1]}" "Python SDK again" python_create "$TA"
	lands "${NAME[1]}" "TypeScript SDK" typescript_create "$TA"
	lands "${NAME[1]}" "TypeScript SDK again" typescript_create "$TA"
	lands "${NAME[1]}" "placement any sent to W2" server_create 2 "$TA"
	lands "${NAME[1]}" "placement any sent to W3" server_create 3 "$TA"
	lands "${NAME[1]}" "placement any sent to W1" server_create 1 "$TA"
}

t_placement_field() {
	t_api 2 "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
	assert_status 403 "without placement a's create stays on W2, which refuses it"
	t_api 1 "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i, placement: "w9"}')"
	assert_status 400 "placement other than any" || return 1
	assert_eq placement "$(j .error.field)" "the field named"
}

# b's own worker first even with less room than the shared one: W2 again with room for 5
# (W1 has 10 left), which the most free alone would pass over.
t_tenant_b_own_first() {
	w_stop 2
	EXTRA[2]="--tenant b --max-workspaces 5"
	w_start 2 || return 1
	lands "${NAME[2]}" "CLI" cli_create "$TB"
	lands "${NAME[2]}" "Python SDK" python_create "$TB"
	lands "${NAME[2]}" "TypeScript SDK" typescript_create "$TB"
	lands "${NAME[2]}" "placement any sent to W1" server_create 1 "$TB"
	lands "${NAME[1]}" "the operator's placement any: the most free" server_create 2 "$ADMIN"
}

t_none_left() {
	local err want
	w_stop 1
	want="worker ${NAME[1]} (${URL[1]}) did not answer: connection refused; worker ${NAME[2]} is private to another tenant; worker ${NAME[3]} is full"
	if STATION_TOKEN=$TA pcli create --image "$IMAGE" >/dev/null 2>"$TMP/err"; then
		_fail "the CLI's create succeeded"
	fi
	# the C library says the system's words for a refused connection (strerror)
	err=$(sed 's/did not answer: Connection refused/did not answer: connection refused/' "$TMP/err")
	assert_eq "station-sandbox: no worker can take this workspace: $want" "$err" \
		"the CLI says why for each"
	t_api 2 "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i, placement: "any"}')"
	assert_status 503 "the server-side placement"
	assert_eq "no worker can take this workspace: $want" "$(j .error.message)" \
		"the server says why for each"
	err=$(PYTHONPATH=$SDK_PY python3 - "$LIST" "$IMAGE" "$TA" <<'EOF' 2>&1
import sys
from station_sandbox import Client, Unavailable
workers = dict(item.split("=", 1) for item in sys.argv[1].split(","))
try:
    Client(workers=workers, token=sys.argv[3]).workspaces.create(image=sys.argv[2])
except Unavailable as e:
    print(e.message)
EOF
	)
	assert_eq "no worker can take this workspace: $want" "$err" "the Python SDK says why for each"
	err=$(typescript_build && node --input-type=module - "$LIST" "$IMAGE" "$TA" <<EOF 2>&1
import { StationClient } from "$SDK_TS/dist/index.js";
const [list, image, token] = process.argv.slice(2);
const workers = Object.fromEntries(list.split(",").map((e) => e.split("=")));
try {
  await new StationClient({ workers, token }).createWorkspace({ image });
} catch (e) {
  console.log(e.status + " " + e.message);
}
EOF
	)
	assert_eq "503 no worker can take this workspace: $want" "$err" \
		"the TypeScript SDK says why for each"
	w_start 1
}

t_discovery() {
	local out want
	out=$(STATION_WORKERS="discover:${URL[1]}" STATION_TOKEN=$ADMIN HOME=$TMP "$CLI_BIN" worker ls --json)
	assert_eq "${NAME[1]} ${NAME[2]} ${NAME[3]}" "$(jq -r '[.[].name] | join(" ")' <<<"$out")" \
		"the CLI: the workers learnt from W1's GET /v1/workers" || return 1
	want=$(for i in 1 2 3; do
		w_api "$i" GET /v1/workspaces
		j '.workspaces[].id'
	done | sort | tr '\n' ' ')
	out=$(STATION_WORKERS="discover:${URL[1]}" STATION_TOKEN=$ADMIN HOME=$TMP "$CLI_BIN" ls --json \
		2>"$TMP/err") || {
		_fail "ls: $(cat "$TMP/err")"
		return 1
	}
	assert_eq "" "$(cat "$TMP/err")" "every worker answered"
	assert_eq "$want" "$(jq -r '.[].id' <<<"$out" | sort | tr '\n' ' ')" \
		"the CLI: the workspaces of every worker"
	out=$(STATION_WORKERS="discover:${URL[1]}" STATION_TOKEN=$ADMIN PYTHONPATH=$SDK_PY python3 -c '
from station_sandbox import Client
print(" ".join(sorted(w.id for w in Client().workspaces.list())))' 2>&1)
	assert_eq "$want" "$out " "the Python SDK (STATION_WORKERS=discover:URL)"
	out=$(typescript_build && STATION_WORKERS="discover:${URL[1]}" STATION_TOKEN=$ADMIN \
		node --input-type=module - <<EOF 2>&1
import { StationClient } from "$SDK_TS/dist/index.js";
const c = await StationClient.discover();
console.log((await c.workspaces()).map((w) => w.id).sort().join(" "));
EOF
	)
	assert_eq "$want" "$out " "the TypeScript SDK (StationClient.discover())"
}

run_test "GET /v1/worker says who calls: its scope and tenant" t_worker_says_who_calls
run_test "tenant a's creates (CLI, both SDKs, placement any sent to each worker) never land on b's private worker nor the full one" t_tenant_a
run_test "placement: without it a create stays where sent; a value other than any is 400" t_placement_field
run_test "tenant b's creates go to its own private worker first, with less room than the shared one" t_tenant_b_own_first
run_test "none left: the create fails naming why each worker was skipped" t_none_left
run_test "discovery: a client given one worker's URL lists workspaces on all" t_discovery
