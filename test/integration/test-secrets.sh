#!/bin/bash
# Secrets: put, list, get, delete with their exact answers and refusals; the value in no
# response, no log line, and not in plaintext in station.db or its WAL; sealed rows that
# survive a controller restart; expiry; a key file that is not what the controller made stops
# it with a message naming the file and the problem. And workspace, run, service and terminal
# env values shown as "[redacted]" while they still reach the command.
. "$(dirname "$0")/lib.sh"

# Every response body of this script, to look for the value in afterwards.
BODIES=$TMP/bodies
: >"$BODIES"
eval "$(declare -f api | sed '1s/^api /_api_plain /')"
api() {
	_api_plain "$@"
	printf '%s\n' "$BODY" >>"$BODIES"
}

# The value of the secret this script stores: in nothing the controller says or writes.
VALUE="ghs_Stn$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')Tok"
ENV_WS="wsval$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
ENV_RUN="runval$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
ENV_SVC="svcval$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
ENV_TERM="termval$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"

require_controller --log-level debug

WS=
new_ws WS || exit 1

# secret_body VALUE [JQ-EXPR]: a PUT body.
secret_body() {
	jq -nc --arg v "$1" "{value: \$v} | ${2:-.}"
}

# expect_error STATUS CODE [FIELD]: the last response is that error.
expect_error() {
	assert_status "$1" || return 1
	assert_eq "$2" "$(j .error.code)" "error code"
	assert_match '.' "$(j '.error.message // empty')" "error message"
	if [[ -n ${3:-} ]]; then
		assert_eq "$3" "$(j '.error.field // empty')" "error field"
	fi
}

TIME_RE='^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'

t_put_list_get_delete() {
	local base=/v1/workspaces/$WS/secrets created
	api -q GET "$base"
	assert_status 200 "list, empty"
	assert_eq '{"secrets":[]}' "$BODY" "no secrets yet"

	api -q PUT "$base/gh" "$(secret_body "$VALUE" '.host = "GitHub.com"')"
	assert_status 201 "a new secret" || return 1
	assert_eq '["createdAt","expired","expiresAt","host","name","updatedAt","username"]' \
		"$(j 'keys')" "the fields of a secret, no value among them"
	assert_eq '{"name":"gh","host":"github.com","username":"x-access-token","expiresAt":null,"expired":false}' \
		"$(j '{name, host, username, expiresAt, expired}')" "the secret, host lower-cased"
	assert_match "$TIME_RE" "$(j .createdAt)" createdAt
	assert_eq "$(j .createdAt)" "$(j .updatedAt)" "updatedAt of a new secret"
	created=$(j .createdAt)

	api -q PUT "$base/gh" "$(secret_body "$VALUE" '.host = "github.com" | .username = "bot" | .expiresAt = "2099-01-02T03:04:05+01:00"')"
	assert_status 200 "a replaced secret"
	assert_eq '{"name":"gh","host":"github.com","username":"bot","expiresAt":"2099-01-02T02:04:05.000Z","expired":false}' \
		"$(j '{name, host, username, expiresAt, expired}')" "the replaced secret, expiry in UTC"
	assert_eq "$created" "$(j .createdAt)" "createdAt kept by a replace"
	assert_match "$TIME_RE" "$(j .updatedAt)" updatedAt

	api -q PUT "$base/a.unscoped_1" "$(secret_body other-value)"
	assert_status 201 "an unscoped secret"
	assert_eq '{"name":"a.unscoped_1","host":null,"username":"x-access-token","expiresAt":null}' \
		"$(j '{name, host, username, expiresAt}')" "defaults"

	api -q GET "$base"
	assert_status 200 list
	assert_eq '["a.unscoped_1","gh"]' "$(j '[.secrets[].name]')" "listed by name"
	assert_eq '{"name":"gh","host":"github.com","username":"bot","expiresAt":"2099-01-02T02:04:05.000Z","expired":false}' \
		"$(j '.secrets[1] | {name, host, username, expiresAt, expired}')" "gh as listed"
	api -q GET "$base/gh"
	assert_status 200 "get one"
	assert_eq "$created" "$(j .createdAt)" "get: createdAt"
	assert_eq bot "$(j .username)" "get: username"

	api -q DELETE "$base/a.unscoped_1"
	assert_status 200 delete
	assert_eq '{"name":"a.unscoped_1","deleted":true}' "$BODY" "delete answer"
	api -q GET "$base/a.unscoped_1"
	expect_error 404 not_found
	assert_contains 'secret "a.unscoped_1" not found' "$(j .error.message)" "404 names the secret"
	api -q DELETE "$base/a.unscoped_1"
	expect_error 404 not_found
	api -q GET "$base"
	assert_eq '["gh"]' "$(j '[.secrets[].name]')" "gone from the list"
}

