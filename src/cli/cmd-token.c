/* SPDX-License-Identifier: MIT */
/* token create | list | revoke, and audit: the controller's bearer tokens and who used them
 * (docs/api.md, "Tokens", "Audit"); an admin token's work. */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "duration.h"
#include "output.h"

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* "24h", "30m", "7d", "90s" from now, as RFC 3339 into buf: whole seconds, so a unit is
 * needed (duration_parse_ms() alone takes a plain number as milliseconds). */
static int expires_in(const struct cli *cli, const char *s, char *buf, size_t size)
{
	size_t n = strlen(s);
	uint64_t ms;
	time_t t;
	struct tm tm;

	if (duration_parse_ms(s, &ms) < 0 || n < 2 || !strchr("smhd", s[n - 1]) ||
	    strcmp(s + n - 2, "ms") == 0)
		return cli_usage(
			cli, "--expires-in '%s': a number and a unit (s, m, h, d), e.g. 24h", s);
	if (ms == 0 || ms > 3650ull * 86400 * 1000)
		return cli_usage(cli,
				 "--expires-in '%s': a number and a unit (s, m, h, d), up to "
				 "3650d",
				 s);
	t = time(NULL) + (time_t)(ms / 1000);
	if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return cli_usage(cli, "--expires-in '%s': cannot compute the time", s);
	return 0;
}

