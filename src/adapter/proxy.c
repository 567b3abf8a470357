/* SPDX-License-Identifier: MIT */
/* --workspace-proxy: the URL checked, its host resolved once, the variables made (proxy.h). */

#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "basic/cleanup.h"
#include "basic/util.h"

#define PROXY_HOST_MAX 253

static int resolve_host(const char *host, uint32_t *ret, struct station_error *e)
{
	struct in_addr a;
	if (inet_pton(AF_INET, host, &a) == 1) {
		*ret = ntohl(a.s_addr);
		return 0;
	}
	if (strchr(host, ':') || host[0] == '[')
		return station_error_set(e, -EINVAL, NULL,
					 "--workspace-proxy: host \"%s\": IPv6 is not available to "
					 "workspaces (they are IPv4 only); name an IPv4 address",
					 host);
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int r = getaddrinfo(host, NULL, &hints, &res);
	if (r != 0 || !res)
		return station_error_set(e, -EINVAL, NULL,
					 "--workspace-proxy: host \"%s\" does not resolve to an "
					 "IPv4 address: %s",
					 host, r ? gai_strerror(r) : "no address");
	*ret = ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr);
	freeaddrinfo(res);
	return 0;
}

static bool no_proxy_valid(const char *s)
{
	if (strlen(s) > PROXY_NO_PROXY_MAX)
		return false;
	for (const char *p = s; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			return false;
	return true;
}

static void fill_env(struct workspace_proxy *p)
{
	static const char *const names[PROXY_ENV_COUNT] = { "HTTP_PROXY", "HTTPS_PROXY",
							    "http_proxy", "https_proxy",
							    "NO_PROXY",	  "no_proxy" };
	for (size_t i = 0; i < PROXY_ENV_COUNT; i++) {
		snprintf(p->bufs[i], sizeof p->bufs[i], "%s=%s", names[i],
			 i < 4 ? p->url : p->no_proxy);
		p->env[i] = p->bufs[i];
	}
	p->env[PROXY_ENV_COUNT] = NULL;
}

int workspace_proxy_parse(const char *url, const char *no_proxy, struct workspace_proxy *ret,
			  struct station_error *e)
{
	static const char scheme[] = "http://";
	char host[PROXY_HOST_MAX + 1];
	uint64_t port = 0;
	if (strncmp(url, scheme, strlen(scheme)) != 0)
		return station_error_set(
			e, -EINVAL, NULL,
			"--workspace-proxy \"%s\": not http://HOST:PORT (the "
			"workspaces talk to the proxy in plain HTTP, CONNECT for TLS)",
			url);
	const char *h = url + strlen(scheme);
	size_t n = strcspn(h, ":/@");
	if (h[n] == '@' || strchr(h, '@'))
		return station_error_set(e, -EINVAL, NULL,
					 "--workspace-proxy: a user or password in the URL is not "
					 "supported");
	if (h[0] == '[')
		return resolve_host(h, &ret->address, e);
	if (n == 0 || n > PROXY_HOST_MAX || h[n] != ':')
		return station_error_set(e, -EINVAL, NULL,
					 "--workspace-proxy \"%s\": not http://HOST:PORT", url);
	memcpy(host, h, n);
	host[n] = 0;
	char port_str[8] = "";
	size_t m = strcspn(h + n + 1, "/");
	if (m == 0 || m >= sizeof port_str || (h[n + 1 + m] && strcmp(h + n + 1 + m, "/") != 0))
		return station_error_set(e, -EINVAL, NULL,
					 "--workspace-proxy \"%s\": not http://HOST:PORT", url);
	memcpy(port_str, h + n + 1, m);
	if (parse_u64(port_str, 65535, &port) < 0 || port == 0)
		return station_error_set(e, -EINVAL, NULL,
					 "--workspace-proxy \"%s\": bad port \"%s\"", url,
					 port_str);
	if (!no_proxy)
		no_proxy = PROXY_NO_PROXY_DEFAULT;
	if (!no_proxy_valid(no_proxy))
		return station_error_set(e, -EINVAL, NULL,
					 "--workspace-no-proxy: at most %u printable characters "
					 "without spaces (a comma-separated list)",
					 PROXY_NO_PROXY_MAX);
	uint32_t addr;
	int r = resolve_host(host, &addr, e);
	if (r < 0)
		return r;
	ret->address = addr;
	ret->port = (uint16_t)port;
	struct in_addr a = { .s_addr = htonl(addr) };
	char text[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a, text, sizeof text);
	snprintf(ret->url, sizeof ret->url, "http://%s:%u", text, (unsigned)port);
	snprintf(ret->no_proxy, sizeof ret->no_proxy, "%s", no_proxy);
	fill_env(ret);
	return 0;
}
