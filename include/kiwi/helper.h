/* SPDX-License-Identifier: Apache-2.0 */
/* kiwi-helper, the setuid-root helper (kiwi-helper(8)): its wire protocol,
 * its admin config (kiwi-helper.json(5)), and the client side kiwi-run
 * uses when it is not root.
 *
 * One helper process serves one sandbox. The client makes a
 * SOCK_SEQPACKET socketpair, starts the helper with one end on fd 3, and
 * sends requests, one JSON object per message, with file descriptors
 * (SCM_RIGHTS) where a request names a sandbox. Each request gets one
 * JSON answer. The helper holds what it made until the socket closes or
 * the sandbox's process ends, then removes it and exits. */
#ifndef KIWI_HELPER_H
#define KIWI_HELPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kiwi/cgroup.h"
#include "kiwi/egress.h"
#include "kiwi/err.h"
#include "kiwi/json.h"
#include "kiwi/userns.h"

#define KIWI_HELPER_FD 3               /* the helper's end of the socket */
#define KIWI_HELPER_MSG_MAX 16384      /* one request or answer */
#define KIWI_HELPER_MAX_FDS 4          /* more in one message: refused */
#define KIWI_HELPER_MAX_EXTENTS KIWI_USERNS_MAX_EXTENTS  /* per id map */
#define KIWI_HELPER_MAX_RANGES 16      /* allotted id ranges per rule */
#define KIWI_HELPER_CONFIG_MAX (256 * 1024)
/* The "step" of a refusal because the caller's rule lacks the operation:
 * kiwi-run goes on without what the operation would have given. */
#define KIWI_HELPER_STEP_NOT_IN_RULE "not_in_rule"

/* ---- the protocol ---- */

enum kiwi_helper_op {
	/* uid_map and gid_map of the sandbox named by the pidfd sent along. */
	KIWI_HELPER_OP_IDMAP = 1 << 0,
	/* Before clone: the veth's addresses and the name files (no fd). */
	KIWI_HELPER_OP_EGRESS_PREPARE = 1 << 1,
	/* After clone: the veth into the sandbox (pidfd sent along) and the
	 * host-side nftables table. */
	KIWI_HELPER_OP_EGRESS_ATTACH = 1 << 2,
	/* Before clone: a root-owned cgroup with the limits, capped by the
	 * rule, under its cgroup_subtree (no fd). */
	KIWI_HELPER_OP_CGROUP_PREPARE = 1 << 3,
	/* After clone: the sandbox's pid 1 (pidfd sent along) moved into it,
	 * then the cgroup delegated to the caller. */
	KIWI_HELPER_OP_CGROUP_ATTACH = 1 << 4,
	/* After the maps are written (pidfd sent along): a new ext4
	 * filesystem of "size" bytes, at most the rule's max_disk, on a
	 * loop device over an unnamed image file of root's, idmapped to the
	 * sandbox's user namespace; its detached mount rides back. */
	KIWI_HELPER_OP_DISK = 1 << 5,
	/* After the maps are written (pidfd and the bind source's fd sent
	 * along): a clone of the source, which must be the caller's own,
	 * idmapped so that its owner is the sandbox's root; it rides back. */
	KIWI_HELPER_OP_BIND = 1 << 6,
};

#define KIWI_HELPER_SUBTREE_MAX 256    /* cgroup_subtree and parent, bytes */
#define KIWI_HELPER_DEFAULT_SUBTREE "/kiwi.slice"

