/* SPDX-License-Identifier: MIT */
/* What a workspace's network refused (docs/api.md, "Refused destinations"): the destinations of
 * the denials the network logged (each dropped packet the firewall logged, at most 10 a second
 * and a burst of 20 per workspace, and each refused name, at most 10 a second), the last
 * DENIALS_MAX of them with counts and times, in memory only; and each run's share: the
 * workspace's denials (packets dropped plus names refused, every one counted, from the counters)
 * between the run's start and its end, with the last one logged in that window. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "event/event.h"
#include "manager-internal.h"
#include "net/net.h"

struct denial_dest {
	char address[16];
	uint16_t port;
	char proto[8];
	char *name;	   /* a refused DNS query's name; NULL for a packet */
	const char *class; /* the --network-allow class that blocks address (static), or NULL */
	uint64_t count, first_at, last_at;
};

/* Most recent first. */
struct denials {
	struct denial_dest dests[DENIALS_MAX];
	size_t n;
};

static bool dest_is(const struct denial_dest *d, const char *address, uint16_t port,
		    const char *proto, const char *name)
{
	return d->port == port && strcmp(d->address, address) == 0 &&
	       strcmp(d->proto, proto) == 0 &&
	       (d->name && name ? strcmp(d->name, name) == 0 : !d->name && !name);
}

/* The entry of this destination moved to the front, or a new one there (the oldest dropped when
 * full); NULL when out of memory. */
static struct denial_dest *dest_front(struct denials *l, const char *address, uint16_t port,
				      const char *proto, const char *name)
{
	struct denial_dest d = {};
	size_t i;

	for (i = 0; i < l->n && !dest_is(&l->dests[i], address, port, proto, name); i++)
		;
	if (i < l->n) {
		d = l->dests[i];
	} else {
		if (name && !(d.name = strdup(name)))
			return NULL;
		snprintf(d.address, sizeof d.address, "%s", address);
		snprintf(d.proto, sizeof d.proto, "%s", proto);
		d.port = port;
		if (l->n == DENIALS_MAX)
			free(l->dests[--l->n].name);
		i = l->n++;
	}
	memmove(&l->dests[1], &l->dests[0], i * sizeof l->dests[0]);
	l->dests[0] = d;
	return &l->dests[0];
}

void workspace_denial_record(struct manager *m, const char *id, const char *what, const char *dest,
			     uint16_t port, const char *proto)
{
	struct workspace *ws = workspace_find(m, id);
	bool dns = strcmp(what, "dns") == 0;

	if (!ws || ws->net_mode == NET_NONE || !m->net)
		return;
	if (!ws->denials && !(ws->denials = calloc(1, sizeof *ws->denials)))
		return;
	/* a refused name: the query went to the workspace's resolver */
	struct denial_dest *d = dest_front(ws->denials, dns ? net_nameserver(m->net) : dest, port,
					   proto, dns ? dest : NULL);
	if (!d)
		return;
	struct in_addr a;
	d->class = !dns && inet_pton(AF_INET, dest, &a) == 1 ?
			   net_address_class(m->net, ntohl(a.s_addr)) :
			   NULL;
	d->last_at = realtime_usec();
	if (!d->count++)
		d->first_at = d->last_at;
}

static json_t *dest_json(const struct denial_dest *d)
{
	json_t *o = json_pack("{s:s,s:i,s:s}", "address", d->address, "port", (int)d->port, "proto",
			      d->proto);

	if (o && d->name)
		json_object_set_new(o, "name", json_string(d->name));
	if (o && d->class)
		json_object_set_new(o, "class", json_string(d->class));
	return o;
}

json_t *workspace_refused_json(const struct workspace *ws)
{
	json_t *a = json_array();

	for (size_t i = 0; a && ws->denials && i < ws->denials->n; i++) {
		const struct denial_dest *d = &ws->denials->dests[i];
		json_t *o = dest_json(d);

		if (!o)
			continue;
		json_object_set_new(o, "count", json_integer((json_int_t)d->count));
		json_set_time(o, "firstAt", d->first_at);
		json_set_time(o, "lastAt", d->last_at);
		json_array_append_new(a, o);
	}
	return a;
}

void workspace_denials_free(struct workspace *ws)
{
	if (!ws->denials)
		return;
	for (size_t i = 0; i < ws->denials->n; i++)
		free(ws->denials->dests[i].name);
	free(ws->denials);
	ws->denials = NULL;
}

/* Packets the workspace's firewall dropped plus names its resolver refused. */
static int denials_total(struct workspace *ws, uint64_t *ret)
{
	struct net_counters c = {};
	int r = net_workspace_counters(ws->m->net, ws->row.id, &c);

	if (r < 0)
		return r;
	*ret = c.denied + c.dns_refused;
	return 0;
}

void run_network_begin(struct workspace *ws, struct run_network *ret)
{
	*ret = (struct run_network){};
	if (ws->net_mode == NET_NONE || !ws->m->net || denials_total(ws, &ret->base) < 0)
		return;
	ret->since = realtime_usec();
	ret->tracked = true;
}

json_t *run_network_json(struct workspace *ws, const struct run_network *rn)
{
	uint64_t total = 0;

	if (!rn->tracked || !ws->m->net || denials_total(ws, &total) < 0)
		return NULL;
	net_denials_drain(ws->m->net);
	/* counters restart when the workspace's firewall is made again (a restart) */
	uint64_t denied = total >= rn->base ? total - rn->base : total;
	const struct denial_dest *last = ws->denials && ws->denials->n ? &ws->denials->dests[0] :
									 NULL;
	json_t *o = json_pack("{s:I}", "denied", (json_int_t)denied);

	if (!o || !denied || !last || last->last_at < rn->since)
		return o;
	json_t *l = dest_json(last);
	if (l) {
		json_set_time(l, "at", last->last_at);
		json_object_set_new(o, "lastDenied", l);
	}
	return o;
}
