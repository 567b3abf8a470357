#!/bin/bash
# How a secret reaches a sandbox (docs/api.md, "Secrets"; docs/agent-protocol.md, "Credentials"):
# git's credential protocol on the agent's credential socket, answered by the controller with
# the secret scoped to the host asked for. Host and container workspaces.
#
# Attacks, each beside its positive control: another host, an expired, a revoked and an
# unscoped secret, protocol ftp, a process of another uid on the host, a peer that passes the
# file mode but is not the workspace's user, malformed and oversized requests, more clients
# than the agent serves at once, a client that never finishes, and the controller away.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"

HOST_USER=nobody
HOST_UID=$(id -u $HOST_USER)
OTHER_UID=1 # daemon: neither the workspace's user nor root
HOST_NAME=git.example.test
TOKEN=ghs_cred$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
BIN=$TMP/bin
# the helper under its git name, reachable by the host user
mkdir -p "$BIN"
cp "$AGENT" "$BIN/git-credential-station"
chmod 0755 "$TMP" "$BIN" "$BIN/git-credential-station"
HELPER=$BIN/git-credential-station

command -v setpriv >/dev/null || {
	skip "$TEST_NAME" "setpriv missing (util-linux)"
	exit 0
}

require_controller --host-user "$HOST_USER" --worker "$WORKER" --runtime "$RUNTIME" \
	--seccomp-dir "$PROFILES" --import-dir "$TMP"

# put_secret WS NAME JSON: PUT …/secrets/NAME; STATUS/BODY set.
put_secret() {
	api -q PUT "/v1/workspaces/$1/secrets/$2" "$3"
	[[ $STATUS == 201 || $STATUS == 200 ]] || _fail "PUT secret $2: HTTP $STATUS $(_short "$BODY")"
}

# ask_cmd PROTOCOL HOST [HELPER]: the shell line a command runs to ask for a credential.
ask_cmd() {
	printf "printf 'protocol=%s\\\\nhost=%s\\\\n\\\\n' | %s get; echo \"rc=\$?\"" "$1" "$2" "${3:-$HELPER}"
}

# ask WS PROTOCOL HOST [HELPER]: runs the helper in WS; ANSWER is its stdout.
ANSWER=
ask() {
	run_cmd "$1" "$(ask_cmd "$2" "$3" "${4:-$HELPER}")" || return 1
	ANSWER=$(j .stdout)
	[[ $(j .status) == exited ]] || _fail "helper run: $(j '{status, reason, stderr}')"
}

GRANTED="username=x-access-token
password=$TOKEN
rc=0"
REFUSED="rc=0"

ws_sock() {
	echo "$ROOT/workspaces/$1/cred/socket"
}

agent_log() {
	cat "$ROOT/workspaces/$1/agent.log" 2>/dev/null
}

# ---------------------------------------------------------------------------------------------
# Host workspaces

HWS=
test_host_scoped_host_gets_token() {
	new_ws HWS || return 1
	put_secret "$HWS" gh "$(jq -nc --arg v "$TOKEN" --arg h "$HOST_NAME" '{value: $v, host: $h}')" || return 1
	run_cmd "$HWS" 'echo "$STATION_CREDENTIAL_SOCKET"; id -u' || return 1
	assert_eq "$(ws_sock "$HWS")"$'\n'"$HOST_UID" "$(j .stdout)" "the socket named in the env; the user" || return 1
	ask "$HWS" https "$HOST_NAME" || return 1
	assert_eq "$GRANTED" "$ANSWER" "the scoped host's token" || return 1
	# the host's name compared without regard to case, as git may send it
	ask "$HWS" https "GIT.Example.Test" || return 1
	assert_eq "$GRANTED" "$ANSWER" "the same host in capitals" || return 1
	# git itself, through the helper named in its config
	run_cmd "$HWS" "printf 'protocol=https\nhost=$HOST_NAME\n\n' | PATH=$BIN:\$PATH git -c credential.helper=station credential fill" || return 1
	assert_eq "protocol=https
host=$HOST_NAME
username=x-access-token
password=$TOKEN" "$(j .stdout)" "git credential fill ($(j .stderr))"
	grep -q "credential released workspace=$HWS secret=gh protocol=https host=$HOST_NAME" "$CONTROLLER_LOG" ||
		_fail "no release logged"
}