struct kiwi_helper_request {
	enum kiwi_helper_op op;
	struct kiwi_id_extent uid_map[KIWI_HELPER_MAX_EXTENTS];
	size_t n_uid_map;
	struct kiwi_id_extent gid_map[KIWI_HELPER_MAX_EXTENTS];
	size_t n_gid_map;
	struct kiwi_egress_config egress;      /* EGRESS_PREPARE */
	/* EGRESS_ATTACH: the caller's name gate, listening on the gateway
	 * address (0: none); the table redirects there */
	uint16_t gate_dns, gate_tcp;
	/* CGROUP_PREPARE: what the caller asks for (-1 / 0: not asked). */
	struct kiwi_cgroup_limits limits;
	char parent[KIWI_HELPER_SUBTREE_MAX];  /* "": the subtree itself */
	/* CGROUP_PREPARE: for a session (kiwi-run-session(1)), whose execs
	 * each get a cgroup of their own below it: the cgroup is no OOM group
	 * (memory.oom.group 0: an exec's OOM kill is that exec's), its
	 * controllers are enabled for its children, and its pid 1 goes into
	 * its leaf "keeper" (cgroup v2 lets no process sit in a cgroup that
	 * hands controllers on). */
	bool session;
	int64_t disk_size;                     /* DISK: bytes asked for */
	/* BIND: the caller's last bind: the operation is then done for good,
	 * and CAP_SYS_ADMIN goes with it (unless a disk still needs it). */
	bool last;
};

/* Parses one request message. Unknown keys, a key that does not belong to
 * the op, a map that overflows or more than KIWI_HELPER_MAX_EXTENTS
 * extents, and the egress keys a caller may not set (egress-audit,
 * egress-pool) are refused, naming the key. Pure code: fuzzed. */
int kiwi_helper_request_parse(const char *text, size_t len, struct kiwi_helper_request *req,
			      kiwi_err *err);
const char *kiwi_helper_op_name(enum kiwi_helper_op op);

/* ---- the admin config ---- */

struct kiwi_id_range {
	uint32_t start, count;
};

/* Who the caller is, as far as the config is concerned. */
struct kiwi_helper_caller {
	uid_t uid;
	gid_t gid;
	const char *name;              /* from the password database; may be NULL */
	const gid_t *groups;           /* supplementary groups */
	size_t n_groups;
};

#define KIWI_HELPER_MAX_BOUNDS 16      /* CIDRs, hosts or resolvers per bound */

/* What a rule lets a caller's egress request name (kiwi-helper.json(5)):
 * a list, or every value (any), or none. */
enum kiwi_helper_bound { KIWI_HELPER_BOUND_ANY, KIWI_HELPER_BOUND_NONE, KIWI_HELPER_BOUND_LIST };

struct kiwi_helper_egress_rule {
	bool has_within;                       /* allow_cidr_within given */
	struct kiwi_cidr4 within[KIWI_HELPER_MAX_BOUNDS];
	size_t n_within;
	struct kiwi_cidr4 never[KIWI_HELPER_MAX_BOUNDS];  /* allow_cidr_never */
	size_t n_never;
	enum kiwi_helper_bound hosts_bound;    /* allow_host */
	char hosts[KIWI_HELPER_MAX_BOUNDS][KIWI_EGRESS_NAME_MAX + 1];  /* names, "*.suffix", addresses */
	size_t n_hosts;
	enum kiwi_helper_bound dns_bound;      /* dns */
	uint32_t dns[KIWI_HELPER_MAX_BOUNDS];
	size_t n_dns;
};

/* The rule that applies to the caller: the first whose user or group
 * matches. */
struct kiwi_helper_rule {
	size_t index;                  /* its place in "rules", for messages */
	unsigned ops;                  /* KIWI_HELPER_OP_* bits allowed */
	bool subids;                   /* the caller's /etc/subuid and /etc/subgid ranges count */
	struct kiwi_id_range uids[KIWI_HELPER_MAX_RANGES];
	size_t n_uids;
	struct kiwi_id_range gids[KIWI_HELPER_MAX_RANGES];
	size_t n_gids;
	unsigned max_sandboxes;        /* helpers this user may run at once */
	unsigned max_veths;            /* of them, holding a veth */
	unsigned egress_kinds;         /* 1 << enum kiwi_egress_kind */
	/* cgroup caps (-1: none): a limit the caller leaves out is set to
	 * its cap. */
	int64_t max_memory, max_memory_swap, max_pids, max_cpu_quota_us;
	/* The disk operation's bound, bytes per sandbox (-1: none given,
	 * and then the operation is refused). */
	int64_t max_disk;
	char cgroup_subtree[KIWI_HELPER_SUBTREE_MAX];  /* normalised, never "/" */
	struct kiwi_helper_egress_rule egress;
};

