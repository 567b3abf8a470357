/* SPDX-License-Identifier: MIT */
/* network: a workspace's network mode, address, egress policy and counters; and the egress
 * rules of `create` and `network --set/--allow`, written on the command line or read from a
 * file. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"

#define EGRESS_FILE_MAX (256 * 1024)
#define ALLOW_RULE_MAX 300 /* a 253-character name, a port list and a protocol */
#define ALLOW_PORTS_MAX 32

/* "443,80" into a JSON array of integers 1..65535. */
static int allow_ports(const struct cli *cli, const char *rule, char *list, json_t *ports)
{
	char *save = NULL;
	size_t n = 0;

	if (!*list || list[strlen(list) - 1] == ',')
		return cli_usage(cli, "--allow '%s': ports must be numbers from 1 to 65535", rule);
	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(p, &end, 10);
		if (p[0] < '0' || p[0] > '9' || *end || errno || v < 1 || v > 65535)
			return cli_usage(cli, "--allow '%s': ports must be numbers from 1 to 65535",
					 rule);
		if (++n > ALLOW_PORTS_MAX)
			return cli_usage(cli, "--allow '%s': at most %d ports", rule,
					 ALLOW_PORTS_MAX);
		if (json_array_append_new(ports, json_integer((json_int_t)v)) < 0)
			return EXIT_FAILED;
	}
	return 0;
}

/* Splits DEST[:PORTS][/tcp|/udp] into a rule object; what DEST must look like is the
 * controller's to say. */
static int allow_rule(const struct cli *cli, const char *rule, json_t **ret)
{
	_cleanup_json_ json_t *o = json_object(), *ports = json_array();
	char buf[ALLOW_RULE_MAX + 1], *colon;
	const char *proto = NULL;
	size_t n = strlen(rule);

	if (!o || !ports)
		return EXIT_FAILED;
	if (n == 0 || n > ALLOW_RULE_MAX)
		return cli_usage(cli,
				 "--allow wants DEST[:PORTS][/tcp|/udp] of at most %d "
				 "characters",
				 ALLOW_RULE_MAX);
	memcpy(buf, rule, n + 1);
	if (n > 4 && (strcmp(buf + n - 4, "/tcp") == 0 || strcmp(buf + n - 4, "/udp") == 0)) {
		proto = buf + n - 3;
		buf[n - 4] = '\0';
	}
	colon = strchr(buf, ':');
	if (colon && strchr(colon + 1, ':'))
		return cli_usage(cli,
				 "--allow '%s': IPv6 egress is not available: workspaces have "
				 "no IPv6",
				 rule);
	if (colon) {
		*colon = '\0';
		int r = allow_ports(cli, rule, colon + 1, ports);
		if (r != 0)
			return r;
	}
	if (!buf[0])
		return cli_usage(cli, "--allow '%s': no destination before the ports", rule);

	bool cidr = strspn(buf, "0123456789./") == strlen(buf);
	if (json_object_set_new(o, cidr ? "cidr" : "domain", json_string(buf)) < 0 ||
	    (json_array_size(ports) > 0 && json_object_set(o, "ports", ports) < 0) ||
	    (proto && json_object_set_new(o, "proto", json_string(proto)) < 0))
		return EXIT_FAILED;
	*ret = TAKE_PTR(o);
	return 0;
}

int cli_egress_allow(const struct cli *cli, struct cli_egress *eg, const char *rule)
{
	json_t *o = NULL;
	int r;

	if (!eg->allow) {
		eg->allow = json_array();
		if (!eg->allow)
			return EXIT_FAILED;
	}
	r = allow_rule(cli, rule, &o);
	if (r != 0)
		return r;
	return json_array_append_new(eg->allow, o) < 0 ? EXIT_FAILED : 0;
}

int cli_egress_text(const struct cli *cli, struct cli_egress *eg, const char *file_option,
		    const char **ret)
{
	int r;

	*ret = NULL;
	if (eg->allow && eg->file)
		return cli_usage(cli, "--allow and %s are exclusive", file_option);
	if (eg->file) {
		r = read_file_or_stdin(eg->file, EGRESS_FILE_MAX, &eg->text, NULL);
		if (r < 0) {
			fprintf(stderr, "station-sandbox: cannot read %s '%s': %s\n", file_option,
				eg->file, strerror(-r));
			return EXIT_FAILED;
		}
	} else if (eg->allow) {
		_cleanup_json_ json_t *policy = json_pack("{s:O}", "allow", eg->allow);

		eg->text = policy ? json_dumps(policy, JSON_COMPACT) : NULL;
		if (!eg->text)
			return EXIT_FAILED;
	}
	*ret = eg->text;
	return 0;
}

void cli_egress_done(struct cli_egress *eg)
{
	json_decref(eg->allow);
	free(eg->text);
	*eg = (struct cli_egress){};
}

/* ---- a run's denials -------------------------------------------------------------------- */

