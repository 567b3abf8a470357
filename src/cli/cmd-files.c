/* SPDX-License-Identifier: MIT */
/* files ls | stat | cat | get | put | mkdir | mv | rm | watch: a workspace's files, read and
 * written by its agent inside the sandbox. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

static int interrupt_check(void *userdata)
{
	return interrupted != 0;
}

/* ^C and SIGTERM stop the call in progress (it returns -EINTR). */
static void interrupt_on_signals(struct cli *cli)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	station_client_set_interrupt(cli->client, interrupt_check, NULL);
}

static int out_of_memory(void)
{
	fprintf(stderr, "station-sandbox: out of memory\n");
	return EXIT_FAILED;
}

/* The options every files command may take; each command lists those it accepts. */
struct files_args {
	bool json;
	bool recursive;
	bool parents;
	bool exclusive;
	bool no_overwrite;
	unsigned mode;
	const char *if_match;
	uint64_t max_bytes;
};

static int parse_mode(struct cli *cli, const char *s, unsigned *ret)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 8);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || s[0] == '+' || v > 07777 ||
	    v == 0)
		return cli_usage(cli, "--mode wants octal permission bits like 0644, not '%s'", s);
	*ret = (unsigned)v;
	return 0;
}

static int files_option(struct cli *cli, int opt, char **argv, struct files_args *a)
{
	switch (opt) {
	case 'j':
		a->json = true;
		return 0;
	case 'r':
	case 'R':
		a->recursive = true;
		return 0;
	case 'p':
		a->parents = true;
		return 0;
	case 'x':
		a->exclusive = true;
		return 0;
	case 'n':
		a->no_overwrite = true;
		return 0;
	case 'm':
		return parse_mode(cli, optarg, &a->mode);
	case 'i':
		a->if_match = optarg;
		return 0;
	case 'b':
		return cli_parse_u64(cli, "--max-bytes", optarg, &a->max_bytes);
	case 'h':
		return cli_help(cli);
	default:
		return cli_option_error(cli, argv, opt);
	}
}

/* Parses the options (shortopts: those with a short form, after ":h") and checks that min to
 * max arguments are left. Returns < 0 to go on, else the exit status. */
static int files_parse(struct cli *cli, int argc, char **argv, const char *shortopts,
		       const struct option *longopts, int min, int max, struct files_args *a)
{
	char optstring[32];
	int opt, r;

	snprintf(optstring, sizeof(optstring), ":h%s", shortopts);
	opterr = 0;
	while ((opt = getopt_long(argc, argv, optstring, longopts, NULL)) >= 0) {
		r = files_option(cli, opt, argv, a);
		if (r != 0 || opt == 'h')
			return r;
	}
	if (argc - optind < min)
		return cli_usage(cli, "%s",
				 argc == optind ? "no workspace given" : "missing arguments");
	if (argc - optind > max)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind + max]);
	return -1;
}

#define OPT_JSON                                                                                   \
	{                                                                                          \
		"json", no_argument, NULL, 'j'                                                     \
	}
#define OPT_HELP                                                                                   \
	{                                                                                          \
		"help", no_argument, NULL, 'h'                                                     \
	}

/* ---- ls, stat ------------------------------------------------------------------------------ */

