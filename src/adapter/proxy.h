/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker's HTTP proxy for workspaces (--workspace-proxy, --workspace-no-proxy;
 * docs/operations.md "Behind a proxy"): the variables HTTP_PROXY, HTTPS_PROXY, http_proxy,
 * https_proxy, NO_PROXY and no_proxy that a workspace whose network reaches the proxy gets
 * before its own env. The proxy's name, if it has one, is resolved once at start: workspaces
 * get its IPv4 address (a restricted workspace's resolver would not answer the name, and the
 * firewall opens that address and port exactly). Nothing here logs. */

#include <stdint.h>

#include "basic/error.h"

#define PROXY_NO_PROXY_DEFAULT "localhost,127.0.0.1,::1"
#define PROXY_NO_PROXY_MAX 1024
#define PROXY_ENV_COUNT 6

struct workspace_proxy {
	uint32_t address; /* IPv4, host byte order */
	uint16_t port;
	char url[32]; /* "http://a.b.c.d:port" */
	char no_proxy[PROXY_NO_PROXY_MAX + 1];
	char bufs[PROXY_ENV_COUNT][PROXY_NO_PROXY_MAX + 16];
	char *env[PROXY_ENV_COUNT + 1]; /* NAME=value into bufs, NULL-terminated */
};

/* url: "http://HOST:PORT" with an optional trailing "/", HOST an IPv4 address or a name that
 * resolves to one (the first IPv4 address it has). no_proxy: a comma-separated list of names,
 * domains (".corp.example"), addresses and CIDRs as curl, Python and node read them (NULL: the
 * default); printable, no spaces. -EINVAL (or the resolver's failure) with a message naming
 * the flag and the problem. */
int workspace_proxy_parse(const char *url, const char *no_proxy, struct workspace_proxy *ret,
			  struct station_error *e);
