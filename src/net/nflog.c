/* SPDX-License-Identifier: MIT */

/* nfnetlink_log over libmnl. The packets come from a sandbox and are hostile: every attribute
 * is validated before use and the IPv4 header is read only within the bytes copied. Only the
 * first 64 bytes of a packet are asked for: enough for an IPv4 header with options (at most 60)
 * and the first 4 bytes of the transport header, which hold the ports. */

#include "nflog.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "basic/cleanup.h"

#define NFLOG_COPY_RANGE 64
/* One datagram may carry several logged packets (the kernel batches up to its nlbufsiz). */
#define NFLOG_BUFFER_SIZE 65536
/* Datagrams per nflog_read(): a sandbox that floods denials cannot hold the event loop; the
 * (level-triggered) socket stays readable for the rest. */
#define NFLOG_READ_BUDGET 256

struct nflog {
	struct mnl_socket *nl;
	unsigned portid;
	uint16_t group;
	char *buf;
};

static struct nlmsghdr *nflog_config_request(char *buf, uint16_t group, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_INET;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(group);
	return nlh;
}

/* Sends the request and waits for its ack. Logged packets that arrive first (the group is
 * bound by then) are dropped: the caller has not asked for any yet. */
static int nflog_talk(struct nflog *l, struct nlmsghdr *nlh)
{
	uint32_t seq = nlh->nlmsg_seq;

	if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
		return negative_errno();
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(l->nl, l->buf, NFLOG_BUFFER_SIZE);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno(); /* -EAGAIN: the kernel always acks at once */
		}
		int r = mnl_cb_run(l->buf, (size_t)n, seq, l->portid, NULL, NULL);
		if (r < 0)
			return negative_errno();
		if (r == MNL_CB_STOP)
			return 0;
	}
}

/* Binds this socket to the group and asks for the first NFLOG_COPY_RANGE bytes of each packet,
 * each sent as it is logged (a queue threshold of 1: the kernel's default holds up to 100 for a
 * second), so that a reader that drains the socket has heard of every denial made before.
 * No NFULNL_CFG_CMD_PF_BIND: nftables' `log group` names the nfnetlink_log logger itself, and
 * binding it as the namespace's default logger would change what other users' log rules do. */
static int nflog_bind(struct nflog *l)
{
	char buf[256]; /* one config request: three small attributes */
	struct nlmsghdr *nlh = nflog_config_request(buf, l->group, (uint32_t)time(NULL));
	struct nfulnl_msg_config_cmd cmd = { .command = NFULNL_CFG_CMD_BIND };
	struct nfulnl_msg_config_mode mode = {
		.copy_range = htonl(NFLOG_COPY_RANGE),
		.copy_mode = NFULNL_COPY_PACKET,
	};

	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
	mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
	mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1));
	return nflog_talk(l, nlh);
}

int nflog_open(uint16_t group, struct nflog **ret)
{
	struct nflog *l = calloc(1, sizeof(*l));
	int r;

	if (!l)
		return -ENOMEM;
	l->group = group;
	l->buf = malloc(NFLOG_BUFFER_SIZE);
	if (!l->buf) {
		r = -ENOMEM;
		goto fail;
	}
	l->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (!l->nl || mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		r = negative_errno();
		goto fail;
	}
	l->portid = mnl_socket_get_portid(l->nl);
	r = nflog_bind(l);
	if (r < 0)
		goto fail;
	*ret = l;
	return 0;
fail:
	nflog_close(l);
	return r;
}

int nflog_fd(const struct nflog *l)
{
	return mnl_socket_get_fd(l->nl);
}

/* The addresses, protocol and destination port of an IPv4 packet's first len bytes; false
 * when they do not hold an IPv4 header. */
static bool ipv4_parse(const uint8_t *p, size_t len, struct nflog_packet *ret)
{
	size_t ihl;
	uint32_t a;

	if (len < 20 || (p[0] >> 4) != 4)
		return false;
	ihl = (size_t)(p[0] & 0x0f) * 4;
	if (ihl < 20 || ihl > len)
		return false;
	memcpy(&a, p + 12, 4);
	ret->saddr = ntohl(a);
	memcpy(&a, p + 16, 4);
	ret->daddr = ntohl(a);
	ret->proto = p[9];
	ret->dport = 0;
	/* Only the first fragment (offset 0) carries the transport header. */
	bool first_fragment = ((p[6] & 0x1f) | p[7]) == 0;
	if ((ret->proto == IPPROTO_TCP || ret->proto == IPPROTO_UDP) && first_fragment &&
	    len >= ihl + 4)
		ret->dport = (uint16_t)(p[ihl + 2] << 8 | p[ihl + 3]);
	return true;
}

static int packet_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);

	switch (type) {
	case NFULA_PREFIX:
		if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0)
			return MNL_CB_OK;
		break;
	case NFULA_PAYLOAD:
		if (mnl_attr_validate(a, MNL_TYPE_BINARY) < 0)
			return MNL_CB_OK;
		break;
	default:
		return MNL_CB_OK;
	}
	tb[type] = a;
	return MNL_CB_OK;
}

struct nflog_dispatch {
	nflog_fn fn;
	void *userdata;
};

static int packet_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nflog_dispatch *d = data;
	const struct nlattr *tb[NFULA_MAX + 1] = {};
	struct nflog_packet p = { .prefix = "" };

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET) ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct nfgenmsg))
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), packet_attr_cb, tb) < 0)
		return MNL_CB_OK;
	if (!tb[NFULA_PAYLOAD] || !ipv4_parse(mnl_attr_get_payload(tb[NFULA_PAYLOAD]),
					      mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]), &p))
		return MNL_CB_OK; /* not IPv4: nothing this log reports */
	if (tb[NFULA_PREFIX])
		p.prefix = mnl_attr_get_str(tb[NFULA_PREFIX]);
	d->fn(d->userdata, &p);
	return MNL_CB_OK;
}

int nflog_read(struct nflog *l, nflog_fn fn, void *userdata)
{
	struct nflog_dispatch d = { .fn = fn, .userdata = userdata };

	for (int i = 0; i < NFLOG_READ_BUDGET; i++) {
		ssize_t n = mnl_socket_recvfrom(l->nl, l->buf, NFLOG_BUFFER_SIZE);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		/* Sequence 0: logged packets are not answers to a request. A malformed datagram
		 * ends its own parse, not the reading. */
		mnl_cb_run(l->buf, (size_t)n, 0, l->portid, packet_cb, &d);
	}
	return 0;
}

void nflog_close(struct nflog *l)
{
	if (!l)
		return;
	if (l->nl)
		mnl_socket_close(l->nl);
	free(l->buf);
	free(l);
}