t_unknown_workspace() {
	local ghost=test-aaaaaaaaaaaaaaaaaaaaaaaaaa
	api -q PUT "/v1/workspaces/$ghost/secrets/gh" "$(secret_body "$VALUE")"
	expect_error 404 not_found
	assert_contains "workspace \"$ghost\" not found" "$(j .error.message)" "names the workspace"
	api -q GET "/v1/workspaces/$ghost/secrets"
	expect_error 404 not_found
	api -q GET "/v1/workspaces/$ghost/secrets/gh"
	expect_error 404 not_found
	api -q DELETE "/v1/workspaces/$ghost/secrets/gh"
	expect_error 404 not_found
	api -q POST "/v1/workspaces/$WS/secrets/gh" "$(secret_body "$VALUE")"
	assert_status 405 "POST is not a secret method"
}

# bad_put NAME BODY STATUS CODE FIELD MESSAGE-PART
bad_put() {
	api -q PUT "/v1/workspaces/$WS/secrets/$1" "$2"
	expect_error "$3" "$4" "${5:-}" || return 1
	[[ -z ${6:-} ]] || assert_contains "$6" "$(j .error.message)" "message"
}

t_refusals() {
	local big
	big=$(head -c 16385 /dev/zero | tr '\0' x)
	bad_put v1 '{}' 400 invalid_argument value 'field "value" is required'
	bad_put v2 '{"value":""}' 400 invalid_argument value '0 bytes, not 1 to 16384'
	bad_put v3 "$(secret_body "$big")" 400 invalid_argument value '16385 bytes'
	bad_put v4 "{\"value\":\"${VALUE}\\u0000x\"}" 400 invalid_argument value 'NUL'
	bad_put v5 "$(secret_body "$VALUE"$'\n'"protocol=http")" 400 invalid_argument value 'line break'
	bad_put v6 '{"value":42}' 400 invalid_argument value 'must be a string'
	bad_put v7 "$(secret_body "$VALUE" '.host = "bad host"')" 400 invalid_argument host 'not a DNS name'
	bad_put v8 "$(secret_body "$VALUE" '.host = "-x.example.com"')" 400 invalid_argument host
	bad_put v9 "$(secret_body "$VALUE" '.host = "example.com:0"')" 400 invalid_argument host
	bad_put v10 "$(secret_body "$VALUE" '.host = "example.com:65536"')" 400 invalid_argument host
	bad_put v11 "$(secret_body "$VALUE" '.host = "https://example.com"')" 400 invalid_argument host
	bad_put v12 "$(secret_body "$VALUE" '.username = "a\nb"')" 400 invalid_argument username
	bad_put v13 "$(secret_body "$VALUE" '.expiresAt = "2001-01-01T00:00:00Z"')" 400 invalid_argument expiresAt 'not in the future'
	bad_put v14 "$(secret_body "$VALUE" '.expiresAt = "tomorrow"')" 400 invalid_argument expiresAt 'RFC 3339'
	bad_put v15 "$(secret_body "$VALUE" '.expiresAt = 1893456000')" 400 invalid_argument expiresAt
	bad_put v16 "$(secret_body "$VALUE" '.scope = "github.com"')" 400 invalid_argument scope 'unknown field "scope"'
	# a body that is not JSON: the message says where, and quotes nothing of it
	bad_put v17 "{\"value\":\"${VALUE}" 400 invalid_argument
	# names the router cannot take are unknown paths
	api -q PUT "/v1/workspaces/$WS/secrets/$(printf 'n%.0s' {1..65})" "$(secret_body "$VALUE")"
	assert_status 404 "a 65-character name"
	api -q PUT "/v1/workspaces/$WS/secrets/.hidden" "$(secret_body "$VALUE")"
	assert_status 404 "a name starting with a dot"
	api -q GET "/v1/workspaces/$WS/secrets"
	assert_eq '["gh"]' "$(j '[.secrets[].name]')" "nothing refused was stored"
	# positive control: the same fields, valid, are taken
	api -q PUT "/v1/workspaces/$WS/secrets/ok-1" \
		"$(secret_body "$VALUE" '.host = "GIT.Example.com:8443" | .username = "u s-e_r"')"
	assert_status 201 "a valid secret beside the refused ones"
	assert_eq 'git.example.com:8443 u s-e_r' "$(j '"\(.host) \(.username)"')" "host and username"
	api -q DELETE "/v1/workspaces/$WS/secrets/ok-1"
	assert_status 200 "delete ok-1"
}

