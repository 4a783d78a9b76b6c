// SPDX-License-Identifier: BSD-3-Clause
/*
 * nfq_delay — a fixed one-way delay on every packet a cluster host sends, in user space:
 * the stand-in for `tc qdisc ... netem delay D`, which this machine's kernel lacks
 * (CONFIG_NET_SCH_NETEM is not set; tbf is there, netem and every tc action are not).
 *
 *   nfq_delay DELAY_US NAMESPACE...      (cluster.sh starts it; runs until SIGTERM)
 *
 * Each host namespace has an nftables rule `oifname "eth0" queue num 0 bypass` in its output
 * hook (cluster.sh): every packet leaving the host is held in the kernel's NFQUEUE 0 of that
 * namespace. This program binds queue 0 in every namespace given (one netlink socket each,
 * made after setns() into it), asks only for the packet id (NFQNL_COPY_META: no payload is
 * copied), with GSO packets passed whole (NFQA_CFG_F_GSO), and accepts each packet DELAY_US
 * after it arrived. The delay is the same for every packet, so a queue's packets become due in
 * the order they came: one NFQNL_MSG_VERDICT_BATCH (every id up to the last due one) releases
 * them. Released packets then meet the host's tbf shaper, so a message sees the delay and the
 * link rate in turn, as with netem under tbf.
 *
 * `bypass`: with no program bound the packets pass undelayed, so a crash never cuts a host
 * off. A full queue (65536 packets) fails open (undelayed). Wake-up precision: the process
 * asks for 1 us timer slack and SCHED_FIFO priority 10 when it may (it sleeps in ppoll() and
 * uses little CPU); on a loaded machine a verdict can still come late by a scheduler delay.
 * Statistics on SIGUSR1 and at exit (stderr): packets, late verdicts (> 100 us after due).
 *
 * Build: cc -O2 -o nfq_delay nfq_delay.c   (only the kernel's uapi headers)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXQ 64
#define RING (1u << 17) /* > the kernel queue's 65536 packets */

struct item {
    uint32_t id;
    uint64_t due;
};
struct queue {
    int fd;
    const char *ns;
    struct item *ring;
    uint32_t head, tail; /* ring[head..tail) pending, indices mod RING */
    uint64_t packets, late;
};

static struct queue Q[MAXQ];
static int NQ;
static volatile sig_atomic_t stop, report;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "nfq_delay: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ---- netlink messages ---- */

static size_t put_attr(char *buf, size_t at, uint16_t type, const void *data, uint16_t len) {
    struct nlattr *a = (struct nlattr *)(buf + at);
    a->nla_type = type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    memcpy(buf + at + NLA_HDRLEN, data, len);
    return at + NLA_ALIGN(a->nla_len);
}

/* nlmsghdr + nfgenmsg for queue 0; returns the offset of the first attribute */
static size_t begin(char *buf, uint16_t msg, uint16_t flags) {
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    memset(buf, 0, NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)));
    h->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | msg;
    h->nlmsg_flags = NLM_F_REQUEST | flags;
    struct nfgenmsg *g = (struct nfgenmsg *)(buf + NLMSG_HDRLEN);
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(0);
    return NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
}

static void send_msg(int fd, char *buf, size_t len) {
    ((struct nlmsghdr *)buf)->nlmsg_len = (uint32_t)len;
    struct sockaddr_nl k = {.nl_family = AF_NETLINK};
    while (sendto(fd, buf, len, 0, (struct sockaddr *)&k, sizeof k) < 0)
        if (errno != EINTR) die("sendto");
}

/* bind queue 0 and set metadata-only copies, GSO whole, fail-open, 65536 packets */
static void configure(int fd) {
    char buf[256];
    size_t at = begin(buf, NFQNL_MSG_CONFIG, 0);
    struct nfqnl_msg_config_cmd cmd = {.command = NFQNL_CFG_CMD_BIND, .pf = htons(AF_UNSPEC)};
    at = put_attr(buf, at, NFQA_CFG_CMD, &cmd, sizeof cmd);
    send_msg(fd, buf, at);
    at = begin(buf, NFQNL_MSG_CONFIG, 0);
    struct nfqnl_msg_config_params par = {.copy_range = htonl(0), .copy_mode = NFQNL_COPY_META};
    at = put_attr(buf, at, NFQA_CFG_PARAMS, &par, sizeof par);
    uint32_t maxlen = htonl(65536);
    at = put_attr(buf, at, NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof maxlen);
    uint32_t flags = htonl(NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN), mask = flags;
    at = put_attr(buf, at, NFQA_CFG_FLAGS, &flags, sizeof flags);
    at = put_attr(buf, at, NFQA_CFG_MASK, &mask, sizeof mask);
    send_msg(fd, buf, at);
}

static void verdict_upto(struct queue *q, uint32_t id) {
    char buf[128];
    size_t at = begin(buf, NFQNL_MSG_VERDICT_BATCH, 0);
    struct nfqnl_msg_verdict_hdr v = {.verdict = htonl(NF_ACCEPT), .id = htonl(id)};
    at = put_attr(buf, at, NFQA_VERDICT_HDR, &v, sizeof v);
    send_msg(q->fd, buf, at);
}