/* "file", "dir", … then "(link)" for a symlink's target in NAME. */
static int entries_print(const struct station_file_list *l)
{
	static const char *const header[] = { "TYPE", "MODE", "SIZE", "MODIFIED", "NAME" };
	_cleanup_(table_freep) struct table *t = NULL;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < l->n_entries; i++) {
		const struct station_file_entry *e = &l->entries[i];
		_cleanup_free_ char *name = NULL, *safe = NULL, *target = NULL;
		char mode[8], size[24];
		const char *row[] = {
			station_file_type_to_string(e->type), mode, size, e->mtime, NULL,
		};

		snprintf(mode, sizeof(mode), "%04o", e->mode);
		snprintf(size, sizeof(size), "%" PRIu64, e->size);
		safe = output_escape(e->name);
		target = output_escape(e->link_target ? e->link_target : "");
		if (!safe || !target ||
		    asprintf(&name, "%s%s%s", safe, e->link_target ? " -> " : "", target) < 0)
			return -ENOMEM;
		row[4] = name;
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int list_to_json(const struct station_file_list *l, json_t **ret)
{
	_cleanup_json_ json_t *entries = json_array();

	if (!entries)
		return -ENOMEM;
	for (size_t i = 0; i < l->n_entries; i++)
		if (json_array_append_new(entries, station_file_entry_to_json(&l->entries[i])) < 0)
			return -ENOMEM;
	*ret = json_pack("{s:s, s:O, s:b}", "path", l->path, "entries", entries, "truncated",
			 l->truncated);
	return *ret ? 0 : -ENOMEM;
}

static int cmd_files_ls(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = { OPT_JSON, OPT_HELP, {} };
	struct station_file_list *l = NULL;
	_cleanup_json_ json_t *doc = NULL;
	struct files_args a = {};
	int r;

	r = files_parse(cli, argc, argv, "", options, 1, 2, &a);
	if (r >= 0)
		return r;
	r = station_file_list(cli->client, argv[optind], argc - optind > 1 ? argv[optind + 1] : ".",
			      &l);
	if (r < 0)
		return cli_fail(cli, r);
	if (a.json)
		r = list_to_json(l, &doc) < 0 ? -ENOMEM : output_json(doc);
	else
		r = entries_print(l);
	if (r >= 0 && !a.json && l->truncated)
		fprintf(stderr, "station-sandbox: only the first %zu entries of %s are shown\n",
			l->n_entries, l->path);
	station_file_list_free(l);
	return r < 0 ? EXIT_FAILED : 0;
}

/* Prints "LABEL: VALUE" with the value made safe for a terminal: the sandbox chose it. */
static int print_field(const char *label, const char *value)
{
	_cleanup_free_ char *safe = output_escape(value);

	if (!safe)
		return -ENOMEM;
	printf("%s%s%s\n", label ? label : "", label ? ": " : "", safe);
	return 0;
}

/* One field a line, as stat(1) shows a file. */
static int entry_print(const struct station_file_entry *e)
{
	if (print_field("path", e->path) < 0)
		return -ENOMEM;
	printf("type: %s\n", station_file_type_to_string(e->type));
	if (e->link_target && print_field("target", e->link_target) < 0)
		return -ENOMEM;
	printf("size: %" PRIu64 "\n", e->size);
	printf("mode: %04o\n", e->mode);
	printf("uid: %" PRIu32 "\n", e->uid);
	printf("gid: %" PRIu32 "\n", e->gid);
	printf("modified: %s\n", e->mtime ? e->mtime : "-");
	if (e->etag)
		return print_field("etag", e->etag);
	return 0;
}

/* The entry a command made: its path, or with --json the whole entry. */
static int entry_result(const struct station_file_entry *e, bool json)
{
	_cleanup_json_ json_t *doc = NULL;

	if (!json)
		return print_field(NULL, e->path) < 0 ? out_of_memory() : 0;
	doc = station_file_entry_to_json(e);
	if (!doc)
		return out_of_memory();
	return output_json(doc) < 0 ? EXIT_FAILED : 0;
}

static int cmd_files_stat(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = { OPT_JSON, OPT_HELP, {} };
	struct station_file_entry *e = NULL;
	struct files_args a = {};
	int r;

	r = files_parse(cli, argc, argv, "", options, 2, 2, &a);
	if (r >= 0)
		return r;
	r = station_file_stat(cli->client, argv[optind], argv[optind + 1], &e);
	if (r < 0)
		return cli_fail(cli, r);
	if (a.json)
		r = entry_result(e, true);
	else
		r = entry_print(e) < 0 ? out_of_memory() : 0;
	station_file_entry_free(e);
	return r;
}

/* ---- cat, get ---------------------------------------------------------------------------- */

static int download_to(struct cli *cli, const char *ws, const char *path, int fd,
		       const struct files_args *a)
{
	struct station_download_options o = { .max_bytes = a->max_bytes };
	int r;

	interrupt_on_signals(cli);
	r = station_file_download(cli->client, ws, path, fd, &o, NULL);
	station_client_set_interrupt(cli->client, NULL, NULL);
	if (r == -EINTR && interrupted)
		return 130;
	return r < 0 ? cli_fail(cli, r) : 0;
}

static int cmd_files_cat(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "max-bytes", required_argument, NULL, 'b' },
		OPT_HELP,
		{},
	};
	struct files_args a = {};
	int r;

	r = files_parse(cli, argc, argv, "", options, 2, 2, &a);
	if (r >= 0)
		return r;
	return download_to(cli, argv[optind], argv[optind + 1], STDOUT_FILENO, &a);
}