t_limit() {
	local i
	for ((i = 0; i < 63; i++)); do
		api -q PUT "/v1/workspaces/$WS/secrets/n$i" '{"value":"x"}'
		[[ $STATUS == 201 ]] || {
			_fail "secret n$i: $STATUS $BODY"
			return 1
		}
	done
	api -q PUT "/v1/workspaces/$WS/secrets/one-too-many" '{"value":"x"}'
	expect_error 429 too_many_requests
	assert_contains "64 secrets" "$(j .error.message)" "names the limit"
	api -q PUT "/v1/workspaces/$WS/secrets/n0" '{"value":"y"}'
	assert_status 200 "replacing one at the limit"
	for ((i = 0; i < 63; i++)); do
		api -q DELETE "/v1/workspaces/$WS/secrets/n$i"
	done
	api -q GET "/v1/workspaces/$WS/secrets"
	assert_eq '["gh"]' "$(j '[.secrets[].name]')" "back to one"
}

t_expiry() {
	local at
	at=$(date -u -d '+2 seconds' +%Y-%m-%dT%H:%M:%SZ)
	api -q PUT "/v1/workspaces/$WS/secrets/short" "$(secret_body "$VALUE" ".host = \"example.org\" | .expiresAt = \"$at\"")"
	assert_status 201 "a secret expiring soon" || return 1
	assert_eq false "$(j .expired)" "not expired yet"
	_is_expired() {
		api -q GET "/v1/workspaces/$WS/secrets/short"
		[[ $(j .expired) == true ]]
	}
	wait_for -t 10 _is_expired || _fail "the secret was not listed expired after its expiry"
	api -q GET "/v1/workspaces/$WS/secrets"
	assert_eq '{"name":"short","expired":true}' \
		"$(j '.secrets[] | select(.name == "short") | {name, expired}')" "listed expired"
	assert_eq false "$(j '.secrets[] | select(.name == "gh") | .expired')" "gh is not"
}

# db_query SQL: one value from station.db, read the way another process would.
db_query() {
	python3 - "$ROOT/station.db" "$1" <<'EOF'
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(db.execute(sys.argv[2]).fetchone()[0])
EOF
}

