/* SPDX-License-Identifier: MIT */
/* port expose | ls | rm: a workspace's ports opened through the controller's preview listener
 * (docs/api.md, "Previews"; docs/cli.md, "port"). */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "duration.h"
#include "output.h"

/* The name a preview's token goes by in a URL (docs/api.md, "Previews"). */
#define PREVIEW_TOKEN_PARAM "station_preview_token"

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* PORT as given on the command line: 1-65535, or the usage error. */
static int port_parse(const struct cli *cli, const char *s, unsigned *ret)
{
	uint64_t v;
	int r = cli_parse_u64(cli, "PORT", s, &v);

	if (r != 0)
		return r;
	if (v < 1 || v > 65535)
		return cli_usage(cli, "PORT %s: out of range (want 1-65535)", s);
	*ret = (unsigned)v;
	return 0;
}

/* The preview URL that hands the token over once (the listener sets a cookie for the host and
 * redirects to url without it): url?station_preview_token=TOKEN, the token percent-encoded. */
static char *open_url(const char *url, const char *token)
{
	static const char hex[] = "0123456789ABCDEF";
	char *s = malloc(strlen(url) + sizeof("?" PREVIEW_TOKEN_PARAM "=") + strlen(token) * 3);
	char *o = s;

	if (!s)
		return NULL;
	o = stpcpy(o, url);
	o = stpcpy(o, strchr(url, '?') ? "&" PREVIEW_TOKEN_PARAM "=" : "?" PREVIEW_TOKEN_PARAM "=");
	for (const unsigned char *p = (const unsigned char *)token; *p; p++) {
		if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~",
			   *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return s;
}

/* ---- expose ------------------------------------------------------------------------------ */

static int exposure_print(const json_t *e)
{
	const char *url = json_str(e, "url") ?: "?", *token = json_str(e, "token");
	_cleanup_free_ char *open = NULL;

	printf("port %lld: %s access, expires %s\n",
	       (long long)json_integer_value(json_object_get(e, "port")),
	       json_str(e, "access") ?: "?", json_str(e, "expiresAt") ?: "?");
	printf("url:   %s\n", url);
	if (token) {
		open = open_url(url, token);
		if (!open)
			return -ENOMEM;
		printf("token: %s\n", token);
		printf("open:  %s\n", open);
	}
	if (fflush(stdout) == EOF)
		return -EIO;
	if (token)
		fprintf(stderr,
			"the token is shown only this once: send it as 'Authorization: "
			"Bearer TOKEN', or open the 'open' URL in a browser once (it sets a "
			"cookie for this preview)\n");
	return 0;
}

static int cmd_port_expose(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "public", no_argument, NULL, 'p' },
		{ "expires", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct station_port_options o = {};
	_cleanup_json_ json_t *e = NULL;
	bool json = false;
	unsigned port = 0;
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		switch (opt) {
		case 'p':
			o.public = true;
			break;
		case 'e':
			r = duration_parse_ms(optarg, &o.expires_in_ms);
			if (r < 0 || o.expires_in_ms == 0)
				return cli_usage(
					cli,
					"--expires '%s': a duration above 0: 90s, 30m, 1h, "
					"7d, or milliseconds",
					optarg);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			return cli_help(cli);
		default:
			return cli_option_error(cli, argv, opt);
		}
	}
	if (argc - optind < 2)
		return cli_usage(cli, "WS and PORT are needed");
	if (argc - optind > 2)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind + 2]);
	r = port_parse(cli, argv[optind + 1], &port);
	if (r != 0)
		return r;
	r = station_port_expose(cli->client, argv[optind], port, &o, &e);
	if (r < 0) {
		bool again = r == -EBUSY &&
			     strstr(station_client_last_error(cli->client), "exposed already");
		r = cli_fail(cli, r);
		/* the controller names its API's DELETE: the CLI's way is port rm */
		if (again)
			fprintf(stderr, "  to expose it anew: station-sandbox port rm %s %u\n",
				argv[optind], port);
		return r;
	}
	r = json ? output_json(e) : exposure_print(e);
	return r < 0 ? EXIT_FAILED : 0;
}

/* ---- ls, rm ------------------------------------------------------------------------------ */

