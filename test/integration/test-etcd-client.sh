#!/bin/bash
# run-all: slow: about 40 s, most of it waiting out bounds (three 5 s deadlines, a 2 s lease)
# src/store/etcd.c (the fleet's client of etcd's v3 JSON gateway) against a real etcd on
# loopback (test/helpers/etcd-check.c runs the cases): keys, prefixes that do not see each
# other, leases that expire, are kept alive and revoked, a watch from a revision in order and
# its stop, compaction; and against endpoints that fail: refused, hung (a socket that accepts
# and never answers), failover to the next, answers over their bounds, keys outside the
# prefix; TLS with a client certificate (and without one, refused). etcd-lib.sh itself: a
# restart keeps the data.

source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/etcd-lib.sh"

CHECK=$BUILD/test/helpers/etcd-check
FAKE=$SRC/test/integration/etcd-fake.py
etcd_prereqs
[[ -x $CHECK ]] || {
	skip "$TEST_NAME" "$CHECK not built"
	exit 0
}
etcd_start || {
	not_ok "etcd starts"
	exit 1
}
unset ETCD_CA ETCD_CERT ETCD_KEY

# check CASE [ARG...]: etcd-check against ETCD_URL (or URL=...), its output as diagnostics.
OUT=
check_url() {
	local url=$1
	shift
	OUT=$("$CHECK" "$url" "$@" 2>&1)
	local rc=$?
	[[ -n $OUT ]] && printf '#   %s\n' "${OUT//$'\n'/$'\n'#   }"
	[[ $rc -eq 0 ]] || _fail "etcd-check $* exited $rc"
}
check() {
	check_url "$ETCD_URL" "$@"
}

t_config() { check config; }
t_kv() { check kv; }
t_lease() { check lease; }

REV=
t_watch() {
	check watch || return 1
	REV=$(sed -n 's/^revision //p' <<<"$OUT")
}

# A watch from a revision compaction removed is -ERANGE; before the compaction the same watch
# ran (the positive control).
t_compacted() {
	[[ -n $REV ]] || return 1
	check watch-ok "$REV" || return 1
	etcdctl_ compact $((REV + 2)) >/dev/null || _fail "etcdctl compact" || return 1
	check watch-from "$REV"
}

t_restart() {
	etcdctl_ put /kept yes >/dev/null || _fail "put" || return 1
	etcd_restart || _fail "etcd_restart" || return 1
	assert_eq yes "$(etcdctl_ get /kept --print-value-only)" "after etcd_restart" || return 1
	etcd_kill || _fail "etcd_kill" || return 1
	etcd_start || _fail "etcd_start after etcd_kill" || return 1
	assert_eq yes "$(etcdctl_ get /kept --print-value-only)" "after etcd_kill and etcd_start"
}

# fake MODE: starts etcd-fake.py, FAKE_PORT its port.
FAKE_PORT=
FAKE_PIDS=()
fake() {
	local f=$TMP/fake-$1.port
	python3 "$FAKE" "$1" >"$f" 2>"$TMP/fake-$1.log" &
	FAKE_PIDS+=($!)
	disown $!
	wait_for -t 10 test -s "$f" || _fail "etcd-fake.py $1 did not start" || return 1
	FAKE_PORT=$(cat "$f")
}

CLOSED_PORT=$(_etcd_free_port)

t_refused() {
	check_url "etcd://127.0.0.1:$CLOSED_PORT" fail 111 "127.0.0.1:$CLOSED_PORT: connection refused"
}

# A get and a watch on an endpoint that accepts and never answers: -ETIMEDOUT within
# ETCD_CALL_MS + 2 s, naming it.
t_hung() {
	fake hang || return 1
	HUNG_PORT=$FAKE_PORT
	check_url "etcd://127.0.0.1:$HUNG_PORT" fail 110 "127.0.0.1:$HUNG_PORT: no answer within 5000 ms"
}

t_failover() {
	check_url "etcd://127.0.0.1:$CLOSED_PORT,${ETCD_URL#etcd://}" roundtrip || return 1
	[[ -n ${HUNG_PORT:-} ]] || return 1
	check_url "etcd://127.0.0.1:$HUNG_PORT,${ETCD_URL#etcd://}" roundtrip
}