static int cmd_token_create(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "scope", required_argument, NULL, 's' },
		{ "tenant", required_argument, NULL, 't' },
		{ "expires", required_argument, NULL, 'e' },
		{ "expires-in", required_argument, NULL, 'i' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "memory-mb", required_argument, NULL, 'm' },
		{ "pids-limit", required_argument, NULL, 'p' },
		{ "max-workspaces", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct station_token_options o = {};
	_cleanup_json_ json_t *token = NULL;
	const char *scope = NULL;
	char when[40];
	bool json = false;
	uint64_t v;
	int opt, r = 0;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		switch (opt) {
		case 's':
			scope = optarg;
			break;
		case 't':
			o.tenant = optarg;
			break;
		case 'e':
			o.expires_at = optarg;
			break;
		case 'i':
			r = expires_in(cli, optarg, when, sizeof(when));
			o.expires_at = when;
			break;
		case 'c': {
			char *end = NULL;

			errno = 0;
			o.cpus = strtod(optarg, &end);
			if (errno || end == optarg || *end || o.cpus < 0)
				return cli_usage(cli, "--cpus '%s': a number of CPUs, e.g. 1.5",
						 optarg);
			o.limits = true;
			break;
		}
		case 'm':
		case 'p':
		case 'w':
			r = cli_parse_u64(cli,
					  opt == 'm' ? "--memory-mb" :
					  opt == 'p' ? "--pids-limit" :
						       "--max-workspaces",
					  optarg, &v);
			if (r == 0 && v > UINT32_MAX)
				return cli_usage(cli, "%s: at most %u", optarg, UINT32_MAX);
			if (opt == 'm')
				o.memory_mb = (uint32_t)v;
			else if (opt == 'p')
				o.pids_limit = (uint32_t)v;
			else
				o.workspaces = (uint32_t)v;
			o.limits = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			return cli_help(cli);
		default:
			return cli_option_error(cli, argv, opt);
		}
		if (r != 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no token name given" : "one name at a time");
	if (!scope)
		return cli_usage(cli, "--scope admin|tenant|read is needed");
	r = station_token_create(cli->client, argv[optind], scope, &o, &token);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(token) < 0 ? EXIT_FAILED : 0;
	fprintf(stderr, "token %s (%s%s%s): keep the secret now, it is not shown again\n",
		json_str(token, "id") ?: "?", scope, o.tenant ? ", tenant " : "",
		o.tenant ? o.tenant : "");
	printf("%s\n", json_str(token, "token") ?: "");
	return 0;
}

static int tokens_print(const json_t *list)
{
	static const char *const header[] = { "ID",	 "NAME",  "SCOPE",    "TENANT",
					      "EXPIRES", "STATE", "LAST USED" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *k;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, k) {
		const char *state = json_str(k, "revokedAt")			? "revoked" :
				    json_is_true(json_object_get(k, "expired")) ? "expired" :
										  "active";
		const char *row[] = {
			json_str(k, "id"),
			json_str(k, "name"),
			json_str(k, "scope"),
			json_str(k, "tenant") ?: "-",
			json_str(k, "expiresAt") ?: "never",
			state,
			json_str(k, "lastUsedAt") ?: "never",
		};

		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int cmd_token_list(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *list = NULL;
	bool json = false;
	int r;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (argc != optind)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	r = station_token_list(cli->client, &list);
	if (r < 0)
		return cli_fail(cli, r);
	r = json ? output_json(list) : tokens_print(list);
	return r < 0 ? EXIT_FAILED : 0;
}

static int cmd_token_revoke(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *token = NULL;
	bool json = false;
	int r;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (argc - optind != 1)
		return cli_usage(cli, argc == optind ? "no token id given" : "one token at a time");
	r = station_token_revoke(cli->client, argv[optind], &token);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(token) < 0 ? EXIT_FAILED : 0;
	printf("%s revoked\n", argv[optind]);
	return 0;
}

static const struct cli_command token_create = {
	.name = "token create",
	.args = "--scope admin|tenant|read [--tenant T] [--expires TIME | --expires-in DUR]\n"
		"       [--cpus N] [--memory-mb N] [--pids-limit N] [--max-workspaces N] [--json] "
		"NAME",
	.summary = "create a bearer token; its secret is printed once",
	.help = "The secret goes to stdout (nothing else does), shown this once; the controller\n"
		"keeps only its hash.\n\n"
		"  --scope S            admin (everything), tenant (its tenant's objects) or read\n"
		"                       (GET only)\n"
		"  --tenant T           the tenant ([a-z0-9-], 1-64): needed for --scope tenant; a\n"
		"                       read token with one reads only that tenant's objects\n"
		"  --expires TIME       RFC 3339 (2026-12-31T00:00:00Z)\n"
		"  --expires-in DUR     from now: 90s, 30m, 24h, 7d\n"
		"  --cpus, --memory-mb, --pids-limit   caps per workspace of a tenant token\n"
		"  --max-workspaces N   the tenant's workspaces at once\n"
		"  --json               print the whole answer as JSON\n",
	.run = cmd_token_create,
};

static const struct cli_command token_list = {
	.name = "token list",
	.args = "[--json]",
	.summary = "list tokens (never their secrets)",
	.help = "  --json  print the tokens as a JSON array\n",
	.run = cmd_token_list,
};

static const struct cli_command token_revoke = {
	.name = "token revoke",
	.args = "[--json] ID",
	.summary = "revoke a token at once, closing its open streams",
	.help = "  --json  print the revoked token as JSON\n",
	.run = cmd_token_revoke,
};

static const struct cli_command *const token_commands[] = {
	&token_create,
	&token_list,
	&token_revoke,
};

static int cmd_token(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "token", token_commands, ELEMENTSOF(token_commands),
			    "ls", "list");
}

const struct cli_command cli_cmd_token = {
	.name = "token",
	.args = "create|list|revoke [ARGS]",
	.summary = "bearer tokens (admin only): create, list, revoke",
	.help = "  create --scope S [--tenant T] [--expires-in 24h] NAME   secret printed once\n"
		"  list                                                   never secrets\n"
		"  revoke ID                                              at once\n"
		"'station-sandbox token COMMAND --help' describes a command.\n",
	.run = cmd_token,
};

/* ---- audit ------------------------------------------------------------------------------- */

static int audit_print(const json_t *doc)
{
	static const char *const header[] = { "ID",	"AT",	"TOKEN",  "TENANT",
					      "METHOD", "PATH", "STATUS", "OUTCOME" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *e;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(json_object_get(doc, "entries"), i, e) {
		char id[24], status[8], who[160];

		snprintf(id, sizeof(id), "%lld",
			 (long long)json_integer_value(json_object_get(e, "id")));
		snprintf(status, sizeof(status), "%lld",
			 (long long)json_integer_value(json_object_get(e, "status")));
		snprintf(who, sizeof(who), "%s%s%s%s", json_str(e, "tokenId") ?: "(none)",
			 json_str(e, "tokenName") ? " (" : "", json_str(e, "tokenName") ?: "",
			 json_str(e, "tokenName") ? ")" : "");
		const char *row[] = {
			id,
			json_str(e, "at"),
			who,
			json_str(e, "tenant") ?: "-",
			json_str(e, "method"),
			json_str(e, "path"),
			status,
			json_str(e, "outcome"),
		};

		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int cmd_audit(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "limit", required_argument, NULL, 'l' },
		{ "before", required_argument, NULL, 'b' },
		{ "token", required_argument, NULL, 't' },
		{ "tenant", required_argument, NULL, 'T' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct station_audit_options o = {};
	_cleanup_json_ json_t *doc = NULL;
	bool json = false;
	uint64_t v;
	int opt, r = 0;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		switch (opt) {
		case 'l':
			r = cli_parse_u64(cli, "--limit", optarg, &v);
			o.limit = (size_t)v;
			break;
		case 'b':
			r = cli_parse_u64(cli, "--before", optarg, &v);
			o.before = (long long)v;
			break;
		case 't':
			o.token_id = optarg;
			break;
		case 'T':
			o.tenant = optarg;
			break;
		case 'w':
			o.workspace = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			return cli_help(cli);
		default:
			return cli_option_error(cli, argv, opt);
		}
		if (r != 0)
			return r;
	}
	if (argc != optind)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	r = station_audit(cli->client, &o, &doc);
	if (r < 0)
		return cli_fail(cli, r);
	r = json ? output_json(doc) : audit_print(doc);
	if (!json && json_is_integer(json_object_get(doc, "nextBefore")))
		fprintf(stderr, "older entries: --before %lld\n",
			(long long)json_integer_value(json_object_get(doc, "nextBefore")));
	return r < 0 ? EXIT_FAILED : 0;
}

const struct cli_command cli_cmd_audit = {
	.name = "audit",
	.args = "[--limit N] [--before ID] [--token ID] [--tenant T] [--workspace WS] [--json]",
	.summary = "the audit log, newest first (admin only)",
	.help = "Who did what with which outcome: every request with a bearer token and every\n"
		"change through the unix socket.\n\n"
		"  --limit N       entries per page (1-1000, default 100)\n"
		"  --before ID     older than this entry (the next page)\n"
		"  --token ID      one token's requests (admin: the admin token)\n"
		"  --tenant T      one tenant's\n"
		"  --workspace WS  those that named this workspace\n"
		"  --json          print the page as JSON\n",
	.run = cmd_audit,
};
