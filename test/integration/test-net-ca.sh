#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# run-all: not under sanitizers: node, python3, curl and git of the tools image
# Corporate proxies and private CAs, against the test world (net-world.sh) on the tools image.
# A TLS server of the world (secure.example.test, git's smart HTTP over TLS) has a certificate
# of a test CA made here with openssl. In a bridge workspace of a controller started with
# --workspace-ca CA, node (https.get), python3 (urllib, and requests when the image has it),
# curl and git ls-remote trust it; without the flag each refuses it with a certificate error.
# --workspace-proxy: a proxy of the world, at an address of a private range (a class bridge
# workspaces may not reach), is reached by a bridge workspace through HTTP(S)_PROXY (its log
# shows the request) while the same address's other port stays refused; a workspace's env
# overrides the variables; a restricted workspace gets neither the variables nor the proxy's
# address unless the controller has --workspace-proxy-restricted, and then reaches it.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

TOOLS_IMAGE=${TOOLS_IMAGE:-$SRC/build/tools-image}
TOOLS_IMAGE_NAME=node-tools
NET_RANGE=${NET_RANGE:-10.$((220 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=stc$(($$ % 1000000))
SECURE_NAME=secure.example.test
PROXY_PORT=3128
TOOLS=

container_prereqs
world_prereqs || _container_skip_all "$WORLD_WHY"
command -v openssl >/dev/null || _container_skip_all "openssl missing (apt-get install openssl)"
command -v nft >/dev/null || _container_skip_all "nft missing (apt-get install nftables)"
nft list tables >/dev/null 2>&1 || _container_skip_all "nftables unusable here: $(nft list tables 2>&1 | head -n 1)"
_world_routed "$NET_RANGE" && _container_skip_all "the workspace range $NET_RANGE is already routed on this host"

tools_image_build
case $? in
0) ;;
2) _container_skip_all "$TOOLS_IMAGE_WHY" ;;
*) not_ok "tools image builds" "$TOOLS_IMAGE_WHY"; exit 1 ;;
esac

# The test CA and the server's certificate (SAN secure.example.test), made now.
make_certs() {
	local d=$TMP/pki
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" -days 2 \
		-subj "/CN=station test corporate ca" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" &&
		openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
			-subj "/CN=$SECURE_NAME" &&
		printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$SECURE_NAME" >"$d/ext" &&
		openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
			-out "$d/server.pem" -days 2 -extfile "$d/ext"
}
make_certs >"$TMP/openssl.log" 2>&1 || {
	not_ok "openssl makes a test CA and a server certificate" "$(tail -n 5 "$TMP/openssl.log")"
	exit 1
}

world_up || {
	not_ok "world comes up" "see the diagnostics above"
	exit 1
}
world_route_from "$NET_RANGE" || exit 1
SECURE=$WORLD_NET.6
PROXY=$WORLD_PRIVATE
ip -n "$WORLD_NS" addr add "$SECURE/24" dev eth0 || exit 1
world_dns_add "$SECURE_NAME" "$SECURE"
: >"$WORLD_DIR/proxy.log"
ip netns exec "$WORLD_NS" python3 "$NET_WORLD_PY" serve --zone "$WORLD_DIR/zone" \
	--https "$SECURE:443:git" --tls-cert "$TMP/pki/server.pem" --tls-key "$TMP/pki/server.key" \
	--git-root "$WORLD_DIR/git" --http-log "$WORLD_DIR/http.log" \
	--proxy "$PROXY:$PROXY_PORT" --proxy-log "$WORLD_DIR/proxy.log" \
	--ready "$WORLD_DIR/ready-tls" >"$WORLD_DIR/serve-tls.log" 2>&1 </dev/null &
_WORLD_PIDS+=($!)
wait_for -t 60 test -s "$WORLD_DIR/ready-tls" || {
	not_ok "the TLS server and the proxy start" "$(tail -n 5 "$WORLD_DIR/serve-tls.log")"
	exit 1
}

# controller FLAGS...: (re)starts this script's controller with the network and FLAGS.
controller() {
	stop_controller
	start_container_controller --import-dir "$TOOLS_IMAGE" "$NET_FLAG_RANGE" "$NET_RANGE" \
		"$NET_FLAG_BRIDGE" "$NET_BRIDGE" "$NET_FLAG_DNS" "$WORLD_DNS:53" "${NET_WORLD_FLAGS[@]}" \
		--workspace-proxy "http://$PROXY:$PROXY_PORT" "$@"
}

