/* SPDX-License-Identifier: MIT */
/* station-sandbox: the operator's command line. Global flags and the environment choose the
 * controller; the command table dispatches to cmd-*.c. */

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "cli.h"
#include "output.h"

#define PROGRAM "station-sandbox"
#define NO_CONTROLLER_HINT "is station-sandboxd running? start one with 'make run'"

static const struct cli_command *const commands[] = {
	&cli_cmd_ready,	  &cli_cmd_worker,  &cli_cmd_create, &cli_cmd_ls,	&cli_cmd_rm,
	&cli_cmd_restart, &cli_cmd_exec,    &cli_cmd_status, &cli_cmd_cancel,	&cli_cmd_runs,
	&cli_cmd_image,	  &cli_cmd_service, &cli_cmd_attach, &cli_cmd_terminal, &cli_cmd_network,
	&cli_cmd_files,	  &cli_cmd_secret,  &cli_cmd_port,   &cli_cmd_mcp,	&cli_cmd_events,
	&cli_cmd_token,	  &cli_cmd_audit,   &cli_cmd_pause,  &cli_cmd_resume,	&cli_cmd_snapshot,
	&cli_cmd_fork,	  &cli_cmd_label,   &cli_cmd_update, &cli_cmd_usage,	&cli_cmd_code,
	&cli_cmd_context,
};

struct global_options {
	const char *socket;
	const char *url;
	const char *token;
	const char *worker;
};

int cli_usage(const struct cli *cli, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROGRAM " %s: ", cli->command->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: " PROGRAM " %s%s%s\n", cli->command->name,
		cli->command->args[0] ? " " : "", cli->command->args);
	return EXIT_USAGE;
}

int cli_help(const struct cli *cli)
{
	const struct cli_command *cmd = cli->command;

	printf("usage: " PROGRAM " %s%s%s\n\n%s\n", cmd->name, cmd->args[0] ? " " : "", cmd->args,
	       cmd->summary);
	if (cmd->help)
		printf("\n%s", cmd->help);
	return 0;
}

int cli_dispatch(struct cli *cli, int argc, char **argv, const char *group,
		 const struct cli_command *const *commands, size_t n, const char *alias_from,
		 const char *alias_to)
{
	const char *sub = argc > 1 ? argv[1] : NULL;
	size_t skip = strlen(group) + 1;

	if (!sub)
		return cli_usage(cli, "no %s command given", group);
	if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0)
		return cli_help(cli);
	if (alias_from && strcmp(sub, alias_from) == 0)
		sub = alias_to;
	for (size_t i = 0; i < n; i++)
		if (strcmp(commands[i]->name + skip, sub) == 0) {
			cli->command = commands[i];
			optind = 0;
			return cli->command->run(cli, argc - 1, argv + 1);
		}
	return cli_usage(cli, "unknown %s command '%s'", group, sub);
}

int cli_option_error(const struct cli *cli, char **argv, int opt)
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		return cli_usage(cli, "option '%s' needs a value", arg);
	if (optopt && strncmp(arg, "--", 2) != 0)
		return cli_usage(cli, "unknown option '-%c'", optopt);
	return cli_usage(cli, "unknown option '%s'", arg);
}

/* "w1,w2" of a client over several workers' endpoint "workers:w1,w2". */
static const char *workers_named(const char *endpoint)
{
	return strncmp(endpoint, "workers:", 8) == 0 ? endpoint + 8 : endpoint;
}

int cli_fail(const struct cli *cli, int r)
{
	char *safe;

	if (r == -ECONNREFUSED && station_client_worker_name(cli->client)) {
		/* The message names the worker and its URL. */
		fprintf(stderr, PROGRAM ": %s\n", station_client_last_error(cli->client));
		return EXIT_NO_CONTROLLER;
	}
	if (r == -ECONNREFUSED && station_client_n_workers(cli->client) > 0) {
		fprintf(stderr, PROGRAM ": %s\n", station_client_last_error(cli->client));
		return EXIT_NO_CONTROLLER;
	}
	if (r == -EDESTADDRREQ) {
		/* A command about no workspace, with a worker list: which worker is for the user. */
		fprintf(stderr,
			PROGRAM
			" %s: with a worker list, this goes to one worker: add --worker NAME "
			"before the command (one of %s)\n",
			cli->command->name, workers_named(station_client_endpoint(cli->client)));
		return EXIT_USAGE;
	}
	if (r == -ETIMEDOUT) {
		/* The message names the controller or worker and the deadline (STATION_TIMEOUT_MS). */
		fprintf(stderr, PROGRAM ": %s\n", station_client_last_error(cli->client));
		return EXIT_NO_CONTROLLER;
	}
	if (r == -ECONNREFUSED) {
		fprintf(stderr, PROGRAM ": no controller at %s (" NO_CONTROLLER_HINT ")\n",
			station_client_endpoint(cli->client));
		return EXIT_NO_CONTROLLER;
	}
	/* The message may quote what a sandbox chose (a file name): shown escaped. */
	safe = output_escape(station_client_last_error(cli->client));
	fprintf(stderr, PROGRAM ": %s\n", safe ? safe : station_client_last_error(cli->client));
	free(safe);
	if (strcmp(station_client_last_error_code(cli->client), STATION_ERROR_PAUSED) == 0)
		fprintf(stderr,
			"  to resume it: " PROGRAM " resume %s (or create workspaces with "
			"--auto-resume)\n",
			cli->workspace ? cli->workspace : "WS");
	return EXIT_FAILED;
}