t_big() {
	fake big || return 1
	check_url "etcd://127.0.0.1:$FAKE_PORT" big
}

t_foreign() {
	fake foreign || return 1
	check_url "etcd://127.0.0.1:$FAKE_PORT" foreign
}

# A CA, a server certificate for 127.0.0.1 and a client certificate, made here.
make_certs() {
	local d=$1
	mkdir -p "$d"
	{
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" \
			-days 2 -subj "/CN=station test etcd ca" &&
			openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" \
				-out "$d/server.csr" -subj "/CN=127.0.0.1" &&
			printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$d/server.ext" &&
			openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
				-CAcreateserial -days 2 -extfile "$d/server.ext" -out "$d/server.pem" &&
			openssl req -newkey rsa:2048 -nodes -keyout "$d/client.key" \
				-out "$d/client.csr" -subj "/CN=station worker" &&
			printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext" &&
			openssl x509 -req -in "$d/client.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
				-CAcreateserial -days 2 -extfile "$d/client.ext" -out "$d/client.pem"
	} >"$d/openssl.log" 2>&1 || {
		_fail "openssl: $(tail -n 3 "$d/openssl.log")"
		return 1
	}
}

TLS_PID=
_tls_healthy() {
	ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints="https://127.0.0.1:$TLS_PORT" --cacert "$CERTS/ca.pem" \
		--cert "$CERTS/client.pem" --key "$CERTS/client.key" --dial-timeout=2s \
		endpoint health >/dev/null 2>&1
}

t_tls() {
	CERTS=$ROOT/etcd-tls
	make_certs "$CERTS" || return 1
	TLS_PORT=$(_etcd_free_port)
	local peer
	peer=$(_etcd_free_port)
	"$ETCD_BIN" --name tls --data-dir "$ROOT/etcd-tls-data" \
		--listen-client-urls "https://127.0.0.1:$TLS_PORT" \
		--advertise-client-urls "https://127.0.0.1:$TLS_PORT" \
		--listen-peer-urls "http://127.0.0.1:$peer" \
		--initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "tls=http://127.0.0.1:$peer" \
		--cert-file "$CERTS/server.pem" --key-file "$CERTS/server.key" \
		--trusted-ca-file "$CERTS/ca.pem" --client-cert-auth \
		</dev/null >"$ROOT/etcd-tls.log" 2>&1 &
	TLS_PID=$!
	disown "$TLS_PID"
	wait_for -t 30 _tls_healthy || {
		_fail "etcd with TLS not healthy: $(tail -n 5 "$ROOT/etcd-tls.log")"
		return 1
	}
	local url=etcds://127.0.0.1:$TLS_PORT
	# the positive control: CA, certificate and key
	ETCD_CA=$CERTS/ca.pem ETCD_CERT=$CERTS/client.pem ETCD_KEY=$CERTS/client.key \
		check_url "$url" roundtrip || return 1
	# no client certificate: etcd refuses the handshake
	ETCD_CA=$CERTS/ca.pem check_url "$url" fail 13 "127.0.0.1:$TLS_PORT: TLS: " || return 1
	# etcd's certificate not signed by a CA the client trusts
	ETCD_CERT=$CERTS/client.pem ETCD_KEY=$CERTS/client.key \
		check_url "$url" fail 13 "127.0.0.1:$TLS_PORT: TLS: " || return 1
}

run_test etcd-config-refused t_config
run_test etcd-kv-prefixes t_kv
run_test etcd-lease-expire-keepalive-revoke t_lease
run_test etcd-watch-order-stop t_watch
run_test etcd-watch-compacted t_compacted
run_test etcd-lib-restart-keeps-data t_restart
run_test etcd-refused t_refused
run_test etcd-hung-endpoint-times-out t_hung
run_test etcd-failover t_failover
run_test etcd-answer-bounds t_big
run_test etcd-key-outside-prefix t_foreign
run_test etcd-tls-client-certificate t_tls
kill "${FAKE_PIDS[@]}" "$TLS_PID" 2>/dev/null
etcd_stop