/* Parses the whole config (every rule checked, unknown keys refused) and
 * fills *rule with the caller's. Returns 1 when a rule matched, 0 when
 * none did, -1 on a malformed config. Group names are looked up with
 * lookup_group (NULL: names never match). Pure code: fuzzed. */
int kiwi_helper_config_parse(const char *text, size_t len, const struct kiwi_helper_caller *who,
			     int (*lookup_group)(const char *name, gid_t *gid),
			     struct kiwi_helper_rule *rule, kiwi_err *err);

/* The cgroup a cgroup-prepare request gets: its parent (req->parent, or
 * the rule's subtree) must lie inside the rule's cgroup_subtree and below
 * no sandbox's cgroup (kiwi-*); each limit must be within its cap, and a
 * capped limit not asked for is set to the cap. Fills *l and parent (a
 * clean absolute path in the unified hierarchy). Messages name the limit,
 * the value, the cap and config_path. Pure code. */
int kiwi_helper_cgroup_check(const struct kiwi_helper_rule *rule, const struct kiwi_helper_request *req,
			     const char *config_path, struct kiwi_cgroup_limits *l, char *parent,
			     size_t len, kiwi_err *err);
/* An egress-prepare request against the rule's bounds: each allow-cidr
 * inside one of allow_cidr_within (when given) and overlapping none of
 * allow_cidr_never, each allow-host and the dns allowed by allow_host
 * and dns. The refusal is one line naming the value, the rule's key and
 * number, and config_path. Pure code. */
int kiwi_helper_egress_check(const struct kiwi_helper_rule *rule, const struct kiwi_egress_config *c,
			     const char *config_path, kiwi_err *err);
/* A cgroup path as a caller or the admin writes it ("/a/b", "a/b" or
 * "/sys/fs/cgroup/a/b") into "/a/b": no empty, "." or ".." component, no
 * control character; "/" for the root. what names it in errors. */
int kiwi_helper_cgroup_path(const char *in, const char *what, char *out, size_t len, kiwi_err *err);
/* A size as JSON: bytes (an integer) or a string for kiwi_parse_size(). */
int kiwi_helper_json_size(const kiwi_json *v, const char *what, int64_t *out, kiwi_err *err);
/* "2G", "64M", "1536K" or the bytes: the way a size was most likely written. */
void kiwi_helper_format_size(int64_t v, char *buf, size_t len);

/* Appends to ranges the lines of an /etc/subuid-style text ("owner:start:count",
 * owner a name or a uid) that belong to the caller. Malformed lines are
 * skipped, as shadow's tools skip them. */
void kiwi_subid_parse(const char *text, size_t len, const struct kiwi_helper_caller *who,
		      struct kiwi_id_range *ranges, size_t max, size_t *n);

/* True when [outside, outside+count) lies inside one of the ranges (or is
 * the caller's own id alone) and does not hold id 0. */
bool kiwi_id_extent_allowed(const struct kiwi_id_extent *e, uint32_t own_id,
			    const struct kiwi_id_range *ranges, size_t n);

/* ---- the client, for kiwi-run ---- */

struct kiwi_helper;

/* Starts the helper ($KIWI_HELPER when set, else the installed one: see
 * kiwi_helper_path()) into *h, unless *h holds one already: one helper
 * serves every request about one sandbox. Fails with one plain message
 * when the helper is missing. Stop it with kiwi_helper_stop(). */