t_survives_restart() {
	local before
	api -q GET "/v1/workspaces/$WS/secrets"
	before=$BODY
	stop_controller TERM
	assert_eq 0 "$CONTROLLER_EXIT" "controller stopped cleanly"
	# sealed in the store: a nonce and the value's length plus a 16-byte tag, not the value
	assert_eq 12 "$(db_query "SELECT length(nonce) FROM workspace_secrets WHERE name = 'gh'")" "nonce"
	assert_eq $((${#VALUE} + 16)) \
		"$(db_query "SELECT length(ciphertext) FROM workspace_secrets WHERE name = 'gh'")" \
		"ciphertext and tag"
	assert_eq 0 "$(db_query "SELECT count(*) FROM workspace_secrets WHERE instr(ciphertext, CAST('$VALUE' AS BLOB)) > 0")" \
		"no row holds the value"
	start_controller "${CONTROLLER_FLAGS[@]}" || return 1
	api -q GET "/v1/workspaces/$WS/secrets"
	assert_status 200 "list after restart"
	assert_eq "$(jq -c '.secrets[] | select(.name == "gh")' <<<"$before")" \
		"$(j '.secrets[] | select(.name == "gh")')" "gh after restart, as before"
	! grep -q 'cannot open a stored secret' "$CONTROLLER_LOG" ||
		_fail "a stored secret did not open after the restart"
}

# What the workspace's git would get for HOST through the credential helper (the agent binary
# as `station-agent credential get`); the helper's output and its exit status.
ask_credential() {
	run_cmd "$1" "printf 'protocol=https\\nhost=%s\\n\\n' '$2' | '$AGENT' credential get; echo \"rc=\$?\"" ||
		return 1
	ANSWER=$(j .stdout)
}

# The lookup the credential path makes finds a secret after a controller restart, and not once
# it is revoked. Needs the credential helper (built with the credential path).
t_released_after_restart() {
	local cred="ghs_Cred$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')" granted
	api -q PUT "/v1/workspaces/$WS/secrets/cred" \
		"$(secret_body "$cred" '.host = "git.example.test" | .username = "bot"')"
	assert_status 201 "the secret" || return 1
	granted="username=bot"$'\n'"password=$cred"$'\n'"rc=0"
	ask_credential "$WS" git.example.test || return 1
	assert_eq "$granted" "$ANSWER" "released before the restart" || return 1
	stop_controller TERM
	start_controller "${CONTROLLER_FLAGS[@]}" || return 1
	wait_for -t 10 eval 'ask_credential "$WS" git.example.test && [[ $ANSWER == "$granted" ]]' ||
		_fail "not released after the restart: $ANSWER"
	ask_credential "$WS" other.example.test || return 1
	assert_eq "rc=0" "$ANSWER" "(control) another host gets nothing"
	api -q DELETE "/v1/workspaces/$WS/secrets/cred"
	assert_status 200 "revoke"
	ask_credential "$WS" git.example.test || return 1
	assert_eq "rc=0" "$ANSWER" "nothing once revoked"
}

# start_refused EXPECTED-MESSAGE: the controller, started on ROOT as before, exits non-zero
# within 10 s and says EXPECTED-MESSAGE.
start_refused() {
	local out=$TMP/refused.log rc
	timeout 10 "$DAEMON" --root "$ROOT" --worker test --log-format text "${CONTROLLER_FLAGS[@]}" \
		>"$out" 2>&1 </dev/null
	rc=$?
	assert_ne 0 "$rc" "exit status of a refused start" || return 1
	assert_ne 124 "$rc" "it did not keep running" || return 1
	assert_contains "$1" "$(cat "$out")" "the refusal" || return 1
	[[ ! -S $SOCK ]] || ! curl -s --max-time 1 --unix-socket "$SOCK" http://s/v1/ready >/dev/null ||
		_fail "a refused controller answered"
}

t_key_file_checks() {
	local key=$ROOT/secrets.key
	stop_controller TERM
	assert_eq "600 root 32" "$(stat -c '%a %U %s' "$key")" "the key file the controller made"
	chmod 0644 "$key"
	start_refused "secrets key \"$key\" has mode 0644, not 0600"
	chmod 0600 "$key"
	mv "$key" "$key.real"
	ln -s "$key.real" "$key"
	start_refused "secrets key \"$key\" is a symbolic link"
	rm "$key"
	head -c 31 /dev/urandom >"$key"
	chmod 0600 "$key"
	start_refused "secrets key \"$key\" is 31 bytes, not 32"
	mv "$key.real" "$key"
	# positive control: the same root with its own key starts, and the secret opens
	start_controller "${CONTROLLER_FLAGS[@]}" || return 1
	api -q GET "/v1/workspaces/$WS/secrets/gh"
	assert_status 200 "gh after the refused starts"
}

t_env_redacted() {
	local ws svc term
	new_ws ws "$(jq -nc --arg v "$ENV_WS" '{env: {TOKEN_A: $v}}')" || return 1
	assert_eq '{"TOKEN_A":"[redacted]"}' "$(j .env)" "workspace create"
	api -q GET "/v1/workspaces/$ws"
	assert_eq '{"TOKEN_A":"[redacted]"}' "$(j .env)" "workspace get"
	api -q GET /v1/workspaces
	assert_eq '{"TOKEN_A":"[redacted]"}' "$(j ".workspaces[] | select(.id == \"$ws\") | .env")" "workspace list"

	run_start "$ws" "$(jq -nc --arg v "$ENV_RUN" '{command: "printf \"%s %s\" \"$TOKEN_A\" \"$RUN_B\"", env: {RUN_B: $v}}')" 60000 || return 1
	assert_eq '{"RUN_B":"[redacted]"}' "$(j .env)" "run start"
	[[ $(j .status) != running ]] || run_wait "$ws" "$RUN" || return 1
	# positive control: the values reach the command
	assert_eq "$ENV_WS $ENV_RUN" "$(j .stdout)" "the command sees both values"
	assert_eq '{"RUN_B":"[redacted]"}' "$(j .env)" "run get"
	api -q GET "/v1/workspaces/$ws/commands"
	assert_eq '{"RUN_B":"[redacted]"}' "$(j '.commands[0].env')" "run list"
	[[ $(j '.commands[0]') != *"$ENV_RUN"* ]] || _fail "the run list shows the value"

	api -q POST "/v1/workspaces/$ws/services" "$(jq -nc --arg v "$ENV_SVC" '{name: "svc", command: "printf %s \"$SVC_C\"", env: {SVC_C: $v}}')"
	assert_status 201 "service create" || return 1
	assert_eq '{"SVC_C":"[redacted]"}' "$(j .env)" "service create"
	_svc_done() {
		api -q GET "/v1/workspaces/$ws/services/svc"
		[[ $(j '.attempts | length') -ge 1 && $(j .currentAttempt) == null ]]
	}
	wait_for -t 20 _svc_done || _fail "the service's attempt did not end: $BODY"
	assert_eq '{"SVC_C":"[redacted]"}' "$(j .env)" "service get"
	assert_eq "$ENV_SVC" "$(j '.attempts[-1].stdout')" "the service sees its value"
	api -q GET "/v1/workspaces/$ws/services"
	assert_eq '{"SVC_C":"[redacted]"}' "$(j '.services[0].env')" "service list"

	api -q POST "/v1/workspaces/$ws/terminals" "$(jq -nc --arg v "$ENV_TERM" '{command: "printf %s \"$TERM_D\"", cols: 80, rows: 24, env: {TERM_D: $v}}')"
	assert_status 201 "terminal open" || return 1
	term=$(j .id)
	assert_eq '{"TERM_D":"[redacted]"}' "$(j .env)" "terminal open"
	api -q GET "/v1/workspaces/$ws/terminals/$term"
	assert_eq '{"TERM_D":"[redacted]"}' "$(j .env)" "terminal get"
	api -q GET "/v1/workspaces/$ws/terminals"
	assert_eq '{"TERM_D":"[redacted]"}' "$(j ".terminals[] | select(.id == \"$term\") | .env")" "terminal list"

	local v
	for v in "$ENV_WS" "$ENV_RUN" "$ENV_SVC" "$ENV_TERM"; do
		! grep -qF -- "$v" "$CONTROLLER_LOG" || _fail "an env value is in the controller's log"
	done
	grep -qF "$ws" "$CONTROLLER_LOG" || _fail "(control) the log names the workspace"
}

