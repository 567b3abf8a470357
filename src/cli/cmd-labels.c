/* SPDX-License-Identifier: MIT */
/* label, update: a workspace's name and labels (docs/cli.md, "Names and labels"). */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"

/* Appends word (borrowed) to the NULL-terminated list *v. */
static int words_add(char ***v, const char *word)
{
	size_t n = 0;
	char **p;

	while (*v && (*v)[n])
		n++;
	p = realloc(*v, (n + 2) * sizeof(char *));
	if (!p) {
		fprintf(stderr, "station-sandbox: out of memory\n");
		return EXIT_FAILED;
	}
	p[n] = (char *)word;
	p[n + 1] = NULL;
	*v = p;
	return 0;
}

int cli_label_add(const struct cli *cli, char ***labels, const char *word)
{
	if (!strchr(word, '=') || word[0] == '=')
		return cli_usage(cli, "--label wants KEY=VALUE, not '%s'", word);
	return words_add(labels, word);
}

int cli_selector_add(const struct cli *cli, char ***labels, const char *word)
{
	if (!word[0] || word[0] == '=')
		return cli_usage(cli, "--label wants KEY=VALUE or KEY, not '%s'", word);
	return words_add(labels, word);
}

/* A change of labels: "KEY=VALUE" sets, "KEY-" removes. */
static int change_add(const struct cli *cli, char ***labels, const char *word)
{
	size_t n = strlen(word);

	if (word[0] == '=' || (!strchr(word, '=') && (n < 2 || word[n - 1] != '-')))
		return cli_usage(cli, "a label change is KEY=VALUE or KEY-, not '%s'", word);
	return words_add(labels, word);
}

static int update_print(struct cli *cli, int r, json_t *ws, bool json)
{
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(ws) < 0 ? EXIT_FAILED : 0;
	printf("%s\n", json_string_value(json_object_get(ws, "id")));
	return 0;
}

static int cmd_label(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *ws = NULL;
	_cleanup_free_ char **labels = NULL;
	struct station_workspace_update u = {};
	bool json = false;
	int r;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (argc - optind < 2)
		return cli_usage(cli, "WS and at least one KEY=VALUE or KEY- are needed");
	for (int i = optind + 1; i < argc; i++) {
		r = change_add(cli, &labels, argv[i]);
		if (r != 0)
			return r;
	}
	cli->workspace = argv[optind];
	u.labels = labels;
	r = station_workspace_update(cli->client, argv[optind], &u, &ws);
	return update_print(cli, r, ws, json);
}

static int cmd_update(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "name", required_argument, NULL, 'N' },  { "no-name", no_argument, NULL, 'n' },
		{ "label", required_argument, NULL, 'L' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },	   {},
	};
	_cleanup_json_ json_t *ws = NULL;
	_cleanup_free_ char **labels = NULL;
	struct station_workspace_update u = {};
	bool json = false;
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		else if (opt == 'N' || opt == 'n') {
			u.set_name = true;
			u.name = opt == 'N' ? optarg : NULL;
		} else if (opt == 'L') {
			r = change_add(cli, &labels, optarg);
			if (r != 0)
				return r;
		} else if (opt == 'j')
			json = true;
		else
			return cli_option_error(cli, argv, opt);
	}
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	if (!u.set_name && !labels)
		return cli_usage(cli, "nothing to change: --name, --no-name or --label");
	cli->workspace = argv[optind];
	u.labels = labels;
	r = station_workspace_update(cli->client, argv[optind], &u, &ws);
	return update_print(cli, r, ws, json);
}

const struct cli_command cli_cmd_label = {
	.name = "label",
	.args = "[--json] WS KEY=VALUE|KEY-...",
	.summary = "set (KEY=VALUE) or remove (KEY-) labels of a workspace",
	.help = "  --json  print the workspace as JSON\n"
		"Other labels stay as they are. WS is the workspace's id or name.\n",
	.run = cmd_label,
};

const struct cli_command cli_cmd_update = {
	.name = "update",
	.args = "[--name NAME | --no-name] [--label KEY=VALUE|KEY-]... [--json] WS",
	.summary = "rename a workspace, or change its labels",
	.help = "  --name NAME        its new name (unique among your workspaces on the worker)\n"
		"  --no-name          remove its name\n"
		"  --label KEY=VALUE  set a label; --label KEY- removes one (repeatable)\n"
		"  --json             print the workspace as JSON\n",
	.run = cmd_update,
};
