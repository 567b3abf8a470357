#!/bin/bash
# --workspace-ca against hostile images. A container workspace trusts one bundle: its image's
# trust store followed by the operator's certificates, bound read-only at
# /run/station-ca/ca-certificates.crt and over the image's trust-store files, and named by
# NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO, CURL_CA_BUNDLE and
# SSL_CERT_FILE. The controller reads the image's store as root, so an image whose store is a
# symlink to a host file (absolute, or climbing with ..), a FIFO or a huge file gets a bundle
# of the operator's certificates alone, the host file is never read, and the create does not
# hang. Positive controls: a Debian-style image's store and a RHEL-style one (a symlink inside
# the image) are in the bundle and overmounted; a workspace's env overrides the variables;
# --workspace-ca refuses a file with no certificate or with a broken one, naming the problem.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"

container_prereqs
command -v openssl >/dev/null || _container_skip_all "openssl missing (apt-get install openssl)"

BUNDLE=/run/station-ca/ca-certificates.crt
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/ca.key" -out "$TMP/ca.pem" -days 2 \
	-subj "/CN=station test operator ca" 2>"$TMP/openssl.log" || {
	not_ok "openssl makes a test CA" "$(cat "$TMP/openssl.log")"
	exit 1
}
CA_LINE=$(sed -n 2p "$TMP/ca.pem") # a line of the certificate's base64, to find it by
# The host file an image points its trust store at: never to be read into a bundle.
HOST_FILE=$TMP/host-secret.pem
echo "HOST-FILE-MARKER do not read" >"$HOST_FILE"
IMAGE_MARK="IMAGE-CA-MARKER"

require_container_controller --workspace-ca "$TMP/ca.pem"

# bundle_of IMG VAR [ENV_JSON]: a workspace on IMG; VAR gets what `cat $SSL_CERT_FILE` printed.
BUNDLE_OUT=
bundle_of() {
	local _ws
	new_ws _ws "$(jq -nc --arg img "$1" --argjson env "${3:-"{}"}" '{adapter: "container", image: $img, env: $env}')" || return 1
	run_cmd "$_ws" 'env | grep -E "^(NODE_EXTRA_CA_CERTS|REQUESTS_CA_BUNDLE|PIP_CERT|GIT_SSL_CAINFO|CURL_CA_BUNDLE|SSL_CERT_FILE)=" | sort; echo ---; cat "$SSL_CERT_FILE"' || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "reading the bundle ($(j .stderr))" || return 1
	BUNDLE_OUT=$(j .stdout)
	printf -v "$2" '%s' "$_ws"
}

assert_operator_only() {
	assert_contains "$CA_LINE" "$BUNDLE_OUT" "the operator's certificate is in the bundle" || return 1
	[[ $BUNDLE_OUT != *HOST-FILE-MARKER* ]] || _fail "the host file's content is in the bundle"
	[[ $BUNDLE_OUT != *"$IMAGE_MARK"* ]] || _fail "an image marker is in the bundle"
	assert_eq 1 "$(grep -c 'BEGIN CERTIFICATE' <<<"$BUNDLE_OUT")" "one certificate: the operator's alone"
}

test_debian_store() {
	build_image ca-debian 0 "
add('etc/ssl', D, mode=0o755)
add('etc/ssl/certs', D, mode=0o755)
add('etc/ssl/certs/ca-certificates.crt', R, b'# $IMAGE_MARK debian\n')" || return 1
	local ws
	bundle_of "$IMG" ws || return 1
	local want
	want=$(for v in CURL_CA_BUNDLE GIT_SSL_CAINFO NODE_EXTRA_CA_CERTS PIP_CERT REQUESTS_CA_BUNDLE SSL_CERT_FILE; do
		echo "$v=$BUNDLE"
	done)
	assert_eq "$want" "${BUNDLE_OUT%%$'\n'---*}" "the six variables name the bundle" || return 1
	assert_contains "# $IMAGE_MARK debian" "$BUNDLE_OUT" "the image's own store is in the bundle" || return 1
	assert_contains "$CA_LINE" "$BUNDLE_OUT" "the operator's certificate is in the bundle" || return 1
	# the image's trust-store file is the bundle too, read-only
	run_cmd "$ws" "cmp /etc/ssl/certs/ca-certificates.crt $BUNDLE && echo same; echo x >>/etc/ssl/certs/ca-certificates.crt && echo writable" || return 1
	assert_eq "same" "$(j .stdout)" "the image's store is overmounted by the bundle, read-only"
}