t_value_nowhere() {
	local f n
	# responses: every body this script got
	n=$(grep -cF "\"gh\"" "$BODIES")
	assert_le 5 "$n" "(control) the bodies looked at hold the secret's answers"
	! grep -qF -- "$VALUE" "$BODIES" || _fail "the value is in a response: $(grep -F -- "$VALUE" "$BODIES" | head -c 300)"
	# the controller's log, at debug level
	grep -qF 'secret stored' "$CONTROLLER_LOG" || _fail "(control) the log records the put"
	! grep -qF -- "$VALUE" "$CONTROLLER_LOG" || _fail "the value is in the controller's log"
	! grep -qF -- "${VALUE:0:12}" "$CONTROLLER_LOG" || _fail "part of the value is in the controller's log"
	# the store's files, byte for byte
	for f in "$ROOT/station.db" "$ROOT/station.db-wal"; do
		[[ -e $f ]] || continue
		grep -qaF "$WS" "$f" || [[ $f == *-wal ]] || _fail "(control) $f holds the workspace id"
		! grep -qaF -- "$VALUE" "$f" || _fail "the value is in plaintext in $f"
	done
	! grep -rqaF -- "$VALUE" "$ROOT" || _fail "the value is in a file under the root: $(grep -rlaF -- "$VALUE" "$ROOT")"
}

run_test "put, replace, list, get, delete" t_put_list_get_delete
run_test "an unknown workspace or method" t_unknown_workspace
run_test "refused input names the field, valid input is taken" t_refusals
run_test "at most 64 secrets per workspace" t_limit
run_test "an expired secret is listed expired" t_expiry
run_test "sealed in the store, the same after a restart" t_survives_restart
if grep -qa 'git-credential-station' "$AGENT"; then
	run_test "released to the credential helper after a restart, not once revoked" \
		t_released_after_restart
else
	skip "released to the credential helper after a restart" \
		"no credential helper in this build (the lookup itself: unit test-daemon-secret)"
fi
run_test "a key file that is not the controller's stops the start" t_key_file_checks
run_test "env values are redacted and still reach the command" t_env_redacted
run_test "the value is in no response, log line or store file" t_value_nowhere