/* " --allow DEST[:PORTS][/PROTO]", quoted for a shell when it needs it. */
static void allow_print(FILE *f, const char *dest, json_t *ports, const char *proto)
{
	static const char plain[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-/";
	bool quote = dest && strspn(dest, plain) != strlen(dest);
	json_t *port;
	size_t i;

	fprintf(f, " --allow %s%s", quote ? "'" : "", dest ? dest : "?");
	json_array_foreach(ports, i, port)
		fprintf(f, "%s%" JSON_INTEGER_FORMAT, i ? "," : ":", json_integer_value(port));
	if (proto)
		fprintf(f, "/%s", proto);
	if (quote)
		fputc('\'', f);
}

/* "station-sandbox network WS --allow …": the rules in force plus the refused destination
 * (--allow replaces the whole policy). */
static void restricted_hint(FILE *f, const char *ws, json_t *network, json_t *last)
{
	_cleanup_json_ json_t *port = json_pack("[O]", json_object_get(last, "port"));
	const char *name = json_string_value(json_object_get(last, "name"));
	const char *proto = json_string_value(json_object_get(last, "proto"));
	bool l4 = proto && (strcmp(proto, "tcp") == 0 || strcmp(proto, "udp") == 0);
	json_t *rule;
	size_t i;

	fprintf(f,
		"network restricted; to allow it, replace the policy with: "
		"station-sandbox network %s",
		ws);
	json_array_foreach(json_object_get(json_object_get(network, "egress"), "allow"), i, rule) {
		const char *d = json_string_value(json_object_get(rule, "cidr"));

		allow_print(f, d ? d : json_string_value(json_object_get(rule, "domain")),
			    json_object_get(rule, "ports"),
			    json_string_value(json_object_get(rule, "proto")));
	}
	if (name)
		allow_print(f, name, NULL, NULL);
	else
		allow_print(f, json_string_value(json_object_get(last, "address")),
			    l4 ? port : NULL, l4 ? proto : NULL);
}

/* The classes no egress rule opens (the worker's own): only the operator's flag does. */
static bool class_fenced(const char *class)
{
	static const char *const fenced[] = { "worker", "connected", "gateways", "link-local",
					      "workspaces" };

	for (size_t i = 0; class && i < ELEMENTSOF(fenced); i++)
		if (strcmp(class, fenced[i]) == 0)
			return true;
	return false;
}

/* An address the worker blocks for every workspace (lastDenied.class names why). */
static void operator_hint(FILE *f, const char *mode, const char *class)
{
	fprintf(f, "network %s: the worker blocks this address for workspaces; ", mode);
	if (class)
		fprintf(f,
			"an operator opens the %s class with station-sandboxd --network-allow %s",
			class, class);
	else
		fprintf(f, "an operator opens its range with station-sandboxd --network-allow "
			   "(docs/operations.md, \"Network\")");
}

void cli_run_network_report(const struct cli *cli, const char *ws, const json_t *run)
{
	json_t *denials = json_object_get(run, "network");
	json_t *last = json_object_get(denials, "lastDenied");
	json_int_t denied = json_integer_value(json_object_get(denials, "denied"));
	const char *name = json_string_value(json_object_get(last, "name"));
	const char *address = json_string_value(json_object_get(last, "address"));
	const char *class = json_string_value(json_object_get(last, "class"));
	_cleanup_json_ json_t *network = NULL;
	_cleanup_free_ char *line = NULL;
	size_t len = 0;
	FILE *f;

	if (denied <= 0 || !(f = open_memstream(&line, &len)))
		return;
	fprintf(f,
		"station-sandbox: the network refused %" JSON_INTEGER_FORMAT " %s while this ran",
		denied, denied == 1 ? "packet or lookup" : "packets or lookups");
	if (name)
		fprintf(f, ", the last a lookup of %s", name);
	else if (address)
		fprintf(f, ", the last to %s:%" JSON_INTEGER_FORMAT "/%s", address,
			json_integer_value(json_object_get(last, "port")),
			json_string_value(json_object_get(last, "proto")));
	fprintf(f, " (");
	if (station_workspace_network_get(cli->client, ws, &network) < 0)
		network = NULL;
	const char *mode = json_string_value(json_object_get(network, "mode"));
	if (mode && strcmp(mode, "bridge") == 0)
		operator_hint(f, mode, class);
	else if (mode && strcmp(mode, "restricted") == 0 && class_fenced(class))
		operator_hint(f, mode, class);
	else if (mode && strcmp(mode, "restricted") == 0 && last)
		restricted_hint(f, ws, network, last);
	else
		fprintf(f, "'station-sandbox network %s' lists what it refused", ws);
	fprintf(f, ")\n");
	if (fclose(f) == 0 && line)
		fputs(line, stderr);
}

/* ---- network ----------------------------------------------------------------------------- */

static const char *rule_proto(json_t *rule)
{
	const char *p = json_string_value(json_object_get(rule, "proto"));

	if (p)
		return p;
	return json_object_get(rule, "cidr") ? "tcp+udp" : "tcp";
}

static int rules_print(json_t *egress)
{
	static const char *const header[] = { "  ALLOW", "PORTS", "PROTO" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *allow = json_object_get(egress, "allow"), *rule;
	size_t i;

	if (json_array_size(allow) == 0) {
		printf("egress:   nothing allowed\n");
		return 0;
	}
	printf("egress:\n");
	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(allow, i, rule) {
		char dest[300], ports[256] = "all";
		size_t n = 0, k;
		json_t *port;
		const char *d = json_string_value(json_object_get(rule, "cidr"));

		if (!d)
			d = json_string_value(json_object_get(rule, "domain"));
		snprintf(dest, sizeof dest, "  %s", d ? d : "?");
		json_array_foreach(json_object_get(rule, "ports"), k, port)
			if (n < sizeof ports)
				n += (size_t)snprintf(ports + n, sizeof ports - n,
						      "%s%" JSON_INTEGER_FORMAT, k ? "," : "",
						      json_integer_value(port));
		const char *row[] = { dest, ports, rule_proto(rule) };
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static void field_print(json_t *network, const char *label, const char *key)
{
	const char *v = json_string_value(json_object_get(network, key));

	if (v)
		printf("%-9s %s\n", label, v);
}

static int network_print(json_t *network)
{
	json_t *counters = json_object_get(network, "counters");

	field_print(network, "mode:", "mode");
	field_print(network, "address:", "address");
	field_print(network, "gateway:", "gateway");
	if (counters)
		printf("traffic:  %" JSON_INTEGER_FORMAT
		       " connections allowed, %" JSON_INTEGER_FORMAT " packets denied\n"
		       "dns:      %" JSON_INTEGER_FORMAT " queries answered, %" JSON_INTEGER_FORMAT
		       " refused\n",
		       json_integer_value(json_object_get(counters, "allowed")),
		       json_integer_value(json_object_get(counters, "denied")),
		       json_integer_value(json_object_get(counters, "dnsAllowed")),
		       json_integer_value(json_object_get(counters, "dnsRefused")));
	if (json_object_get(network, "egress"))
		return rules_print(json_object_get(network, "egress"));
	return 0;
}

struct network_args {
	struct cli_egress egress;
	bool json;
};

static int network_option(struct cli *cli, int opt, char **argv, struct network_args *a)
{
	switch (opt) {
	case 's':
		a->egress.file = optarg;
		return 0;
	case 'a':
		return cli_egress_allow(cli, &a->egress, optarg);
	case 'j':
		a->json = true;
		return 0;
	case 'h':
		return cli_help(cli);
	default:
		return cli_option_error(cli, argv, opt);
	}
}

/* Returns < 0 to go on with the workspace at argv[optind], else the exit status. */
static int network_parse(struct cli *cli, int argc, char **argv, struct network_args *a)
{
	static const struct option options[] = {
		{ "set", required_argument, NULL, 's' },
		{ "allow", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hj", options, NULL)) >= 0) {
		r = network_option(cli, opt, argv, a);
		if (r != 0)
			return r;
		if (opt == 'h')
			return 0;
	}
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	return -1;
}

static int cmd_network(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *network = NULL;
	struct network_args a = {};
	const char *egress = NULL;
	int r;

	r = network_parse(cli, argc, argv, &a);
	if (r < 0)
		r = cli_egress_text(cli, &a.egress, "--set", &egress) ?: -1;
	if (r >= 0) { /* help, or a usage error */
		cli_egress_done(&a.egress);
		return r;
	}
	if (egress)
		r = station_workspace_network_set(cli->client, argv[optind], egress, &network);
	else
		r = station_workspace_network_get(cli->client, argv[optind], &network);
	cli_egress_done(&a.egress);
	if (r < 0)
		return cli_fail(cli, r);
	if (a.json)
		return output_json(network) < 0 ? EXIT_FAILED : 0;
	return network_print(network) < 0 ? EXIT_FAILED : 0;
}

const struct cli_command cli_cmd_network = {
	.name = "network",
	.args = "[--json] [--set FILE|- | --allow RULE...] WS",
	.summary = "show a workspace's network, or replace its egress policy",
	.help = "Without options: the workspace's network mode, address, egress policy and\n"
		"counters. --set or --allow replace the egress policy of a restricted workspace\n"
		"(new connections see it at once).\n"
		"  --set FILE|-           the new policy from a JSON file (- for stdin):\n"
		"                         {\"allow\": [{\"domain\": \"github.com\"}, ...]}\n"
		"  --allow RULE           the new policy, one rule per --allow (repeatable):\n" CLI_ALLOW_HELP
		"  --json                 print the network as JSON\n",
	.run = cmd_network,
};