static int exposed_print(const json_t *list)
{
	static const char *const header[] = { "PORT", "ACCESS", "URL", "EXPIRES" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *e;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, e) {
		char port[16];
		const char *row[] = { port, json_str(e, "access"), json_str(e, "url"),
				      json_str(e, "expiresAt") };

		snprintf(port, sizeof(port), "%lld",
			 (long long)json_integer_value(json_object_get(e, "port")));
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int listening_print(const json_t *list)
{
	static const char *const header[] = { "PORT", "ADDRESS", "PID", "COMMAND" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *l;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, l) {
		char port[16], pid[24], command_buf[48 * 4 + 4];
		const char *command = json_str(l, "command");
		const json_t *p = json_object_get(l, "pid");
		/* The command is the sandbox's to choose: shortened, control characters gone. */
		const char *row[] = { port, json_str(l, "address"), json_is_integer(p) ? pid : NULL,
				      command ? output_shorten(command, 48, command_buf) : NULL };

		snprintf(port, sizeof(port), "%lld",
			 (long long)json_integer_value(json_object_get(l, "port")));
		snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(p));
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int ports_print(const json_t *doc)
{
	const json_t *exposed = json_object_get(doc, "exposed");
	const json_t *listening = json_object_get(doc, "listening");
	int r = 0;

	printf("exposed:\n");
	if (json_array_size(exposed) == 0)
		printf("  (none: 'station-sandbox port expose WS PORT' opens one)\n");
	else
		r = exposed_print(exposed);
	printf("\nlistening:\n");
	if (r >= 0 && json_array_size(listening) == 0)
		printf("  (none)\n");
	else if (r >= 0)
		r = listening_print(listening);
	if (r >= 0 && fflush(stdout) == EOF)
		r = -EIO;
	return r;
}

static int cmd_port_ls(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *doc = NULL;
	bool json = false;
	int r;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	r = station_port_list(cli->client, argv[optind], &doc);
	if (r < 0)
		return cli_fail(cli, r);
	r = json ? output_json(doc) : ports_print(doc);
	return r < 0 ? EXIT_FAILED : 0;
}

static int cmd_port_rm(struct cli *cli, int argc, char **argv)
{
	unsigned port = 0;
	int r;

	r = cli_parse_ws_and(cli, argc, argv, "PORT", NULL);
	if (r >= 0)
		return r;
	r = port_parse(cli, argv[optind + 1], &port);
	if (r != 0)
		return r;
	r = station_port_revoke(cli->client, argv[optind], port);
	if (r < 0)
		return cli_fail(cli, r);
	printf("port %u no longer exposed\n", port);
	return 0;
}

/* ---- the command table ------------------------------------------------------------------ */

static const struct cli_command port_expose = {
	.name = "port expose",
	.args = "[--public] [--expires DUR] [--json] WS PORT",
	.summary = "open a workspace's port at a preview URL of its own",
	.help = "The controller's preview listener (station-sandboxd --preview-listen) connects\n"
		"to PORT inside the workspace's network, so a server bound to 127.0.0.1 is\n"
		"reachable. Prints the URL; with token access (the default) also the token and a\n"
		"URL that opens the preview in a browser: both are shown only this once.\n\n"
		"  --public       no token: anyone who has the URL may open it\n"
		"  --expires DUR  90s, 30m, 1h, 7d, or milliseconds (default 24h, at most 30d)\n"
		"  --json         print the API's answer as JSON (with the token)\n",
	.run = cmd_port_expose,
};

static const struct cli_command port_ls = {
	.name = "port ls",
	.args = "[--json] WS",
	.summary = "a workspace's exposed ports (never tokens) and the ports listening in it",
	.help = "  --json  print the API's answer as JSON, {\"exposed\":[…],\"listening\":[…]}\n",
	.run = cmd_port_ls,
};

static const struct cli_command port_rm = {
	.name = "port rm",
	.args = "WS PORT",
	.summary = "stop exposing a port: its URL answers 404 from then on",
	.help = NULL,
	.run = cmd_port_rm,
};

static const struct cli_command *const port_commands[] = {
	&port_expose,
	&port_ls,
	&port_rm,
};

static int cmd_port(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "port", port_commands, ELEMENTSOF(port_commands),
			    "list", "ls");
}

const struct cli_command cli_cmd_port = {
	.name = "port",
	.args = "expose|ls|rm [ARGS]",
	.summary = "preview URLs of a workspace's ports: expose, ls, rm",
	.help = "  expose [--public] [--expires 1h] WS PORT   URL (and token, shown once)\n"
		"  ls WS                                      exposed and listening ports\n"
		"  rm WS PORT                                 its URL answers 404 from then on\n"
		"'station-sandbox port COMMAND --help' describes a command.\n",
	.run = cmd_port,
};
