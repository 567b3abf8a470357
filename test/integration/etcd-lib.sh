# shellcheck shell=bash
# shellcheck disable=SC2034,SC2119,SC2120 # ETCD_* are read by the scripts that source this; etcd_start takes optional flags
# Sourced after lib.sh by the tests of a fleet on etcd: one etcd (Debian's etcd-server) on
# loopback, on free ports, its data under the script's root (so lib.sh's cleanup kills it if the
# script did not stop it).
#
#   etcd_prereqs          ends the script with a skip when etcd or etcdctl is not installed
#   etcd_start [FLAG...]  starts etcd (extra flags passed on) and waits until
#                         `etcdctl endpoint health` is ok; sets ETCD_URL (etcd://127.0.0.1:PORT,
#                         what --fleet takes), ETCD_ENDPOINT (http://127.0.0.1:PORT), ETCD_PID
#   etcd_stop             SIGTERM, waits for it to exit
#   etcd_kill             SIGKILL, waits for it to exit
#   etcd_restart          etcd_stop (if running) and etcd_start again: same data, same port
#   etcdctl_ ARGS...      etcdctl against it

ETCD_BIN=${ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}
ETCDCTL_BIN=${ETCDCTL_BIN:-$(command -v etcdctl || echo /usr/bin/etcdctl)}
ETCD_DIR=$ROOT/etcd
ETCD_LOG=$ROOT/etcd.log
ETCD_PORT=
ETCD_PEER_PORT=
ETCD_URL=
ETCD_ENDPOINT=
ETCD_PID=
ETCD_FLAGS=()

etcd_prereqs() {
	if [[ ! -x $ETCD_BIN || ! -x $ETCDCTL_BIN ]]; then
		skip "$TEST_NAME" "etcd and etcdctl not installed (Debian: etcd-server etcd-client)"
		exit 0
	fi
}

_etcd_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

etcdctl_() {
	ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints="$ETCD_ENDPOINT" --dial-timeout=2s \
		--command-timeout=5s "$@"
}

_etcd_healthy() {
	etcdctl_ endpoint health >/dev/null 2>&1
}

etcd_start() {
	if [[ $# -gt 0 ]]; then
		ETCD_FLAGS=("$@")
	fi
	[[ -n $ETCD_PORT ]] || ETCD_PORT=$(_etcd_free_port)
	[[ -n $ETCD_PEER_PORT ]] || ETCD_PEER_PORT=$(_etcd_free_port)
	ETCD_ENDPOINT=http://127.0.0.1:$ETCD_PORT
	ETCD_URL=etcd://127.0.0.1:$ETCD_PORT
	mkdir -p "$ETCD_DIR"
	chmod 700 "$ETCD_DIR"
	"$ETCD_BIN" --name station-test --data-dir "$ETCD_DIR" \
		--listen-client-urls "$ETCD_ENDPOINT" --advertise-client-urls "$ETCD_ENDPOINT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "station-test=http://127.0.0.1:$ETCD_PEER_PORT" \
		"${ETCD_FLAGS[@]}" </dev/null >>"$ETCD_LOG" 2>&1 &
	ETCD_PID=$!
	# not a job of the script: its end (SIGKILL included) is not announced on stderr
	disown "$ETCD_PID"
	if ! wait_for -t 30 _etcd_healthy; then
		echo "# etcd on $ETCD_ENDPOINT not healthy within 30 s; its log:"
		tail -n 20 "$ETCD_LOG" | sed 's/^/#   /'
		return 1
	fi
}

_etcd_wait_gone() {
	local i
	for ((i = 0; i < 300; i++)); do
		kill -0 "$ETCD_PID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$ETCD_PID" 2>/dev/null; then
		echo "# etcd $ETCD_PID still running 15 s after $1"
		return 1
	fi
	ETCD_PID=
}

etcd_stop() {
	[[ -n $ETCD_PID ]] || return 0
	kill -TERM "$ETCD_PID" 2>/dev/null
	_etcd_wait_gone SIGTERM
}

etcd_kill() {
	[[ -n $ETCD_PID ]] || return 0
	kill -KILL "$ETCD_PID" 2>/dev/null
	_etcd_wait_gone SIGKILL
}

etcd_restart() {
	etcd_stop || return 1
	etcd_start
}