/* The local file a download goes to: LOCAL as given (a directory: the remote path's last
 * component in it), or that last component in the current directory. */
static char *local_name(const char *remote, const char *local)
{
	_cleanup_free_ char *copy = NULL;
	const char *base;
	struct stat st;
	char *joined;

	if (local && (stat(local, &st) < 0 || !S_ISDIR(st.st_mode)))
		return strdup(local);
	copy = strdup(remote);
	if (!copy)
		return NULL;
	base = basename(copy);
	if (!*base || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return NULL;
	if (!local)
		return strdup(base);
	return asprintf(&joined, "%s/%s", local, base) < 0 ? NULL : joined;
}

/* Downloads into a temporary file beside target and renames it over target once whole, so a
 * failed download leaves nothing behind (and never half a file). */
static int download_file(struct cli *cli, const char *ws, const char *path, const char *target,
			 const struct files_args *a)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (asprintf(&tmp, "%s.XXXXXX", target) < 0)
		return out_of_memory();
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "station-sandbox: cannot write '%s': %s\n", target,
			strerror(errno));
		return EXIT_FAILED;
	}
	fchmod(fd, 0666 & ~umask(umask(0)));
	r = download_to(cli, ws, path, fd, a);
	if (r == 0 && (fsync(fd) < 0 || rename(tmp, target) < 0)) {
		fprintf(stderr, "station-sandbox: cannot write '%s': %s\n", target,
			strerror(errno));
		r = EXIT_FAILED;
	}
	if (r != 0)
		unlink(tmp);
	return r;
}

static int cmd_files_get(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "max-bytes", required_argument, NULL, 'b' },
		OPT_HELP,
		{},
	};
	_cleanup_free_ char *target = NULL;
	struct files_args a = {};
	const char *ws, *path;
	int r;

	r = files_parse(cli, argc, argv, "", options, 2, 3, &a);
	if (r >= 0)
		return r;
	ws = argv[optind];
	path = argv[optind + 1];
	if (argc - optind == 3 && strcmp(argv[optind + 2], "-") == 0)
		return download_to(cli, ws, path, STDOUT_FILENO, &a);
	target = local_name(path, argc - optind == 3 ? argv[optind + 2] : NULL);
	if (!target)
		return cli_usage(cli, "name the local file: '%s' has no file name", path);
	return download_file(cli, ws, path, target, &a);
}

/* ---- put --------------------------------------------------------------------------------- */

static int cmd_files_put(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "parents", no_argument, NULL, 'p' },
		{ "exclusive", no_argument, NULL, 'x' },
		{ "if-match", required_argument, NULL, 'i' },
		OPT_JSON,
		OPT_HELP,
		{},
	};
	struct station_file_entry *e = NULL;
	_cleanup_close_ int fd = -1;
	struct station_write_options o;
	struct files_args a = {};
	const char *local;
	int r;

	r = files_parse(cli, argc, argv, "p", options, 3, 3, &a);
	if (r >= 0)
		return r;
	local = argv[optind + 1];
	fd = strcmp(local, "-") == 0 ? dup(STDIN_FILENO) : open(local, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "station-sandbox: cannot read '%s': %s\n", local, strerror(errno));
		return EXIT_FAILED;
	}
	o = (struct station_write_options){
		.mode = a.mode,
		.parents = a.parents,
		.exclusive = a.exclusive,
		.if_match = a.if_match,
	};
	interrupt_on_signals(cli);
	cli->workspace = argv[optind];
	r = station_file_upload(cli->client, argv[optind], argv[optind + 2], fd, &o, &e);
	station_client_set_interrupt(cli->client, NULL, NULL);
	if (r == -EINTR && interrupted)
		return 130;
	if (r < 0)
		return cli_fail(cli, r);
	r = entry_result(e, a.json);
	station_file_entry_free(e);
	return r;
}

/* ---- mkdir, mv, rm ------------------------------------------------------------------------ */

static int cmd_files_mkdir(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "parents", no_argument, NULL, 'p' },
		{ "mode", required_argument, NULL, 'm' },
		OPT_JSON,
		OPT_HELP,
		{},
	};
	struct station_file_entry *e = NULL;
	struct files_args a = {};
	int r;

	r = files_parse(cli, argc, argv, "p", options, 2, 2, &a);
	if (r >= 0)
		return r;
	cli->workspace = argv[optind];
	r = station_file_mkdir(cli->client, argv[optind], argv[optind + 1], a.parents, a.mode, &e);
	if (r < 0)
		return cli_fail(cli, r);
	r = entry_result(e, a.json);
	station_file_entry_free(e);
	return r;
}