# tools_ws VAR NETWORK [ENV_JSON]
tools_ws() {
	new_ws "$1" "$(jq -nc --arg img "$TOOLS" --arg net "$2" --argjson env "${3:-"{}"}" \
		'{adapter: "container", image: $img, network: $net, env: $env} +
		 (if $net == "restricted" then {egress: {allow: []}} else {} end)')"
}

sh() { # WS SCRIPT: the run's stdout in OUT
	run_cmd "$1" "$2" '.timeoutMs=60000' || return 1
	OUT=$(j .stdout)
}

URL=https://$SECURE_NAME/repo.git/info/refs?service=git-upload-pack
# One line per client: "<client> ok <status>" or "<client> refused <why>".
CLIENTS_SCRIPT="
node -e 'require(\"https\").get(\"$URL\", r => { console.log(\"node ok\", r.statusCode); r.resume(); }).on(\"error\", e => console.log(\"node refused\", e.code))'
python3 -c '
import ssl, urllib.request
try:
    print(\"urllib ok\", urllib.request.urlopen(\"$URL\", timeout=20).status)
except Exception as e:
    print(\"urllib refused\", \"CERTIFICATE_VERIFY_FAILED\" if \"CERTIFICATE_VERIFY_FAILED\" in str(e) else repr(e))
try:
    import requests
except ImportError:
    requests = None
if requests:
    try:
        print(\"requests ok\", requests.get(\"$URL\", timeout=20).status_code)
    except Exception as e:
        print(\"requests refused\", \"CERTIFICATE_VERIFY_FAILED\" if \"CERTIFICATE_VERIFY_FAILED\" in str(e) else repr(e))
'
code=\$(curl -sS -o /dev/null -w '%{http_code}' '$URL' 2>/tmp/curl.err); rc=\$?
if [ \$rc = 0 ]; then echo curl ok \$code; else echo curl refused \$rc; fi
if git ls-remote https://$SECURE_NAME/repo.git >/tmp/git.out 2>/tmp/git.err; then echo git ok \$(grep -c refs/heads /tmp/git.out); else echo git refused \$(grep -o 'certificate' /tmp/git.err | head -n 1); fi
"

WS_BRIDGE=

test_without_ca() {
	local ws
	tools_ws ws bridge '{"NO_PROXY": "*"}' || return 1
	sh "$ws" "$CLIENTS_SCRIPT" || return 1
	local want="node refused UNABLE_TO_VERIFY_LEAF_SIGNATURE"$'\n'"urllib refused CERTIFICATE_VERIFY_FAILED"
	grep -q '^requests' <<<"$OUT" && want+=$'\n'"requests refused CERTIFICATE_VERIFY_FAILED"
	want+=$'\n'"curl refused 60"$'\n'"git refused certificate"
	assert_eq "$want" "$OUT" "every client refuses the test CA's server without --workspace-ca ($(j .stderr))"
}

test_with_ca() {
	local ws
	tools_ws ws bridge '{"NO_PROXY": "*"}' || return 1
	sh "$ws" "$CLIENTS_SCRIPT" || return 1
	local want="node ok 200"$'\n'"urllib ok 200"
	grep -q '^requests' <<<"$OUT" && want+=$'\n'"requests ok 200"
	want+=$'\n'"curl ok 200"$'\n'"git ok 1"
	assert_eq "$want" "$OUT" "every client trusts the server with --workspace-ca ($(j .stderr))"
	grep -q "^git $SECURE .* GET /repo.git/info/refs" "$WORLD_DIR/http.log" ||
		_fail "the TLS server logged no request: $(tail -n 3 "$WORLD_DIR/http.log")"
}

test_proxy_bridge() {
	tools_ws WS_BRIDGE bridge || return 1
	sh "$WS_BRIDGE" 'env | grep -iE "^(https?_proxy|no_proxy)=" | sort' || return 1
	local p=http://$PROXY:$PROXY_PORT
	assert_eq "HTTPS_PROXY=$p"$'\n'"HTTP_PROXY=$p"$'\n'"NO_PROXY=localhost,127.0.0.1,::1"$'\n'"http_proxy=$p"$'\n'"https_proxy=$p"$'\n'"no_proxy=localhost,127.0.0.1,::1" \
		"$OUT" "the proxy variables" || return 1
	sh "$WS_BRIDGE" "curl -sS --max-time 20 http://$WORLD_OTHER_NAME/through-proxy" || return 1
	assert_eq "other host=$WORLD_OTHER_NAME" "$OUT" "curl through the proxy ($(j .stderr))" || return 1
	grep -q " GET http://$WORLD_OTHER_NAME/through-proxy 200$" "$WORLD_DIR/proxy.log" ||
		_fail "the proxy did not log the request: $(tail -n 3 "$WORLD_DIR/proxy.log")"
	# the proxy's address is in a blocked class: only its port was opened
	sh "$WS_BRIDGE" "curl -sS --max-time 5 --noproxy '*' telnet://$PROXY:$WORLD_ECHO_PORT </dev/null; echo rc=\$?" || return 1
	assert_match "rc=(7|28)$" "$OUT" "the proxy's address on another port stays refused"
}

test_proxy_env_override() {
	local ws
	tools_ws ws bridge '{"HTTP_PROXY": "", "http_proxy": "", "NO_PROXY": "*"}' || return 1
	sh "$ws" 'echo "[$HTTP_PROXY][$http_proxy][$NO_PROXY][$HTTPS_PROXY]"' || return 1
	assert_eq "[][][*][http://$PROXY:$PROXY_PORT]" "$OUT" "a workspace's env overrides the proxy variables"
}

test_restricted_without_flag() {
	local ws
	tools_ws ws restricted || return 1
	sh "$ws" 'echo "[${HTTP_PROXY-unset}]"; curl -sS --max-time 5 --noproxy "*" http://'"$PROXY:$PROXY_PORT"'/ >/dev/null 2>&1; echo rc=$?' || return 1
	assert_match '^\[unset\]'$'\n''rc=(7|28)$' "$OUT" "a restricted workspace gets neither the variables nor the proxy"
}

test_restricted_with_flag() {
	local ws
	tools_ws ws restricted || return 1
	sh "$ws" "echo \"[\$HTTPS_PROXY]\"; curl -sS --max-time 20 https://$SECURE_NAME/repo.git/info/refs?service=git-upload-pack -o /dev/null -w '%{http_code}\n'" || return 1
	assert_eq "[http://$PROXY:$PROXY_PORT]"$'\n'"200" "$OUT" "the restricted workspace reaches the TLS server through the proxy, trusting the CA ($(j .stderr))" || return 1
	grep -q " CONNECT $SECURE_NAME:443 200$" "$WORLD_DIR/proxy.log" ||
		_fail "the proxy did not log the CONNECT: $(tail -n 3 "$WORLD_DIR/proxy.log")"
}

controller || {
	not_ok "controller starts with --workspace-proxy" "see the diagnostics above"
	exit 1
}
tools_image_import "$TOOLS_IMAGE_NAME" # (up to 600 s: 1.4 GiB unpacked, a loaded machine)
[[ $STATUS == 201 ]] || {
	not_ok "tools image imports" "HTTP $STATUS $(_short "$BODY")"
	exit 1
}
TOOLS=$TOOLS_IMAGE_NAME@$(j .digest)

run_test "without --workspace-ca node, python3, curl and git refuse the test CA's server" test_without_ca
run_test "a bridge workspace reaches the world through --workspace-proxy (a blocked address, one port)" test_proxy_bridge
run_test "a workspace's env overrides the proxy variables" test_proxy_env_override
run_test "a restricted workspace gets no proxy without --workspace-proxy-restricted" test_restricted_without_flag

controller --workspace-ca "$TMP/pki/ca.pem" --workspace-proxy-restricted || {
	not_ok "controller starts with --workspace-ca" "see the diagnostics above"
	exit 1
}
run_test "with --workspace-ca node, python3, curl and git trust it" test_with_ca
run_test "--workspace-proxy-restricted: a restricted workspace reaches the proxy (CONNECT, TLS trusted)" test_restricted_with_flag