# A service has the socket in its environment too, and gets the token the same way.
SVC_OUT=
_service_answered() {
	SVC_OUT=$(cli service logs "$1" "$2" 2>&1)
	[[ $SVC_OUT == "$3" ]]
}

test_host_service_env() {
	[[ -n $HWS ]] || return 1
	api -q POST "/v1/workspaces/$HWS/services" "$(jq -nc --arg c "echo \"\$STATION_CREDENTIAL_SOCKET\"; $(ask_cmd https "$HOST_NAME")" '{name: "cred", command: $c}')"
	assert_status 201 "create the service" || return 1
	wait_for -t 20 _service_answered "$HWS" cred "$(ws_sock "$HWS")"$'\n'"$GRANTED" ||
		_fail "the service's output: $SVC_OUT"
}

test_host_refusals() {
	local ws
	new_ws ws || return 1
	put_secret "$ws" gh "$(jq -nc --arg v "$TOKEN" --arg h "$HOST_NAME" '{value: $v, host: $h}')" || return 1
	put_secret "$ws" unscoped "$(jq -nc --arg v "${TOKEN}u" '{value: $v}')" || return 1
	# positive control first: the scoped host
	ask "$ws" https "$HOST_NAME" || return 1
	assert_eq "$GRANTED" "$ANSWER" "positive control" || return 1
	ask "$ws" https other.example.test || return 1
	assert_eq "$REFUSED" "$ANSWER" "another host" || return 1
	ask "$ws" https "$HOST_NAME.evil.test" || return 1
	assert_eq "$REFUSED" "$ANSWER" "a host that only starts with the scoped one" || return 1
	ask "$ws" ftp "$HOST_NAME" || return 1
	assert_eq "$REFUSED" "$ANSWER" "protocol ftp" || return 1
	ask "$ws" http "$HOST_NAME" || return 1
	assert_eq "$GRANTED" "$ANSWER" "protocol http (positive control)" || return 1
	ask "$ws" https "$HOST_NAME:8443" || return 1
	assert_eq "$REFUSED" "$ANSWER" "the scoped host with another port" || return 1
	ask "$ws" https "bad_host!" || return 1
	assert_eq "$REFUSED" "$ANSWER" "a host that is no DNS name" || return 1
	# the unscoped secret is released for no host, not even one nobody scoped
	ask "$ws" https unscoped.example.test || return 1
	assert_eq "$REFUSED" "$ANSWER" "an unscoped secret" || return 1
	grep -q "credential refused workspace=$ws protocol=(other) host=$HOST_NAME reason=\"protocol not https or http\"" "$CONTROLLER_LOG" ||
		_fail "the ftp refusal is not logged: $(grep "credential refused workspace=$ws" "$CONTROLLER_LOG" | tail -n 3)"
	# revoked: refused at once after DELETE
	api -q DELETE "/v1/workspaces/$ws/secrets/gh"
	assert_status 200 "DELETE secret" || return 1
	ask "$ws" https "$HOST_NAME" || return 1
	assert_eq "$REFUSED" "$ANSWER" "a revoked secret" || return 1
}

_secret_expired() {
	api -q GET "/v1/workspaces/$1/secrets/$2"
	[[ $(j .expired) == true ]]
}

test_host_expired() {
	local ws at
	new_ws ws || return 1
	at=$(date -u -d '+12 seconds' +%Y-%m-%dT%H:%M:%SZ)
	put_secret "$ws" soon "$(jq -nc --arg v "$TOKEN" --arg h "$HOST_NAME" --arg at "$at" '{value: $v, host: $h, expiresAt: $at}')" || return 1
	ask "$ws" https "$HOST_NAME" || return 1
	assert_eq "$GRANTED" "$ANSWER" "before it expires (positive control)" || return 1
	wait_for -t 30 _secret_expired "$ws" soon || {
		_fail "the secret is not listed as expired: $(_short "$BODY")"
		return 1
	}
	ask "$ws" https "$HOST_NAME" || return 1
	assert_eq "$REFUSED" "$ANSWER" "an expired secret"
}

# host_ask UID SOCKET: the helper as UID on the host, outside any workspace; HOST_OUT, HOST_RC.
HOST_OUT= HOST_RC=
host_ask() {
	HOST_OUT=$(printf 'protocol=https\nhost=%s\n\n' "$HOST_NAME" |
		setpriv --reuid="$1" --regid="$1" --clear-groups env STATION_CREDENTIAL_SOCKET="$2" "$HELPER" get 2>&1)
	HOST_RC=$?
}