test_rhel_store() {
	build_image ca-rhel 0 "
for d in ('etc/pki', 'etc/pki/tls', 'etc/pki/tls/certs', 'etc/pki/ca-trust', 'etc/pki/ca-trust/extracted', 'etc/pki/ca-trust/extracted/pem'):
    add(d, D, mode=0o755)
add('etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem', R, b'# $IMAGE_MARK rhel\n')
add('etc/pki/tls/certs/ca-bundle.crt', S, target='/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem')" || return 1
	local ws
	bundle_of "$IMG" ws || return 1
	assert_contains "# $IMAGE_MARK rhel" "$BUNDLE_OUT" "the image's store (a symlink inside the image) is in the bundle" || return 1
	run_cmd "$ws" "cmp /etc/pki/tls/certs/ca-bundle.crt $BUNDLE && cmp /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem $BUNDLE && echo same" || return 1
	assert_eq "same" "$(j .stdout)" "the symlink's target is overmounted by the bundle ($(j .stderr))"
}

test_symlink_to_host_file() {
	build_image ca-link-abs 0 "
add('etc/ssl', D, mode=0o755)
add('etc/ssl/certs', D, mode=0o755)
add('etc/ssl/certs/ca-certificates.crt', S, target='$HOST_FILE')
add('etc/ssl/cert.pem', S, target='../../../../../../../../../..$HOST_FILE')" || return 1
	local ws
	bundle_of "$IMG" ws || return 1
	assert_operator_only
}

test_fifo() {
	build_image ca-fifo 0 "
add('etc/ssl', D, mode=0o755)
add('etc/ssl/certs', D, mode=0o755)
add('etc/ssl/certs/ca-certificates.crt', F)" || return 1
	local ws t0=$SECONDS
	bundle_of "$IMG" ws || return 1
	assert_operator_only
	assert_le $((SECONDS - t0)) 60 "the create did not wait on the FIFO"
}

test_huge() {
	build_image ca-huge 0 "
add('etc/ssl', D, mode=0o755)
add('etc/ssl/certs', D, mode=0o755)
add('etc/ssl/certs/ca-certificates.crt', R, (b'# $IMAGE_MARK huge ' + b'x' * 1000 + b'\n') * 5000)" || return 1
	local ws
	bundle_of "$IMG" ws || return 1
	assert_operator_only
}

test_no_store_and_env_override() {
	local ws
	IMG=$IMAGE # busybox: no trust store at all
	bundle_of "$IMG" ws || return 1
	assert_operator_only || return 1
	new_ws ws "$(jq -nc --arg img "$IMAGE" '{adapter: "container", image: $img, env: {SSL_CERT_FILE: "/mine.pem", NODE_EXTRA_CA_CERTS: ""}}')" || return 1
	run_cmd "$ws" 'echo "$SSL_CERT_FILE|$NODE_EXTRA_CA_CERTS|$CURL_CA_BUNDLE"' || return 1
	assert_eq "/mine.pem||$BUNDLE" "$(j .stdout)" "a workspace's env overrides the CA variables"
}

test_bad_ca_files() {
	local out
	echo "not a certificate" >"$TMP/none.pem"
	out=$("$DAEMON" --root "$TMP/bad-root" --workspace-ca "$TMP/none.pem" 2>&1)
	assert_eq 64 "$?" "exit status for a file without a certificate" || return 1
	assert_contains "no certificate in it" "$out" "names the problem" || return 1
	{ cat "$TMP/ca.pem"; cat "$TMP/ca.key"; } >"$TMP/with-key.pem"
	out=$("$DAEMON" --root "$TMP/bad-root" --workspace-ca "$TMP/with-key.pem" 2>&1)
	assert_contains 'a "PRIVATE KEY" block' "$out" "a key in the file is named" || return 1
	sed '3s/^./!/' "$TMP/ca.pem" >"$TMP/broken.pem"
	out=$("$DAEMON" --root "$TMP/bad-root" --workspace-ca "$TMP/broken.pem" 2>&1)
	assert_contains "line 1: the certificate does not parse" "$out" "a broken certificate is named" || return 1
	head -n 5 "$TMP/ca.pem" >"$TMP/cut.pem"
	out=$("$DAEMON" --root "$TMP/bad-root" --workspace-ca "$TMP/cut.pem" 2>&1)
	assert_contains "BEGIN CERTIFICATE without its END line" "$out" "a cut file is named"
}

run_test "a Debian-style image's store and the operator's CA, one bundle, six variables" test_debian_store
run_test "a RHEL-style image's store (a symlink in the image) is in the bundle and overmounted" test_rhel_store
run_test "an image's store that is a symlink to a host file: the host file is not read" test_symlink_to_host_file
run_test "an image's store that is a FIFO: no wait, the operator's CA alone" test_fifo
run_test "an image's store of 5 MB: not read, the operator's CA alone" test_huge
run_test "an image without a store: the operator's CA alone; a workspace's env overrides" test_no_store_and_env_override
run_test "--workspace-ca refuses a file without a certificate, with a key, broken or cut" test_bad_ca_files
