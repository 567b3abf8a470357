#!/bin/bash
# Placement across workers (docs/operations.md, "Placement"): three container controllers on
# loopback, each with --workers naming all three: W1 shared (room for 20), W2 private to tenant
# b (--tenant b, room for 1000: the most free), W3 full (--max-workspaces 0). Tenant a's and
# tenant b's tokens are the same on every worker (minted on W1, their rows copied into the
# others' stores, as a fleet sharing its tokens has them). Tenant a's creates through the CLI
# (STATION_WORKERS), the Python SDK, the TypeScript SDK and the server-side "placement":"any"
# (sent to W2, W3 and W1) all land on W1, never on W2 (another tenant's) or W3 (full); tenant
# b's go to W2, its own, first; the operator's may go to W2. With W1 stopped, a's create fails
# naming why each worker was skipped. Discovery: a client given W1's URL alone
# (STATION_WORKERS=discover:URL) lists the workspaces of all three.
# run-all: slow: three container controllers and a dozen container creates
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

# all_on WANT IDS...: every id names worker WANT.
all_on() {
	local want=$1 id seen=()
	shift
	for id in "$@"; do seen+=("$(worker_of "$id")"); done
	for id in "${seen[@]}"; do
		[[ $id == "$want" ]] || {
			_fail "placed on ${seen[*]}, expected $want for each"
			return 1
		}
	done
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

t_cli_tenant_a() {
	local ids=() id i
	for i in 1 2 3; do
		id=$(STATION_TOKEN=$TA pcli create --image "$IMAGE" 2>"$TMP/err") || {
			_fail "create: $(cat "$TMP/err")"
			return 1
		}
		ids+=("$id")
	done
	all_on "${NAME[1]}" "${ids[@]}"
}

t_cli_tenant_b_own_first() {
	local id
	id=$(STATION_TOKEN=$TB pcli create --image "$IMAGE" 2>"$TMP/err") || {
		_fail "create: $(cat "$TMP/err")"
		return 1
	}
	all_on "${NAME[2]}" "$id"
}

SDK_PY=$SRC/sdk/python/src
t_python_sdk() {
	local out
	out=$(PYTHONPATH=$SDK_PY python3 - "$LIST" "$IMAGE" "$TA" "$TB" <<'EOF'
import sys
from station_sandbox import Client
workers = dict(item.split("=", 1) for item in sys.argv[1].split(","))
for token in (sys.argv[3], sys.argv[3], sys.argv[4]):
    c = Client(workers=workers, token=token)
    print(c.workspaces.create(image=sys.argv[2]).worker)
EOF
	) || {
		_fail "python: $out"
		return 1
	}
	assert_eq "${NAME[1]} ${NAME[1]} ${NAME[2]}" "$(tr '\n' ' ' <<<"$out" | sed 's/ $//')" \
		"a's twice on W1, b's on W2"
}

SDK_TS=$SRC/sdk/typescript
t_typescript_sdk() {
	local out
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		_fail "node and npm are needed (scripts/install-deps)"
		return 1
	fi
	# shellcheck disable=SC2016 # expanded by the inner shell
	flock -w 600 "$SDK_TS" bash -c 'cd "$1" && { npm ls --offline --all >/dev/null 2>&1 ||
		npm ci --prefer-offline --no-audit --no-fund; } && npx tsc -p tsconfig.json' _ "$SDK_TS" \
		>"$TMP/tsc.log" 2>&1 || {
		_fail "the TypeScript SDK does not build: $(tail -n 5 "$TMP/tsc.log")"
		return 1
	}
	out=$(node --input-type=module - "$LIST" "$IMAGE" "$TA" "$TB" <<EOF
import { StationClient } from "$SDK_TS/dist/index.js";
const [list, image, ta, tb] = process.argv.slice(2);
const workers = Object.fromEntries(list.split(",").map((e) => e.split("=")));
for (const token of [ta, ta, tb]) {
  const c = new StationClient({ workers, token });
  console.log((await c.createWorkspace({ image })).worker);
}
EOF
	) || {
		_fail "typescript: $out"
		return 1
	}
	assert_eq "${NAME[1]} ${NAME[1]} ${NAME[2]}" "$(tr '\n' ' ' <<<"$out" | sed 's/ $//')" \
		"a's twice on W1, b's on W2"
}

t_server_placement() {
	local ids=() i body
	body=$(jq -nc --arg i "$IMAGE" '{image: $i, placement: "any"}')
	for i in 2 3 1; do
		t_api "$i" "$TA" POST /v1/workspaces "$body"
		assert_status 201 "a's placed create sent to worker $i" || return 1
		ids+=("$(j .id)")
	done
	all_on "${NAME[1]}" "${ids[@]}" || return 1
	t_api 1 "$TB" POST /v1/workspaces "$body"
	assert_status 201 "b's placed create sent to W1" || return 1
	all_on "${NAME[2]}" "$(j .id)" || return 1
	# without placement the create stays where it was sent (W2 refuses a 403, W1 takes it)
	t_api 2 "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
	assert_status 403 "a's create sent to W2 without placement"
	t_api 1 "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i, placement: "w9"}')"
	assert_status 400 "placement other than any" || return 1
	assert_eq placement "$(j .error.field)" "the field named"
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
	w_start 1
}

t_discovery() {
	local out want
	out=$(STATION_WORKERS="discover:${URL[1]}" STATION_TOKEN=$ADMIN HOME=$TMP "$CLI_BIN" worker ls --json)
	assert_eq "${NAME[1]} ${NAME[2]} ${NAME[3]}" "$(jq -r '[.[].name] | join(" ")' <<<"$out")" \
		"the workers learnt from W1's GET /v1/workers" || return 1
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
		"the workspaces of every worker, W1's and W2's"
}

run_test "GET /v1/worker says who calls: its scope and tenant" t_worker_says_who_calls
run_test "CLI: tenant a's creates never land on b's private worker nor the full one" t_cli_tenant_a
run_test "CLI: tenant b's create goes to its own private worker first" t_cli_tenant_b_own_first
run_test "Python SDK: a's creates on the shared worker, b's on its own" t_python_sdk
run_test "TypeScript SDK: a's creates on the shared worker, b's on its own" t_typescript_sdk
run_test "server side: placement any on any worker forwards a's create to the shared one, b's to its own" t_server_placement
run_test "none left: the create fails naming why each worker was skipped" t_none_left
run_test "discovery: a client given one worker's URL lists workspaces on all" t_discovery