test_host_other_uid() {
	[[ -n $HWS ]] || return 1
	local sock
	sock=$(ws_sock "$HWS")
	# positive control: the workspace's user (same uid, outside the workspace's processes)
	host_ask "$HOST_UID" "$sock"
	assert_eq "0 username=x-access-token
password=$TOKEN" "$HOST_RC $HOST_OUT" "the workspace's uid" || return 1
	host_ask "$OTHER_UID" "$sock"
	assert_eq 1 "$HOST_RC" "another uid: exit code ($HOST_OUT)" || return 1
	assert_contains "Permission denied" "$HOST_OUT" "another uid: the helper's message" || return 1
	# root passes every file mode: the agent itself refuses a peer that is not the user
	local before
	before=$(agent_log "$HWS" | grep -c "another user")
	host_ask 0 "$sock"
	assert_eq "0 " "$HOST_RC $HOST_OUT" "a peer of another uid that reached the socket gets nothing" || return 1
	assert_eq $((before + 1)) "$(agent_log "$HWS" | grep -c "another user")" "the agent's refusal"
}

# raw WS PYTHON: runs python3 as the workspace's user with conn() (a new connection to the
# credential socket) and answer(sock, bytes) (sends, reads to the end) in scope; RAW is its
# stdout.
RAW=
raw() {
	local py="import os, socket, sys, time
def conn():
    c = socket.socket(socket.AF_UNIX)
    c.connect(os.environ['STATION_CREDENTIAL_SOCKET'])
    return c
def answer(s, data):
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    out = b''
    s.settimeout(20)
    while True:
        try:
            b = s.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            break
        if not b:
            break
        out += b
    return out
$2"
	run_start "$1" "$(jq -nc --arg p "$py" '{command: "python3 -c \"$PY\"", env: {PY: $p}}')" 60000 || return 1
	[[ $(j .status) != running ]] || run_wait "$1" "$RUN" || return 1
	[[ $(j .status) == exited && $(j .exitCode) == 0 ]] || {
		_fail "python: $(j '{status, exitCode, stderr}')"
		return 1
	}
	RAW=$(j .stdout)
}

