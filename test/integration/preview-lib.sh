# shellcheck shell=bash
# shellcheck disable=SC2034 # PV_*, APP_LOG and PC_* are read by the scripts that source this
# Sourced by the preview tests (test-preview.sh, test/security/test-preview-smuggling.sh) after
# container-lib.sh: a controller with a preview listener on a free loopback port, a container
# workspace without a network running preview-app (test/helpers/preview-app.c) on its own
# 127.0.0.1, exposures of its ports, and requests to them through the listener with the Host a
# browser would send (<label>.preview.localhost resolved to 127.0.0.1).

PREVIEW_CLIENT=$SRC/test/integration/preview-client.py

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PREVIEW_PORT=$(free_port)

# preview_prereqs: ends the script with a skip when the app was not built.
preview_prereqs() {
	container_prereqs
	[[ -x $PREVIEW_APP_BIN ]] || _container_skip_all "$PREVIEW_APP_BIN not built"
}

# ports_up WS PORT...: a wait_for predicate: something accepts on each 127.0.0.1:PORT inside
# WS (asked from inside, not through the listener).
ports_up() {
	local ws=$1 p script=''
	shift
	for p in "$@"; do
		script+="echo | nc -w 1 127.0.0.1 $p >/dev/null 2>&1 || exit 1; "
	done
	run_cmd "$ws" "$script" >/dev/null 2>&1 && [[ $(j .exitCode) == 0 ]]
}

# start_apps WS NAME 'COMMAND' PORT...: starts COMMAND as service NAME in WS and waits until
# each PORT accepts inside it.
start_apps() {
	local ws=$1 name=$2 command=$3
	shift 3
	api -q POST "/v1/workspaces/$ws/services" "$(jq -nc --arg n "$name" --arg c "$command" \
		'{name: $n, command: $c}')"
	assert_status 201 "service $name" || return 1
	wait_for -t 30 ports_up "$ws" "$@" || {
		_fail "ports $* do not accept in $ws: $(_short "$BODY")"
		return 1
	}
}

# expose WS PORT [JSON]: POST …/ports with {"port": PORT} + JSON; on 201 sets PV_HOST (the URL's
# host without its port), PV_TOKEN (empty for a public one) and PV_URL.
PV_HOST=
PV_TOKEN=
PV_URL=
expose() {
	local ws=$1 port=$2 extra=${3:-"{}"}
	PV_HOST='' PV_TOKEN='' PV_URL=''
	api -q POST "/v1/workspaces/$ws/ports" "$(jq -nc --argjson p "$port" --argjson x "$extra" \
		'{port: $p} + $x')"
	assert_status 201 "expose port $port" || return 1
	PV_URL=$(j .url)
	PV_TOKEN=$(j '.token // empty')
	PV_HOST=${PV_URL#*://}
	PV_HOST=${PV_HOST%%/*}
	PV_HOST=${PV_HOST%:*}
	[[ $PV_HOST =~ ^[a-z0-9-]{1,63}\.preview\.localhost$ ]] ||
		_fail "preview host '$PV_HOST' (url $PV_URL) is not one label under preview.localhost"
}

# pv HOST PATH [CURL ARGS...]: one request through the listener to http://HOST:PREVIEW_PORT/PATH;
# sets CODE (000: no answer), the head in $TMP/pv.head, the body in $TMP/pv.body (PV_BODY).
CODE=
PV_BODY=
pv() {
	local host=$1 path=$2
	shift 2
	: >"$TMP/pv.head"
	: >"$TMP/pv.body"
	CODE=$(curl -sS --max-time 30 --resolve "$host:$PREVIEW_PORT:127.0.0.1" -D "$TMP/pv.head" \
		-o "$TMP/pv.body" -w '%{http_code}' "$@" "http://$host:$PREVIEW_PORT$path" \
		2>"$TMP/pv.err") || CODE=000
	PV_BODY=$(cat "$TMP/pv.body")
}

# pv_header NAME: the value of header NAME in the last pv answer (the first one; CR removed).
pv_header() {
	awk -v k="$(tr '[:upper:]' '[:lower:]' <<<"$1")" 'BEGIN {FS = ": *"}
		{sub(/\r$/, "")} tolower($1) == k {sub(/^[^:]*: */, ""); print; exit}' "$TMP/pv.head"
}

# assert_code EXPECTED WHAT: the last pv's status.
assert_code() {
	[[ $CODE == "$1" ]] && return 0
	_fail "$2: expected HTTP $1, got $CODE: $(_short "$PV_BODY") $(cat "$TMP/pv.err")"
}

# app_log HOST TOKEN: the app's request log (GET /log through the listener) into APP_LOG.
APP_LOG=
app_log() {
	pv "$1" /log -H "Authorization: Bearer $2"
	APP_LOG=$PV_BODY
	[[ $CODE == 200 ]] || _fail "GET /log: HTTP $CODE $(_short "$PV_BODY")"
}

# pclient ARGS...: preview-client.py against the listener; its output in PC_OUT, status PC_RC.
PC_OUT=
PC_RC=
pclient() {
	PC_OUT=$(timeout 300 python3 "$PREVIEW_CLIENT" "$@" 2>&1)
	PC_RC=$?
}

# pcval KEY: the first KEY=value of PC_OUT.
pcval() {
	awk -v k="$1=" '{for (i = 1; i <= NF; i++) if (index($i, k) == 1) {
		print substr($i, length(k) + 1); exit}}' <<<"$PC_OUT"
}
