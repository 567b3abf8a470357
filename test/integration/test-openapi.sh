#!/bin/bash
# docs/openapi.yaml: linted by Redocly CLI (pinned in scripts/openapi-lint/package-lock.json,
# installed with npm ci), served by the controller at GET /v1/openapi.json as the same JSON the
# build made from it, behind the same bearer-token rule as every API path, and describing what
# the controller really answers (a workspace, a run, a service, a terminal, a file entry, an
# image list, the worker, readiness and an error, each checked against its schema). The
# endpoint table against the description is the unit test test-api-openapi.
. "$(dirname "$0")/lib.sh"

LINT=$SRC/scripts/openapi-lint
SPEC_JSON=$BUILD/src/api/openapi.json
CHECK=$SRC/test/helpers/openapi-check

# Lint: npm ci only when node_modules does not match the lockfile (a machine without the
# registry runs the lint once the dependency is installed).
t_lint() {
	local log=$TMP/lint.log
	(
		cd "$LINT" || exit 1
		npm_ci "$LINT" || exit 1
		./node_modules/.bin/redocly lint --format=stylish --config redocly.yaml \
			"$SRC/docs/openapi.yaml"
	) >"$log" 2>&1 && return 0
	_fail "redocly lint of docs/openapi.yaml failed:"
	grep -v '^\s*$' "$log" | grep -v '[║╔╚]' | tail -n 30 | sed 's/^/#   /'
	return 1
}
if command -v node >/dev/null && command -v npm >/dev/null; then
	run_test "openapi lint (redocly)" t_lint
else
	skip "openapi lint (redocly)" "node and npm are needed (apt-get install nodejs npm)"
fi

# The build's JSON is docs/openapi.yaml as it is now (a stale build would serve an old one).
t_build_current() {
	python3 - "$SRC/docs/openapi.yaml" "$SPEC_JSON" <<'PY' || { _fail "build/src/api/openapi.json is not docs/openapi.yaml (rebuild)"; return 1; }
import json, subprocess, sys, tempfile, os
with tempfile.TemporaryDirectory() as d:
    subprocess.run([os.environ["SRC"] + "/scripts/embed-openapi", d + "/x.c", sys.argv[1],
                    d + "/x.json"], check=True)
    sys.exit(0 if open(d + "/x.json", "rb").read() == open(sys.argv[2], "rb").read() else 1)
PY
}
export SRC
run_test "openapi build is current" t_build_current