test_host_malformed() {
	[[ -n $HWS ]] || return 1
	command -v python3 >/dev/null || {
		_fail "python3 missing"
		return 1
	}
	local pid
	pid=$(agent_pid "$HWS")
	local cases=(
		"b'get\\nprotocol=https\\nhost=$HOST_NAME\\nevil=1\\n\\n'"
		"b'get\\nprotocol=https\\nhost=$HOST_NAME\\nprotocol=http\\n\\n'"
		"b'get\\nprotocol=https\\nhost=$HOST_NAME\\x00\\n\\n'"
		"b'get\\nprotocol=https\\nhost=' + b'a' * 5000 + b'\\n\\n'"
		"b'get\\nprotocol=https\\n' + b'path=x\\n' * 40 + b'host=$HOST_NAME\\n\\n'"
		"b'get\\npath=' + b'p' * 100000"
		"b'fetch\\nprotocol=https\\nhost=$HOST_NAME\\n\\n'"
		"b'get\\nhost=$HOST_NAME\\n\\n'"
		"b'\\n'"
	)
	local py="for data in [$(IFS=,; echo "${cases[*]}")]:
    print(repr(answer(conn(), data)))
print(repr(answer(conn(), b'get\\nprotocol=https\\nhost=$HOST_NAME\\n\\n')))"
	raw "$HWS" "$py" || return 1
	local expect="" i
	for ((i = 0; i < ${#cases[@]}; i++)); do
		expect+="b''"$'\n'
	done
	expect+="b'username=x-access-token\\npassword=$TOKEN\\n'"
	assert_eq "$expect" "$RAW" "each malformed request refused, then a good one answered" || return 1
	assert_eq "$pid" "$(agent_pid "$HWS")" "the agent kept running"
}

test_host_connection_limit() {
	[[ -n $HWS ]] || return 1
	# four clients that never finish hold every slot: a fifth is closed at once, and once the
	# agent gave up on the four (its per-client timeout), a request is answered again
	raw "$HWS" "held = []
for i in range(4):
    h = conn()
    h.sendall(b'get\\n')
    held.append(h)
time.sleep(0.2)
t = time.monotonic()
print(repr(answer(conn(), b'get\\nprotocol=https\\nhost=$HOST_NAME\\n\\n')), time.monotonic() - t < 5)
held[0].settimeout(30)
t = time.monotonic()
print(repr(held[0].recv(10)), 5 < time.monotonic() - t < 20)
print(repr(answer(conn(), b'get\\nprotocol=https\\nhost=$HOST_NAME\\n\\n')))" || return 1
	assert_eq "b'' True
b'' True
b'username=x-access-token\\npassword=$TOKEN\\n'" "$RAW" "a fifth client refused; the stuck ones timed out; then answered"
}

# A workspace that asks in a tight loop gets at most 20 answers a second; the controller says so
# once a second, and answers again after.
test_host_rate_limit() {
	[[ -n $HWS ]] || return 1
	raw "$HWS" "n = 0
for i in range(100):
    if answer(conn(), b'get\\nprotocol=https\\nhost=$HOST_NAME\\n\\n').startswith(b'username='):
        n += 1
print(n)" || return 1
	assert_le 1 "$RAW" "answered in the burst (positive control)" || return 1
	assert_le "$RAW" 40 "answered in the burst (20 a second)" || return 1
	grep -q "credential requests refused: over the rate limit workspace=$HWS limit_per_second=20" "$CONTROLLER_LOG" ||
		_fail "the limit is not logged"
	wait_for -t 5 _granted_in "$HWS" || _fail "no answer after the burst: $ANSWER"
}

_granted_in() {
	ask "$1" https "$HOST_NAME" && [[ $ANSWER == "$GRANTED" ]]
}

test_host_controller_away() {
	[[ -n $HWS ]] || return 1
	local sock t0
	sock=$(ws_sock "$HWS")
	stop_controller
	t0=$SECONDS
	host_ask "$HOST_UID" "$sock"
	assert_eq "0 " "$HOST_RC $HOST_OUT" "no controller: refused" || return 1
	assert_le $((SECONDS - t0)) 3 "refused at once, not after a timeout" || return 1
	restart_controller || {
		_fail "controller restart"
		return 1
	}
	# the secret survived the restart (sealed in the store); the agent is connected again
	wait_for -t 10 _host_granted "$sock" || _fail "after the restart: $HOST_RC $HOST_OUT"
}

_host_granted() {
	host_ask "$HOST_UID" "$1"
	[[ $HOST_RC == 0 && $HOST_OUT == "username=x-access-token"$'\n'"password=$TOKEN" ]]
}

test_host_helper_without_socket() {
	[[ -n $HWS ]] || return 1
	run_cmd "$HWS" "printf 'protocol=https\nhost=$HOST_NAME\n\n' | STATION_CREDENTIAL_SOCKET=/nonexistent/socket $HELPER get" || return 1
	assert_eq "exited 1" "$(j '"\(.status) \(.exitCode)"')" "exit code without a socket" || return 1
	assert_contains 'git-credential-station: cannot reach the credential socket "/nonexistent/socket"' "$(j .stderr)" "its message" || return 1
	# store and erase keep nothing and succeed
	run_cmd "$HWS" "printf 'protocol=https\nhost=$HOST_NAME\nusername=u\npassword=p\n\n' | $HELPER store && $HELPER erase </dev/null && echo stored" || return 1
	assert_eq "exited 0 stored" "$(j '"\(.status) \(.exitCode) \(.stdout | rtrimstr("\n"))"')" "store and erase"
}

# A token that was used but never shown is in no log line, in no file of the controller's root
# (the store seals it) and in no API response. The positive control: the first token, which
# the tests above printed (run output is stored), is found the same way in the store.
test_host_token_nowhere() {
	local ws token2 hash found
	token2=ghs_unseen$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	hash=$(printf '%s\n' "$token2" | sha256sum | cut -d' ' -f1)
	new_ws ws || return 1
	put_secret "$ws" gh "$(jq -nc --arg v "$token2" --arg h "$HOST_NAME" '{value: $v, host: $h}')" || return 1
	run_cmd "$ws" "printf 'protocol=https\nhost=$HOST_NAME\n\n' | $HELPER get | sed -n 's/^password=//p' | sha256sum" || return 1
	assert_eq "$hash  -" "$(j .stdout)" "the helper's password, by its hash" || return 1
	found=$(grep -rlF "$TOKEN" "$ROOT" --exclude-dir=rootfs --exclude-dir=lower --exclude-dir=images 2>/dev/null)
	assert_contains "$ROOT/station.db" "$found" "positive control: a printed token is found in the store" || return 1
	found=$(grep -rlF "$token2" "$ROOT" --exclude-dir=rootfs --exclude-dir=lower --exclude-dir=images 2>/dev/null)
	assert_eq "" "$found" "files under the root holding the unseen token" || return 1
	local path
	for path in "/v1/workspaces/$ws" "/v1/workspaces/$ws/secrets" "/v1/workspaces/$ws/secrets/gh" \
		"/v1/workspaces/$ws/commands"; do
		api -q GET "$path"
		assert_eq "200 0" "$STATUS $(grep -cF "$token2" <<<"$BODY")" "GET $path" || return 1
	done
}

# ---------------------------------------------------------------------------------------------
# Container workspaces (the busybox image: the helper at /usr/local/bin, on PATH)

CWS=
test_container_scoped_host_gets_token() {
	if ! { container_build_image && container_import_image; }; then
		_fail "busybox image"
		return 1
	fi
	new_cws CWS || return 1
	put_secret "$CWS" gh "$(jq -nc --arg v "$TOKEN" --arg h "$HOST_NAME" '{value: $v, host: $h}')" || return 1
	run_cmd "$CWS" 'echo "$STATION_CREDENTIAL_SOCKET"; command -v git-credential-station; stat -c "%a %u" /run/station-credential/socket' || return 1
	assert_eq "/run/station-credential/socket
/usr/local/bin/git-credential-station
600 0" "$(j .stdout)" "socket, helper on PATH, the socket's mode and owner" || return 1
	ask "$CWS" https "$HOST_NAME" git-credential-station || return 1
	assert_eq "$GRANTED" "$ANSWER" "the scoped host's token"
}

test_container_refusals() {
	[[ -n $CWS ]] || return 1
	ask "$CWS" https other.example.test git-credential-station || return 1
	assert_eq "$REFUSED" "$ANSWER" "another host" || return 1
	ask "$CWS" ftp "$HOST_NAME" git-credential-station || return 1
	assert_eq "$REFUSED" "$ANSWER" "protocol ftp" || return 1
	api -q DELETE "/v1/workspaces/$CWS/secrets/gh"
	assert_status 200 "DELETE secret" || return 1
	ask "$CWS" https "$HOST_NAME" git-credential-station || return 1
	assert_eq "$REFUSED" "$ANSWER" "a revoked secret"
}

# Container root can plant anything in the host directory behind /run/station-credential: the
# controller does not follow it at the next start.
test_container_planted_cred_dir() {
	[[ -n $CWS ]] || return 1
	run_cmd "$CWS" 'rm -rf /run/station-credential/* && ln -s /etc /run/station-credential/socket && ls -l /run/station-credential' || return 1
	api -q POST "/v1/workspaces/$CWS/restart"
	assert_status 200 "restart" || return 1
	put_secret "$CWS" gh "$(jq -nc --arg v "$TOKEN" --arg h "$HOST_NAME" '{value: $v, host: $h}')" || return 1
	ask "$CWS" https "$HOST_NAME" git-credential-station || return 1
	assert_eq "$GRANTED" "$ANSWER" "after a planted symlink, the socket is made again" || return 1
	[[ -d /etc && ! -S /etc/socket ]] || _fail "something made a socket in the host's /etc"
}

run_test host-scoped-host-gets-token test_host_scoped_host_gets_token
run_test host-service-env test_host_service_env
run_test host-refusals test_host_refusals
run_test host-expired test_host_expired
run_test host-other-uid test_host_other_uid
run_test host-malformed test_host_malformed
run_test host-connection-limit test_host_connection_limit
run_test host-rate-limit test_host_rate_limit
run_test host-helper-without-socket test_host_helper_without_socket
run_test host-controller-away test_host_controller_away
run_test host-token-nowhere test_host_token_nowhere
if [[ -z $RUNTIME_BIN ]]; then
	skip container-credentials "OCI runtime '$RUNTIME' not installed"
else
	run_test container-scoped-host-gets-token test_container_scoped_host_gets_token
	run_test container-refusals test_container_refusals
	run_test container-planted-cred-dir test_container_planted_cred_dir
fi