static int cmd_files_mv(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "no-clobber", no_argument, NULL, 'n' },
		OPT_JSON,
		OPT_HELP,
		{},
	};
	struct station_file_entry *e = NULL;
	struct files_args a = {};
	int r;

	r = files_parse(cli, argc, argv, "n", options, 3, 3, &a);
	if (r >= 0)
		return r;
	cli->workspace = argv[optind];
	r = station_file_rename(cli->client, argv[optind], argv[optind + 1], argv[optind + 2],
				!a.no_overwrite, &e);
	if (r < 0)
		return cli_fail(cli, r);
	r = entry_result(e, a.json);
	station_file_entry_free(e);
	return r;
}

static int cmd_files_rm(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "recursive", no_argument, NULL, 'r' },
		OPT_HELP,
		{},
	};
	struct files_args a = {};
	int r;

	r = files_parse(cli, argc, argv, "rR", options, 2, 2, &a);
	if (r >= 0)
		return r;
	cli->workspace = argv[optind];
	r = station_file_delete(cli->client, argv[optind], argv[optind + 1], a.recursive);
	return r < 0 ? cli_fail(cli, r) : 0;
}

/* ---- watch ------------------------------------------------------------------------------- */

static int watch_print(const struct station_watch_event *e, void *userdata)
{
	_cleanup_free_ char *path = output_escape(e->path ? e->path : "-");
	_cleanup_free_ char *to = output_escape(e->to ? e->to : "-");
	_cleanup_free_ char *type =
		output_escape(json_string_value(json_object_get(e->json, "type")) ?: "?");
	const bool *json = userdata;

	if (!path || !to || !type)
		return -ENOMEM;
	if (*json) {
		if (json_dumpf(e->json, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0)
			return -EIO;
		putchar('\n');
	} else if (e->type == STATION_WATCH_MOVED) {
		printf("moved %s %s -> %s\n", station_file_type_to_string(e->kind), path, to);
	} else if (e->path && e->type != STATION_WATCH_READY && e->type != STATION_WATCH_OVERFLOW) {
		printf("%s %s %s\n", type, station_file_type_to_string(e->kind), path);
	} else {
		printf("%s\n", type);
	}
	return fflush(stdout) == EOF ? -errno : 0;
}

static int cmd_files_watch(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "recursive", no_argument, NULL, 'r' },
		OPT_JSON,
		OPT_HELP,
		{},
	};
	struct files_args a = {};
	int r;

	r = files_parse(cli, argc, argv, "r", options, 1, 2, &a);
	if (r >= 0)
		return r;
	interrupt_on_signals(cli);
	r = station_file_watch(cli->client, argv[optind],
			       argc - optind > 1 ? argv[optind + 1] : ".", a.recursive, watch_print,
			       &a.json);
	station_client_set_interrupt(cli->client, NULL, NULL);
	if (r == -EINTR && interrupted)
		return 0; /* a watch ends with ^C */
	return r < 0 ? cli_fail(cli, r) : 0;
}

/* ---- the command table ------------------------------------------------------------------ */

#define PATH_HELP "PATH is absolute in the sandbox's view or relative to the workspace directory.\n"

static const struct cli_command files_ls = {
	.name = "files ls",
	.args = "[--json] WS [PATH]",
	.summary = "list a directory (default: the workspace directory)",
	.help = PATH_HELP "\n"
			  "  --json  print {path, entries, truncated} as JSON\n",
	.run = cmd_files_ls,
};

static const struct cli_command files_stat = {
	.name = "files stat",
	.args = "[--json] WS PATH",
	.summary =
		"show a file's type, size, mode, owner, time and etag (a symlink is not followed)",
	.help = PATH_HELP "\n"
			  "  --json  print the entry as JSON\n",
	.run = cmd_files_stat,
};

static const struct cli_command files_cat = {
	.name = "files cat",
	.args = "[--max-bytes N] WS PATH",
	.summary = "write a file's bytes to stdout",
	.help = PATH_HELP "\n"
			  "  --max-bytes N  refuse a file larger than N bytes\n",
	.run = cmd_files_cat,
};