int kiwi_helper_start(struct kiwi_helper **h, kiwi_err *err);
/* Sends one request (with fd when >= 0: the sandbox's pidfd) and returns
 * the helper's answer when it says "ok"; a refusal becomes err, in the
 * helper's own words, and so does a helper that has not answered within
 * 30 s (ETIMEDOUT). Free the answer with kiwi_json_free(). */
kiwi_json *kiwi_helper_exchange(struct kiwi_helper *h, const char *req, size_t len, int fd,
				kiwi_err *err);
/* Before clone: starts the helper when *h is NULL and asks it to prepare
 * an egress network for c. */
int kiwi_helper_egress_prepare(struct kiwi_helper **h, const struct kiwi_egress_config *c,
			       struct kiwi_egress_child *child, kiwi_err *err);
/* After clone, while the sandbox waits: the helper makes the veth and the
 * table; then the sandbox's end is configured from a child process of
 * ours that enters the sandbox's user and network namespaces (we own
 * them: no privilege needed), and we wait for the host end. */
int kiwi_helper_egress_attach(struct kiwi_helper *h, int pidfd, kiwi_err *err);
/* The caller's own half of an egress the helper made: its name gate and
 * its audit (the sandbox's log socket, handed over by the helper, and
 * --egress-audit, written by the caller). NULL: none. Owned by h. */
struct kiwi_egress *kiwi_helper_egress(const struct kiwi_helper *h);
/* Before clone: starts the helper when *h is NULL and asks it for a
 * cgroup with limits l under parent (NULL: the helper's subtree), for a
 * session or not (kiwi_helper_request's session). Writes the cgroup's
 * name in the unified hierarchy ("/kiwi.slice/kiwi-...") to name. */
int kiwi_helper_cgroup_prepare(struct kiwi_helper **h, const struct kiwi_cgroup_limits *l,
			       const char *parent, bool session, char *name, size_t len, kiwi_err *err);
/* After clone, while the sandbox waits: the helper moves it (pidfd) into
 * the cgroup and delegates the cgroup to us. */
int kiwi_helper_cgroup_attach(struct kiwi_helper *h, int pidfd, kiwi_err *err);
/* Ends the session: the helper removes what it holds and exits. Waits
 * for it, 30 s at most (then fails, naming it: it finishes on its own).
 * Frees h; NULL is fine. */
int kiwi_helper_stop(struct kiwi_helper *h, kiwi_err *err);
/* After clone, while the sandbox waits at sync #1, before egress-attach:
 * the helper writes m into the sandbox's user namespace (named by pidfd),
 * with setgroups denied, once it found every extent allotted to the
 * caller. A refusal becomes err, in the helper's words. */
int kiwi_helper_idmap(struct kiwi_helper *h, int pidfd, const struct kiwi_idmap *m, kiwi_err *err);
/* After the maps are written, while the sandbox waits at sync #1: the
 * helper makes a loop-backed ext4 layer of size bytes for the sandbox
 * (pidfd), idmapped to its user namespace, and sends its detached mount,
 * which goes to *mfd (close-on-exec). */
int kiwi_helper_disk(struct kiwi_helper *h, int pidfd, uint64_t size, int *mfd, kiwi_err *err);
/* After the maps are written: the helper clones the tree source (an fd
 * of the caller's own directory or file, O_PATH will do), idmapped so its
 * owner is the sandbox's root, into *tree. A refusal becomes err; its
 * errnum is EPERM (and *not_allowed true) when the caller's rule lacks
 * the bind operation. last: no bind follows, the helper may drop what
 * binds need. */
int kiwi_helper_bind(struct kiwi_helper *h, int pidfd, int source, bool last, int *tree, bool *not_allowed,
		     kiwi_err *err);
/* $KIWI_HELPER, else the path meson installs it at. kiwi-run is not
 * privileged, so the variable only chooses what the caller runs. */
const char *kiwi_helper_path(void);

#endif
