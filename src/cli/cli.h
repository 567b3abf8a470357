/* SPDX-License-Identifier: MIT */
#pragma once

/* What main.c shares with the command files: the command table's entry type, exit statuses and
 * the argument helpers every command uses. */

#include <stdbool.h>
#include <stdint.h>

#include "basic/json-util.h"
#include "station/client.h"

#define EXIT_FAILED 1	     /* the controller refused or failed the request */
#define EXIT_NO_CONTROLLER 2 /* nothing answered at the endpoint */
#define EXIT_USAGE 64	     /* EX_USAGE */
#define EXIT_OUTPUT 74	     /* EX_IOERR: what the command printed could not be written whole */

struct cli_command;

struct cli {
	struct station_client *client;
	const struct cli_command *command;
	const char *workspace; /* the workspace a command acts on, for cli_fail()'s hints */
};

struct cli_command {
	const char *name;
	const char *args;    /* the usage line after "station-sandbox NAME " */
	const char *summary; /* one line for the command list */
	const char *help;    /* option descriptions shown by --help, or NULL */
	/* argv[0] is the command's name; getopt is reset. Returns the exit status. */
	int (*run)(struct cli *cli, int argc, char **argv);
};

extern const struct cli_command cli_cmd_ready, cli_cmd_worker;
extern const struct cli_command cli_cmd_create, cli_cmd_ls, cli_cmd_rm, cli_cmd_restart;
extern const struct cli_command cli_cmd_label, cli_cmd_update;
extern const struct cli_command cli_cmd_exec, cli_cmd_status, cli_cmd_cancel, cli_cmd_runs;
extern const struct cli_command cli_cmd_image;
extern const struct cli_command cli_cmd_service;
extern const struct cli_command cli_cmd_attach, cli_cmd_terminal;
extern const struct cli_command cli_cmd_network;
extern const struct cli_command cli_cmd_files, cli_cmd_secret;
extern const struct cli_command cli_cmd_port;
extern const struct cli_command cli_cmd_mcp;
extern const struct cli_command cli_cmd_events;
extern const struct cli_command cli_cmd_token, cli_cmd_audit;
extern const struct cli_command cli_cmd_pause, cli_cmd_resume, cli_cmd_snapshot, cli_cmd_fork;
extern const struct cli_command cli_cmd_usage;
extern const struct cli_command cli_cmd_code, cli_cmd_context;

/* Prints "station-sandbox NAME: <message>" and the usage line to stderr; returns EXIT_USAGE. */
int cli_usage(const struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints the command's usage and help to stdout; returns 0. */
int cli_help(const struct cli *cli);

/* A command group's dispatch (image, files, secret, service, token, port): runs the command
 * of commands (n, each named "<group> <sub>") that argv[1] names, with argv from there and
 * cli->command set to it; alias_from, when not NULL, is another name for alias_to. Without a
 * subcommand, or an unknown one, a usage error; --help, -h or help: the group's help. */
int cli_dispatch(struct cli *cli, int argc, char **argv, const char *group,
		 const struct cli_command *const *commands, size_t n, const char *alias_from,
		 const char *alias_to);

/* The usage error for what getopt_long() returned ('?' or ':'), with opterr = 0 and an
 * optstring starting with ':'. */
int cli_option_error(const struct cli *cli, char **argv, int opt);

/* Reports a failed client call r and returns the exit status: EXIT_NO_CONTROLLER with a hint
 * when nothing answered, else EXIT_FAILED with the client's message (and for a paused
 * workspace, how to resume cli->workspace). */
int cli_fail(const struct cli *cli, int r);

/* Parses "[--json] ARG..." and --help: --json sets *json, and is an unknown option when json is
 * NULL; the arguments start at argv[optind]. Returns < 0 to go on, else the exit status (after
 * the help or a usage error). */
int cli_parse_json_args(const struct cli *cli, int argc, char **argv, bool *json);

/* A list of every worker's ({…,"unreachable":[…]}): each worker that did not answer, on
 * stderr; EXIT_FAILED when none did, else 0. */
int cli_ls_unreachable(const struct cli *cli, json_t *all);

/* Parses "[--json] WS X": cli_parse_json_args(), then exactly two arguments, the second called
 * what ("RUN", "NAME") in the usage error. Returns < 0 to go on with argv[optind] and
 * argv[optind + 1], else the exit status. */
int cli_parse_ws_and(const struct cli *cli, int argc, char **argv, const char *what, bool *json);

/* The n words joined with single spaces (free()), the way a shell command line reads; NULL when
 * out of memory. */
char *cli_words_join(char *const *words, int n);

/* Parses a non-negative decimal integer given to option name. Returns 0, or EXIT_USAGE after
 * printing the usage error. */
int cli_parse_u64(const struct cli *cli, const char *name, const char *s, uint64_t *ret);

/* Appends word (borrowed) to the NULL-terminated "KEY=VALUE" list *env (free() the array).
 * Returns 0, or EXIT_USAGE after printing the usage error for a word without '=' or with an
 * empty key, or EXIT_FAILED when out of memory. */
int cli_env_add(const struct cli *cli, char ***env, const char *word);
/* cmd-labels.c: the same for --label KEY=VALUE of a create, and for a list's selector (KEY=VALUE
 * or KEY). */
int cli_label_add(const struct cli *cli, char ***labels, const char *word);
int cli_selector_add(const struct cli *cli, char ***labels, const char *word);

/* A path for the controller, which resolves paths on its own host: an absolute path as given, a
 * relative one made absolute here (realpath, so it must exist). Returns 0 with *ret (free()),
 * or EXIT_USAGE after printing the usage error naming option name, or EXIT_FAILED when out of
 * memory. */
int cli_absolute_path(const struct cli *cli, const char *name, const char *path, char **ret);

/* An egress policy from the command line (cmd-network.c): --allow rules, or a JSON file. */
struct cli_egress {
	json_t *allow;	  /* the --allow rules so far; NULL: none */
	const char *file; /* a JSON file of the whole policy, "-" for stdin; NULL: none */
	char *text;	  /* what cli_egress_text() made */
};

/* The --allow syntax, for the commands' help. */
#define CLI_ALLOW_HELP                                                                             \
	"                         DEST[:PORTS][/tcp|/udp], DEST a name (github.com), every\n"      \
	"                         name below one (*.npmjs.org), an IPv4 address or network\n"      \
	"                         (203.0.113.0/24); PORTS 443 or 443,80 (default: all);\n"         \
	"                         protocol default: tcp for a name, both for an address\n"

/* Adds one --allow RULE. Returns 0, or EXIT_USAGE after printing the usage error, or
 * EXIT_FAILED when out of memory. */
int cli_egress_allow(const struct cli *cli, struct cli_egress *eg, const char *rule);
/* The policy as JSON text in *ret (owned by eg), NULL when neither --allow nor a file was given;
 * file_option names the file's option in messages. Returns 0 or the exit status. */
int cli_egress_text(const struct cli *cli, struct cli_egress *eg, const char *file_option,
		    const char **ret);
void cli_egress_done(struct cli_egress *eg);
/* After a finished run whose network refused something (run.network.denied > 0): one line on
 * stderr naming the last destination refused and how to allow it (docs/cli.md). */
void cli_run_network_report(const struct cli *cli, const char *ws, const json_t *run);