static const struct cli_command files_get = {
	.name = "files get",
	.args = "[--max-bytes N] WS PATH [LOCAL|-]",
	.summary = "download a file (default: to its name in the current directory)",
	.help = PATH_HELP "LOCAL (a file, or a directory to put it in) is written whole or not at\n"
			  "all; '-' is stdout.\n\n"
			  "  --max-bytes N  refuse a file larger than N bytes\n",
	.run = cmd_files_get,
};

static const struct cli_command files_put = {
	.name = "files put",
	.args = "[--mode MODE] [-p|--parents] [--exclusive] [--if-match ETAG] [--json] "
		"WS LOCAL|- PATH",
	.summary = "upload a local file (or stdin) to PATH, atomically, and print its path",
	.help = PATH_HELP
	"\n"
	"  --mode MODE      permission bits, octal (default: the replaced file's, or 0644)\n"
	"  -p, --parents    make missing parent directories\n"
	"  --exclusive      fail if PATH exists\n"
	"  --if-match ETAG  fail if the file changed since 'files stat' showed ETAG\n"
	"  --json           print the new entry as JSON\n",
	.run = cmd_files_put,
};

static const struct cli_command files_mkdir = {
	.name = "files mkdir",
	.args = "[-p|--parents] [--mode MODE] [--json] WS PATH",
	.summary = "make a directory and print its path",
	.help = PATH_HELP "\n"
			  "  -p, --parents  make missing parents too\n"
			  "  --mode MODE    permission bits, octal (default 0755)\n"
			  "  --json         print the new entry as JSON\n",
	.run = cmd_files_mkdir,
};

static const struct cli_command files_mv = {
	.name = "files mv",
	.args = "[-n|--no-clobber] [--json] WS FROM TO",
	.summary = "rename FROM to TO (replacing TO) and print the new path",
	.help = PATH_HELP "\n"
			  "  -n, --no-clobber  fail if TO exists\n"
			  "  --json            print the entry at TO as JSON\n",
	.run = cmd_files_mv,
};

static const struct cli_command files_rm = {
	.name = "files rm",
	.args = "[-r|--recursive] WS PATH",
	.summary = "delete a file, a symlink (never followed) or an empty directory",
	.help = PATH_HELP "\n"
			  "  -r, --recursive  delete a directory and everything in it\n",
	.run = cmd_files_rm,
};

static const struct cli_command files_watch = {
	.name = "files watch",
	.args = "[-r|--recursive] [--json] WS [PATH]",
	.summary = "print changes beneath a directory as they happen, one a line",
	.help = PATH_HELP
	"Lines: 'ready' once the watch is in place, then 'created|modified|deleted\n"
	"KIND PATH', 'moved KIND FROM -> TO', 'overflow' (changes were lost: list again).\n"
	"It ends when the directory is deleted, the workspace stops, or on ^C.\n\n"
	"  -r, --recursive  subdirectories too\n"
	"  --json           each event as a JSON object, one a line\n",
	.run = cmd_files_watch,
};

static const struct cli_command *const files_commands[] = {
	&files_ls,    &files_stat, &files_cat, &files_get,   &files_put,
	&files_mkdir, &files_mv,   &files_rm,  &files_watch,
};

static int cmd_files(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "files", files_commands, ELEMENTSOF(files_commands),
			    NULL, NULL);
}

const struct cli_command cli_cmd_files = {
	.name = "files",
	.args = "ls|stat|cat|get|put|mkdir|mv|rm|watch [ARGS]",
	.summary = "a workspace's files: ls, stat, cat, get, put, mkdir, mv, rm, watch",
	.help = "  ls WS [PATH]                 list a directory\n"
		"  stat WS PATH                 type, size, mode, owner, time, etag\n"
		"  cat WS PATH                  a file's bytes to stdout\n"
		"  get WS PATH [LOCAL|-]        download a file\n"
		"  put WS LOCAL|- PATH          upload a file (--mode, --parents, --exclusive)\n"
		"  mkdir [-p] WS PATH           make a directory\n"
		"  mv [-n] WS FROM TO           rename\n"
		"  rm [-r] WS PATH              delete\n"
		"  watch [-r] WS [PATH]         print changes as they happen\n" PATH_HELP
		"'station-sandbox files COMMAND --help' describes a command.\n",
	.run = cmd_files,
};