int cli_parse_json_args(const struct cli *cli, int argc, char **argv, bool *json)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		if (opt != 'j' || !json)
			return cli_option_error(cli, argv, opt == 'j' ? '?' : opt);
		*json = true;
	}
	return -1;
}

int cli_parse_ws_and(const struct cli *cli, int argc, char **argv, const char *what, bool *json)
{
	int r = cli_parse_json_args(cli, argc, argv, json);

	if (r >= 0)
		return r;
	if (argc - optind < 2)
		return cli_usage(cli, "WS and %s are needed", what);
	if (argc - optind > 2)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind + 2]);
	return -1;
}

char *cli_words_join(char *const *words, int n)
{
	size_t len = 1, k;
	char *s, *p;

	for (int i = 0; i < n; i++)
		len += strlen(words[i]) + 1;
	s = p = malloc(len);
	if (!s)
		return NULL;
	for (int i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ' ';
		k = strlen(words[i]);
		memcpy(p, words[i], k);
		p += k;
	}
	*p = '\0';
	return s;
}

int cli_parse_u64(const struct cli *cli, const char *name, const char *s, uint64_t *ret)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ')
		return cli_usage(cli, "%s wants a non-negative integer, not '%s'", name, s);
	*ret = v;
	return 0;
}

int cli_env_add(const struct cli *cli, char ***env, const char *word)
{
	size_t n = 0;
	char **p;

	if (!strchr(word, '=') || word[0] == '=')
		return cli_usage(cli, "--env wants KEY=VALUE, not '%s'", word);
	while (*env && (*env)[n])
		n++;
	p = realloc(*env, (n + 2) * sizeof(char *));
	if (!p) {
		fprintf(stderr, PROGRAM ": out of memory\n");
		return EXIT_FAILED;
	}
	p[n] = (char *)word;
	p[n + 1] = NULL;
	*env = p;
	return 0;
}

int cli_absolute_path(const struct cli *cli, const char *name, const char *path, char **ret)
{
	char *p = path[0] == '/' ? strdup(path) : realpath(path, NULL);

	if (!p && errno == ENOMEM) {
		fprintf(stderr, PROGRAM ": out of memory\n");
		return EXIT_FAILED;
	}
	if (!p)
		return cli_usage(cli, "%s '%s': %s", name, path, strerror(errno));
	*ret = p;
	return 0;
}

#define MAIN_USAGE                                                                                 \
	"usage: " PROGRAM " [--socket PATH | --url URL] [--token TOKEN] [--worker NAME] COMMAND "  \
	"[ARGS]\n"

/* A usage error before the command: the problem, then the usage line. */
static int main_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int main_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROGRAM ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n" MAIN_USAGE "(see '" PROGRAM " --help' for the commands)\n");
	return EXIT_USAGE;
}