# Every error code the server's source can send is in the Error schema's enum: the returns of
# error_http_code() (src/api/validate.c, the status-to-code table) and every code a reply sets
# by name (a "code" set to a literal, http_reply_error_code()'s literal argument) in src/api and
# src/daemon. The checker's positive control: an enum without one of them is reported.
error_codes_check() {
	python3 - "$SRC" "$1" <<'PY'
import json, pathlib, re, sys
src, spec = pathlib.Path(sys.argv[1]), json.load(open(sys.argv[2]))
enum = set(spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"])
table = (src / "src/api/validate.c").read_text()
body = re.search(r"const char \*error_http_code\(unsigned status\)\n\{(.*?)\n\}", table, re.S)
codes = {c: "error_http_code()" for c in re.findall(r'return "([a-z_]+)";', body.group(1))} if body else {}
for f in sorted((src / "src/api").glob("*.c")) + sorted((src / "src/daemon").glob("*.c")):
    text = f.read_text()
    for c in re.findall(r'"code",\s*json_string\("([a-z_]+)"\)', text):
        codes.setdefault(c, f.name)
    for c in re.findall(r'http_reply_error_code\([^;]*?,\s*"([a-z_]+)"', text, re.S):
        codes.setdefault(c, f.name)
if len(codes) < 15 or not {"gateway_timeout", "in_progress", "upgrade_required"} <= set(codes):
    sys.exit("found only %s: the source patterns no longer match" % sorted(codes))
missing = sorted("%s (%s)" % (c, w) for c, w in codes.items() if c not in enum)
if missing:
    sys.exit("error codes the server sends that the Error schema does not list: " + ", ".join(missing))
PY
}

t_error_codes() {
	local out
	out=$(error_codes_check "$SPEC_JSON" 2>&1) || {
		_fail "$out"
		return 1
	}
	jq '.components.schemas.Error.properties.error.properties.code.enum -= ["in_progress"]' \
		"$SPEC_JSON" >"$TMP/short-enum.json"
	if out=$(error_codes_check "$TMP/short-enum.json" 2>&1); then
		_fail "an enum without in_progress passed the check"
		return 1
	fi
	assert_contains "in_progress (idempotency.c)" "$out" "the check names the missing code"
}
run_test "the Error schema lists every error code the server sends" t_error_codes

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT"

t_served() {
	local headers
	headers=$(curl -sS --max-time 30 --unix-socket "$SOCK" -D - -o "$TMP/served.json" \
		http://station/v1/openapi.json | tr -d '\r')
	assert_match '^HTTP/1.1 200' "$headers" "status" || return 1
	assert_match $'\n[Cc]ontent-[Tt]ype: application/json' "$headers" "content type"
	assert_match $'\n[Ee][Tt]ag: "[0-9a-f]{20}"' "$headers" "etag"
	assert_files_eq "$SPEC_JSON" "$TMP/served.json" "served bytes" || return 1
	assert_eq 3.1.0 "$(jq -r .openapi "$TMP/served.json")" "openapi version"
	api -q POST /v1/openapi.json '{}'
	assert_status 405 "POST" || return 1
	assert_eq "GET, HEAD" "$(curl -sS --max-time 30 --unix-socket "$SOCK" -X POST -D - -o /dev/null http://station/v1/openapi.json | tr -d '\r' | sed -n 's/^[Aa]llow: //p')" "Allow"
	api -q GET '/v1/openapi.json?x=1'
	assert_status 400 "unknown query parameter"
}
run_test "openapi served at /v1/openapi.json" t_served

# The token rule holds here too: no token 401, the admin token 200 (the positive control).
t_tcp_token() {
	local token status
	status=$(curl -sS --max-time 30 -o /dev/null -w '%{http_code}' "$URL/v1/openapi.json")
	assert_eq 401 "$status" "no token" || return 1
	token=$(tr -d '\n' <"$ROOT/admin.token")
	status=$(curl -sS --max-time 30 -o "$TMP/tcp.json" -w '%{http_code}' \
		-H "Authorization: Bearer $token" "$URL/v1/openapi.json")
	assert_eq 200 "$status" "admin token" || return 1
	assert_files_eq "$SPEC_JSON" "$TMP/tcp.json" "bytes over TCP"
}
run_test "openapi over tcp needs the token" t_tcp_token

# conforms SCHEMA [WHAT]: keeps BODY to be checked against components/schemas/SCHEMA (one
# python3 run checks them all at the end of the test: a loaded machine starts python slowly).
CHECKS=()
conforms() {
	local f=$TMP/answer.${#CHECKS[@]}.json
	printf '%s' "$BODY" >"$f"
	CHECKS+=("$1=$f")
}

t_conformance() {
	local ws run
	api -q GET /v1/ready && conforms Ready ready || return 1
	api -q GET /v1/worker && conforms Worker worker || return 1
	new_ws ws '{"env":{"K":"v"},"cpus":1,"memoryMb":256,"pidsLimit":64}' || return 1
	conforms Workspace "created workspace" || return 1
	api -q GET "/v1/workspaces/$ws" && conforms Workspace workspace || return 1
	api -q POST "/v1/workspaces/$ws/commands?waitMs=30000" \
		"$(json_cmd 'echo out; echo err >&2; exit 3' '.env={"A":"b"}')"
	assert_status 201 "run" && conforms Run "exited run" || return 1
	assert_eq exited "$(j .status)" "status" || return 1
	run=$(j .id)
	api -q GET "/v1/workspaces/$ws/commands/$run" && conforms Run run || return 1
	api -q POST "/v1/workspaces/$ws/commands" "$(json_cmd 'sleep 60')"
	assert_status 201 && conforms Run "running run" || return 1
	api -q POST "/v1/workspaces/$ws/commands/$(j .id)/cancel" && conforms Run "cancelled run" || return 1
	api -q POST "/v1/workspaces/$ws/commands?waitMs=30000" \
		"$(json_cmd 'head -c 3000 /dev/zero' '.maxOutputBytes=1000')"
	assert_eq true "$(j .truncated)" "truncated" && conforms Run "truncated binary run" || return 1
	api -q POST "/v1/workspaces/$ws/services" \
		'{"name":"web","command":"echo up; exec sleep 60","restart":{"policy":"on-failure","backoff":{"multiplier":2}}}'
	assert_status 201 "service" && conforms Service service || return 1
	wait_for -t 30 eval 'api -q GET "/v1/workspaces/$ws/services/web";
		[[ $(j ".attempts[-1].state") == running ]]' || _fail "the service never ran"
	conforms Service "service with its running attempt" || return 1
	api -q POST "/v1/workspaces/$ws/services/web/stop" && conforms Service "stopped service" || return 1
	api -q POST "/v1/workspaces/$ws/terminals" '{"cols":80,"rows":24,"command":"sleep 60"}'
	assert_status 201 "terminal" && conforms Terminal terminal || return 1
	api -q DELETE "/v1/workspaces/$ws/terminals/$(j .id)" && conforms Terminal "closed terminal" || return 1
	api -q PUT "/v1/workspaces/$ws/secrets/gh" '{"value":"s3cret","host":"github.com"}'
	assert_status 201 "secret" && conforms Secret secret || return 1
	api -q POST "/v1/workspaces/$ws/files/mkdir" '{"path":"d","parents":true}'
	assert_status 201 "mkdir" && conforms FileEntry "file entry" || return 1
	api -q GET "/v1/workspaces/$ws/network" && conforms Network network || return 1
	api -q GET /v1/workspaces/nope && conforms Error "404 error" || return 1
	api -q POST /v1/workspaces '{"cpus":"many"}'
	assert_status 400 && conforms Error "400 error" || return 1
	assert_eq cpus "$(j .error.field)" "field" || return 1
	if ! python3 "$CHECK" "$TMP/served.json" "${CHECKS[@]}" >"$TMP/check.out" 2>&1; then
		_fail "answers that do not match their schemas:"
		sed 's/^/#   /' "$TMP/check.out"
		return 1
	fi
	assert_eq 19 "${#CHECKS[@]}" "answers checked"
}
run_test "openapi describes real answers" t_conformance

# The checker's positive control: an answer that breaks its schema is reported.
t_checker_fails() {
	BODY='{"id":"w1-x","state":"bogus"}'
	if python3 "$CHECK" "$TMP/served.json" Workspace <<<"$BODY" >"$TMP/check.out" 2>&1; then
		_fail "a workspace without required fields and a bad state passed the check"
		return 1
	fi
	assert_contains "'bogus' not in" "$(cat "$TMP/check.out")" "names the bad state"
	assert_contains "'home' is required" "$(cat "$TMP/check.out")" "names a missing field"
}
run_test "openapi checker reports a mismatch" t_checker_fails