/* every packet message waiting on q: remember its id, due at arrival + delay */
static void drain(struct queue *q, uint64_t delay) {
    static char buf[1 << 16] __attribute__((aligned(8)));
    for (;;) {
        ssize_t n = recv(q->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == ENOBUFS) { /* the kernel dropped messages: those packets wait for nobody */
                fprintf(stderr, "nfq_delay: %s: netlink buffer overrun (packets lost)\n", q->ns);
                continue;
            }
            die("recv");
        }
        const uint64_t due = now_ns() + delay;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(h);
                if (e->error) fprintf(stderr, "nfq_delay: %s: netlink error %d\n", q->ns, e->error);
                continue;
            }
            if (h->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) continue;
            size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
            while (off + NLA_HDRLEN <= h->nlmsg_len) {
                const struct nlattr *a = (const struct nlattr *)((char *)h + off);
                if (a->nla_len < NLA_HDRLEN) break;
                if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR) {
                    const struct nfqnl_msg_packet_hdr *ph = (const void *)((const char *)a + NLA_HDRLEN);
                    if (q->tail - q->head < RING) {
                        q->ring[q->tail % RING] = (struct item){ntohl(ph->packet_id), due};
                        q->tail++;
                        q->packets++;
                    }
                    break;
                }
                off += NLA_ALIGN(a->nla_len);
            }
        }
    }
}

static void print_stats(void) {
    for (int i = 0; i < NQ; ++i)
        fprintf(stderr, "nfq_delay: %s: %llu packets, %llu released > 100 us late\n", Q[i].ns,
                (unsigned long long)Q[i].packets, (unsigned long long)Q[i].late);
}

static void on_signal(int s) {
    if (s == SIGUSR1) report = 1;
    else stop = 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: nfq_delay DELAY_US NAMESPACE...\n");
        return 2;
    }
    const uint64_t delay = strtoull(argv[1], NULL, 10) * 1000u;
    int home = open("/proc/self/ns/net", O_RDONLY);
    if (home < 0) die("open /proc/self/ns/net");
    for (int i = 2; i < argc && NQ < MAXQ; ++i) {
        char path[256];
        snprintf(path, sizeof path, "/run/netns/%s", argv[i]);
        int nsfd = open(path, O_RDONLY);
        if (nsfd < 0) die(path);
        if (setns(nsfd, CLONE_NEWNET) < 0) die("setns");
        close(nsfd);
        struct queue *q = &Q[NQ++];
        q->ns = argv[i];
        q->ring = malloc(sizeof(struct item) * RING);
        q->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (!q->ring || q->fd < 0) die("socket");
        int sz = 16 << 20, one = 1;
        if (setsockopt(q->fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) < 0)
            setsockopt(q->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        setsockopt(q->fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
        struct sockaddr_nl me = {.nl_family = AF_NETLINK};
        if (bind(q->fd, (struct sockaddr *)&me, sizeof me) < 0) die("bind");
        configure(q->fd);
        if (setns(home, CLONE_NEWNET) < 0) die("setns back");
    }
    close(home);
    prctl(PR_SET_TIMERSLACK, 1UL);
    struct sched_param sp = {.sched_priority = 10};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0 && nice(-10) == -1) { /* best effort */
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    fprintf(stderr, "nfq_delay: %d namespaces, %llu us\n", NQ, (unsigned long long)(delay / 1000));

    struct pollfd pf[MAXQ];
    for (int i = 0; i < NQ; ++i) pf[i] = (struct pollfd){.fd = Q[i].fd, .events = POLLIN};
    while (!stop) {
        if (report) report = 0, print_stats();
        const uint64_t t = now_ns();
        uint64_t next = UINT64_MAX;
        for (int i = 0; i < NQ; ++i) {
            struct queue *q = &Q[i];
            uint32_t last = 0;
            int any = 0;
            while (q->head != q->tail && q->ring[q->head % RING].due <= t) {
                const struct item *it = &q->ring[q->head % RING];
                if (t - it->due > 100000) q->late++;
                last = it->id, any = 1;
                q->head++;
            }
            if (any) verdict_upto(q, last);
            if (q->head != q->tail && q->ring[q->head % RING].due < next) next = q->ring[q->head % RING].due;
        }
        struct timespec ts, *tp = NULL;
        if (next != UINT64_MAX) {
            const uint64_t w = next > t ? next - t : 0;
            ts.tv_sec = (time_t)(w / 1000000000u);
            ts.tv_nsec = (long)(w % 1000000000u);
            tp = &ts;
        }
        int r = ppoll(pf, (nfds_t)NQ, tp, NULL);
        if (r < 0 && errno != EINTR) die("ppoll");
        for (int i = 0; r > 0 && i < NQ; ++i)
            if (pf[i].revents & POLLIN) drain(&Q[i], delay);
    }
    print_stats();
    return 0;
}