static void main_usage(void)
{
	printf(MAIN_USAGE "\ncommands:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		printf("  %-8s %s\n", commands[i]->name, commands[i]->summary);
	printf("\nThe controller is the first of: --socket, --url, the worker list, $STATION_URL,\n"
	       "$STATION_SOCKET, $STATION_ROOT/station.sock, " STATION_DEFAULT_SOCKET ".\n"
	       "--token (else $STATION_TOKEN) is the bearer token a TCP listener needs.\n"
	       "The worker list ($STATION_WORKERS=\"w1=http://host1:8080,w2=…\", else the file\n"
	       "$STATION_WORKERS_FILE, or ~/.config/station-sandbox/workers unless $STATION_URL,\n"
	       "$STATION_SOCKET or $STATION_ROOT names one controller) sends each command\n"
	       "about a workspace to the worker its id names; ls lists every worker; create picks\n"
	       "the worker with the most room (create --worker NAME to choose). --worker NAME\n"
	       "sends every command to that worker of the list.\n"
	       "'" PROGRAM " COMMAND --help' describes a command.\n");
}

static const struct cli_command *command_find(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

/* Returns < 0 to go on, else the exit status. */
static int parse_global(int argc, char **argv, struct global_options *o)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "url", required_argument, NULL, 'u' },
		{ "token", required_argument, NULL, 't' },
		{ "worker", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:h", options, NULL)) >= 0) {
		switch (opt) {
		case 's':
			o->socket = optarg;
			break;
		case 'u':
			o->url = optarg;
			break;
		case 't':
			o->token = optarg;
			break;
		case 'w':
			o->worker = optarg;
			break;
		case 'h':
			main_usage();
			return 0;
		case 'V':
			printf(PROGRAM " " STATION_VERSION "\n");
			return 0;
		default:
			if (opt == ':')
				return main_usage_error("option '%s' needs a value",
							argv[optind - 1]);
			return main_usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (o->socket && o->url)
		return main_usage_error("--socket and --url are exclusive");
	return -1;
}

/* Flags beat the environment; the default socket comes last. */
static char *endpoint_resolve(const struct global_options *o)
{
	const char *root = getenv("STATION_ROOT");
	char *e = NULL;

	if (o->url)
		return strdup(o->url);
	if (o->socket)
		return asprintf(&e, "unix:%s", o->socket) < 0 ? NULL : e;
	if (getenv("STATION_URL") && *getenv("STATION_URL"))
		return strdup(getenv("STATION_URL"));
	if (getenv("STATION_SOCKET") && *getenv("STATION_SOCKET"))
		return asprintf(&e, "unix:%s", getenv("STATION_SOCKET")) < 0 ? NULL : e;
	if (root && *root)
		return asprintf(&e, "unix:%s/station.sock", root) < 0 ? NULL : e;
	return strdup("unix:" STATION_DEFAULT_SOCKET);
}

/* A worker list is configured: STATION_WORKERS, STATION_WORKERS_FILE, or the default file. */
static bool workers_configured(void)
{
	const char *env = getenv("STATION_WORKERS"), *file = getenv("STATION_WORKERS_FILE");
	const char *home = getenv("HOME");
	_cleanup_free_ char *def = NULL;

	if ((env && *env) || (file && *file))
		return true;
	return home && *home && asprintf(&def, "%s/.config/station-sandbox/workers", home) >= 0 &&
	       access(def, F_OK) == 0;
}

/* The client over the worker list; with --worker, that one worker's handle (*ret_owner is what
 * to free). */
static int workers_open(const struct global_options *o, const char *token,
			struct station_client **ret, struct station_client **ret_owner)
{
	_cleanup_free_ char *error = NULL;
	struct station_client *all = NULL, *one;
	int r = station_client_new_workers(NULL, NULL, token, &all, &error);

	if (r < 0) {
		fprintf(stderr, PROGRAM ": %s\n", error ? error : strerror(-r));
		return r;
	}
	one = o->worker ? station_client_worker(all, o->worker) : all;
	if (!one) {
		fprintf(stderr, PROGRAM ": --worker %s: no such worker in the worker list (%s)\n",
			o->worker, station_client_endpoint(all));
		station_client_free(all);
		return -ENOENT;
	}
	*ret = one;
	*ret_owner = all;
	return 0;
}

static int client_open(const struct global_options *o, struct station_client **ret,
		       struct station_client **ret_owner)
{
	_cleanup_free_ char *endpoint = endpoint_resolve(o);
	const char *token = o->token ? o->token : getenv("STATION_TOKEN");
	int r;

	if (!endpoint)
		return -ENOMEM;
	if (!o->url && !o->socket && workers_configured())
		return workers_open(o, token && *token ? token : NULL, ret, ret_owner);
	if (o->worker) {
		fprintf(stderr, PROGRAM ": --worker needs a worker list (STATION_WORKERS or a "
					"workers file; docs/cli.md, \"Many workers\")\n");
		return -EINVAL;
	}
	r = station_client_new(endpoint, token && *token ? token : NULL, ret);
	if (r < 0)
		fprintf(stderr, PROGRAM ": cannot use endpoint '%s' (want %s)\n", endpoint,
			"unix:/PATH or http://HOST:PORT");
	return r;
}

/* jansson seeds its hash function from /dev/urandom (open, read, close) unless told a seed: one
 * getrandom() instead. */
static void json_seed(void)
{
	size_t seed = 0;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed) && seed != 0)
		json_object_seed(seed);
}

int main(int argc, char **argv)
{
	struct global_options o = {};
	struct cli cli = {};
	struct station_client *owner = NULL;
	int r;

	json_seed();
	r = parse_global(argc, argv, &o);
	if (r >= 0)
		return r;
	if (optind >= argc)
		return main_usage_error("no command given");
	if (strcmp(argv[optind], "help") == 0) {
		main_usage();
		return 0;
	}
	cli.command = command_find(argv[optind]);
	if (!cli.command)
		return main_usage_error("unknown command '%s'", argv[optind]);
	if (client_open(&o, &cli.client, &owner) < 0)
		return EXIT_USAGE;
	argc -= optind;
	argv += optind;
	optind = 0; /* glibc: a full re-initialisation for the command's own getopt_long() */
	r = cli.command->run(&cli, argc, argv);
	station_client_free(owner ? owner : cli.client);
	return r;
}
