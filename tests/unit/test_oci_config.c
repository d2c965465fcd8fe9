/* SPDX-License-Identifier: Apache-2.0 */
/* config.json: what is taken, what is converted, what is refused and with
 * which field named. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>

#include "kiwi/oci_config.h"
#include "kiwi/oci_runtime.h"

#define BASE "\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},\"process\":{\"args\":[\"sh\"],\"cwd\":\"/\"}"
#define LINUX_NS "\"linux\":{\"namespaces\":[{\"type\":\"mount\"},{\"type\":\"pid\"},{\"type\":\"uts\"}]"

static struct kiwi_oci_config *parse(const char *text, kiwi_err *e)
{
	struct kiwi_oci_config *c = NULL;
	memset(e, 0, sizeof(*e));
	if (kiwi_oci_config_parse(text, strlen(text), &c, e) < 0)
		return NULL;
	return c;
}

/* Asserts that text is refused with a message containing want. */
static void refused(const char *text, const char *want)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse(text, &e);
	cr_assert_null(c, "accepted: %s", text);
	cr_assert_str_eq(e.step, "config", "step `%s` for %s", e.step, text);
	cr_assert(strstr(e.msg, want), "message `%s` lacks `%s`", e.msg, want);
}

Test(oci_config, takes_runc_spec_default)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(true);
	kiwi_oci_write_spec(w, false, 0, 0);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	kiwi_err e;
	struct kiwi_oci_config *c = NULL;
	cr_assert_eq(kiwi_oci_config_parse(text, len, &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c->root_path, "rootfs");
	cr_assert(c->root_readonly);
	cr_assert(c->process.terminal);
	cr_assert_str_eq(c->process.args[0], "sh");
	cr_assert_null(c->process.args[1]);
	cr_assert_eq(c->n_mounts, 7);
	cr_assert_str_eq(c->mounts[1].destination, "/dev");
	cr_assert_str_eq(c->mounts[1].data[0], "mode=755");
	cr_assert_str_eq(c->mounts[1].data[1], "size=65536k");
	cr_assert_null(c->mounts[1].data[2]);
	cr_assert_eq(c->mounts[1].attr_set, MOUNT_ATTR_NOSUID | MOUNT_ATTR_STRICTATIME);
	cr_assert_eq(c->mounts[5].attr_set, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY);
	cr_assert_eq(c->new_ns, (uint64_t)(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS |
					   CLONE_NEWCGROUP));
	uint64_t caps = (1ULL << 29) | (1ULL << 5) | (1ULL << 10);   /* AUDIT_WRITE KILL NET_BIND_SERVICE */
	cr_assert_eq(c->process.caps[KIWI_OCI_CAP_BOUNDING], caps);
	cr_assert_eq(c->process.caps[KIWI_OCI_CAP_INHERITABLE], 0);
	cr_assert_eq(c->n_masked_paths, 10);
	cr_assert_eq(c->process.n_rlimits, 1);
	cr_assert_eq(c->process.rlimits[0].resource, RLIMIT_NOFILE);
	cr_assert(c->process.no_new_privileges);
	cr_assert_not(c->has_limits, "devices rules are not limits");
	kiwi_oci_config_free(c);
}

Test(oci_config, takes_rootless_spec_with_maps)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_oci_write_spec(w, true, 1000, 1001);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	kiwi_err e;
	struct kiwi_oci_config *c = NULL;
	cr_assert_eq(kiwi_oci_config_parse(text, len, &c, &e), 0, "%s", e.msg);
	cr_assert(c->new_ns & CLONE_NEWUSER);
	cr_assert_eq(c->n_uid_maps, 1);
	cr_assert_eq(c->uid_maps[0].host_id, 1000);
	cr_assert_eq(c->gid_maps[0].host_id, 1001);
	cr_assert_eq(c->uid_maps[0].size, 1);
	kiwi_oci_config_free(c);
}

Test(oci_config, process_fields)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{\"ociVersion\":\"1.1.0\",\"root\":{\"path\":\"/r\"},"
					  "\"process\":{\"args\":[\"/bin/x\",\"a b\"],\"env\":[\"A=1\",\"B=\"],"
					  "\"cwd\":\"/w\",\"user\":{\"uid\":1000,\"gid\":100,\"additionalGids\":[5,6],"
					  "\"umask\":63},\"terminal\":true,\"consoleSize\":{\"height\":24,\"width\":80},"
					  "\"rlimits\":[{\"type\":\"RLIMIT_CORE\",\"soft\":0,\"hard\":18446744073709551615}],"
					  "\"oomScoreAdj\":-5,\"apparmorProfile\":\"x\",\"selinuxLabel\":\"y\","
					  "\"capabilities\":{\"ambient\":[\"cap_sys_admin\"]}},"
					  LINUX_NS "},\"annotations\":{\"io.kiwi.phase\":\"verify\"}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	struct kiwi_oci_process *p = &c->process;
	cr_assert_str_eq(p->args[1], "a b");
	cr_assert_str_eq(p->env[1], "B=");
	cr_assert_str_eq(p->cwd, "/w");
	cr_assert_eq(p->uid, 1000);
	cr_assert_eq(p->gid, 100);
	cr_assert_eq(p->n_additional_gids, 2);
	cr_assert_eq(p->additional_gids[1], 6);
	cr_assert_eq(p->umask, 077);
	cr_assert_eq(p->console_height, 24);
	cr_assert_eq(p->console_width, 80);
	cr_assert_eq(p->rlimits[0].hard, UINT64_MAX, "RLIM_INFINITY arrives as a double");
	cr_assert_eq(p->oom_score_adj, -5);
	cr_assert_eq(p->caps[KIWI_OCI_CAP_AMBIENT], 1ULL << 21);
	cr_assert_eq(c->n_ignored, 2, "the LSM labels are noted as ignored");
	cr_assert_str_eq(kiwi_oci_annotation(c, "io.kiwi.phase"), "verify");
	cr_assert_null(kiwi_oci_annotation(c, "io.kiwi.egress"));
	kiwi_oci_config_free(c);
}

/* Leaves a pattern where the parser's frames will lie, so that a field
 * copied from a local it never set shows as the pattern, not as a lucky 0. */
__attribute__((noinline)) static void paint_stack(void)
{
	volatile unsigned char junk[64 * 1024];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = 0x5a;
}

/* consoleSize with one of its two fields: the other is 0 (not set), never
 * what happened to be on the stack nor the other field's value. */
Test(oci_config, console_size_with_one_field)
{
	static const struct { const char *json; unsigned height, width; } cases[] = {
		{ "{\"width\":80}", 0, 80 },
		{ "{\"height\":24}", 24, 0 },
		{ "{}", 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text),
			 "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},\"process\":{\"args\":[\"sh\"],"
			 "\"cwd\":\"/\",\"terminal\":true,\"consoleSize\":%s}," LINUX_NS "}}", cases[i].json);
		kiwi_err e;
		paint_stack();
		struct kiwi_oci_config *c = parse(text, &e);
		cr_assert_not_null(c, "%s: %s", text, e.msg);
		cr_assert_eq(c->process.console_height, cases[i].height, "%s: height %u", cases[i].json,
			     c->process.console_height);
		cr_assert_eq(c->process.console_width, cases[i].width, "%s: width %u", cases[i].json,
			     c->process.console_width);
		kiwi_oci_config_free(c);
	}
}

Test(oci_config, mounts_options)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{" BASE ",\"mounts\":["
					  "{\"destination\":\"/data\",\"type\":\"none\",\"source\":\"d\",\"options\":[\"rbind\",\"ro\",\"rslave\"]},"
					  "{\"destination\":\"/t\",\"type\":\"tmpfs\",\"options\":[\"noexec\",\"exec\",\"size=1m\",\"nr_inodes=9\"]},"
					  "{\"destination\":\"/b\",\"type\":\"bind\",\"source\":\"/x\"}],"
					  LINUX_NS "}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	cr_assert(c->mounts[0].bind && c->mounts[0].recursive);
	cr_assert_str_eq(c->mounts[0].type, "bind");
	cr_assert_eq(c->mounts[0].attr_set, MOUNT_ATTR_RDONLY);
	cr_assert_eq(c->mounts[0].propagation, MS_SLAVE);
	cr_assert(c->mounts[0].propagation_recursive);
	cr_assert_eq(c->mounts[1].attr_set, 0, "the later option wins");
	cr_assert_eq(c->mounts[1].attr_clr, MOUNT_ATTR_NOEXEC);
	cr_assert_str_eq(c->mounts[1].source, "tmpfs", "the type stands in for a missing source");
	cr_assert_str_eq(c->mounts[1].data[1], "nr_inodes=9");
	cr_assert(c->mounts[2].bind && !c->mounts[2].recursive);
	kiwi_oci_config_free(c);
}

Test(oci_config, linux_fields)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{" BASE ",\"linux\":{\"namespaces\":[{\"type\":\"mount\"},"
					  "{\"type\":\"network\",\"path\":\"/run/netns/x\"},{\"type\":\"user\"}],"
					  "\"uidMappings\":[{\"containerID\":0,\"hostID\":100000,\"size\":65536}],"
					  "\"gidMappings\":[{\"containerID\":0,\"hostID\":100000,\"size\":65536}],"
					  "\"devices\":[{\"path\":\"/dev/fuse\",\"type\":\"c\",\"major\":10,\"minor\":229}],"
					  "\"sysctl\":{\"net.ipv4.ip_forward\":\"1\"},\"rootfsPropagation\":\"rshared\","
					  "\"cgroupsPath\":\"/k8s/pod1\",\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}],"
					  "\"memory\":{\"limit\":1048576,\"swap\":2097152},\"pids\":{\"limit\":-1},"
					  "\"cpu\":{\"quota\":50000,\"period\":100000,\"shares\":1024}},"
					  "\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ALLOW\"}}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	cr_assert_eq(c->new_ns, (uint64_t)(CLONE_NEWNS | CLONE_NEWUSER));
	cr_assert_eq(c->join_ns, (uint64_t)CLONE_NEWNET);
	cr_assert_str_eq(c->namespaces[1].path, "/run/netns/x");
	cr_assert_eq(c->uid_maps[0].host_id, 100000);
	cr_assert_eq(c->devices[0].mode, 0666);
	cr_assert_eq(c->devices[0].minor, 229);
	cr_assert_str_eq(c->sysctl[0], "net.ipv4.ip_forward");
	cr_assert_str_eq(c->sysctl[1], "1");
	cr_assert_eq(c->rootfs_propagation, MS_SHARED);
	cr_assert_str_eq(c->cgroups_path, "/k8s/pod1");
	cr_assert(c->has_limits);
	cr_assert_eq(c->limits.memory_max, 1048576);
	cr_assert_eq(c->limits.memory_swap_max, 1048576, "swap is memory+swap in the spec");
	cr_assert_eq(c->limits.pids_max, KIWI_CGROUP_MAX);
	cr_assert_eq(c->limits.cpu_quota_us, 50000);
	cr_assert_eq(c->limits.cpu_weight, 39, "shares 1024 is weight 39, as runc maps it");
	cr_assert_not_null(strstr(c->seccomp_json, "SCMP_ACT_ALLOW"));
	kiwi_oci_config_free(c);
}

/* Kubernetes sets shares on every pod: 2 for BestEffort, up to 262144. */
Test(oci_config, cpu_shares_become_a_weight)
{
	static const struct { const char *shares; int weight; } cases[] = {
		{ "2", 1 }, { "1024", 39 }, { "262144", 10000 }, { "0", 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512];
		kiwi_err e;
		snprintf(text, sizeof(text), "{" BASE ",\"linux\":{\"resources\":{\"cpu\":{\"shares\":%s}}}}",
			 cases[i].shares);
		struct kiwi_oci_config *c = parse(text, &e);
		cr_assert_not_null(c, "%s", e.msg);
		cr_assert_eq(c->limits.cpu_weight, cases[i].weight, "shares %s", cases[i].shares);
		kiwi_oci_config_free(c);
	}
	refused("{" BASE ",\"linux\":{\"resources\":{\"cpu\":{\"shares\":1}}}}", "linux.resources.cpu.shares");
}

Test(oci_config, unified_files_pass_and_structure_is_refused)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{" BASE ",\"linux\":{\"resources\":{\"unified\":"
					  "{\"cpu.weight\":\"42\",\"memory.high\":\"50000000\"}}}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	cr_assert(c->has_limits);
	cr_assert_str_eq(c->limits.unified[0], "cpu.weight");
	cr_assert_str_eq(c->limits.unified[3], "50000000");
	cr_assert_null(c->limits.unified[4]);
	cr_assert_eq(kiwi_cgroup_needed(&c->limits), (unsigned)(KIWI_CG_CPU | KIWI_CG_MEMORY));
	kiwi_oci_config_free(c);
	refused("{" BASE ",\"linux\":{\"resources\":{\"unified\":{\"cgroup.procs\":\"1\"}}}}",
		"linux.resources.unified");
	refused("{" BASE ",\"linux\":{\"resources\":{\"unified\":{\"../memory.max\":\"1\"}}}}",
		"linux.resources.unified");
	refused("{" BASE ",\"linux\":{\"resources\":{\"unified\":{\"memory.max\":1}}}}",
		"linux.resources.unified");
}

Test(oci_config, hooks)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{" BASE "," LINUX_NS "},\"hooks\":{\"prestart\":[{\"path\":\"/bin/a\"}],"
					  "\"poststop\":[{\"path\":\"/bin/b\",\"args\":[\"b\",\"-x\"],\"env\":[\"K=V\"],"
					  "\"timeout\":5}]}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	cr_assert_eq(c->n_hooks[KIWI_OCI_HOOK_PRESTART], 1);
	cr_assert_str_eq(c->hooks[KIWI_OCI_HOOK_PRESTART][0].argv[0], "/bin/a", "argv defaults to the path");
	cr_assert_null(c->hooks[KIWI_OCI_HOOK_PRESTART][0].env, "no env: the runtime's own");
	cr_assert_str_eq(c->hooks[KIWI_OCI_HOOK_POSTSTOP][0].env[0], "K=V");
	cr_assert_str_eq(c->hooks[KIWI_OCI_HOOK_POSTSTOP][0].argv[1], "-x");
	cr_assert_eq(c->hooks[KIWI_OCI_HOOK_POSTSTOP][0].timeout_s, 5);
	cr_assert_eq(c->n_hooks[KIWI_OCI_HOOK_POSTSTART], 0);
	kiwi_oci_config_free(c);
}

Test(oci_config, unknown_capability_is_skipped)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":"
					  "[\"x\"],\"capabilities\":{\"bounding\":[\"CAP_NOPE\",\"CAP_KILL\"]}}," LINUX_NS "}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	cr_assert_eq(c->n_unknown_caps, 1);
	cr_assert_str_eq(c->unknown_caps[0], "CAP_NOPE");
	cr_assert_eq(c->process.caps[KIWI_OCI_CAP_BOUNDING], 1ULL << 5);
	kiwi_oci_config_free(c);
}

Test(oci_config, device_rules_read_as_runc)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{" BASE ",\"linux\":{\"namespaces\":[{\"type\":\"mount\"}],"
					  "\"devices\":[{\"path\":\"/dev/x\",\"type\":\"c\",\"major\":7,\"minor\":7}],"
					  "\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"},"
					  "{\"allow\":true,\"type\":\"c\",\"major\":10,\"access\":\"rw\"},"
					  "{\"allow\":false,\"type\":\"c\",\"major\":10,\"minor\":5,\"access\":\"w\"}]}}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	cr_assert_eq(kiwi_oci_device_access(c, 'c', 10, 4), KIWI_OCI_DEV_READ | KIWI_OCI_DEV_WRITE);
	cr_assert_eq(kiwi_oci_device_access(c, 'c', 10, 5), KIWI_OCI_DEV_READ, "the last match wins");
	cr_assert_eq(kiwi_oci_device_access(c, 'b', 8, 0), 0);
	cr_assert_eq(kiwi_oci_device_access(c, 'c', 1, 3) & KIWI_OCI_DEV_WRITE, KIWI_OCI_DEV_WRITE, "default nodes");
	cr_assert_eq(kiwi_oci_device_access(c, 'c', 7, 7) & KIWI_OCI_DEV_READ, KIWI_OCI_DEV_READ, "linux.devices");
	kiwi_oci_config_free(c);
	refused("{" BASE ",\"linux\":{\"namespaces\":[{\"type\":\"mount\"}],\"resources\":{\"devices\":"
		"[{\"allow\":true,\"access\":\"rx\"}]}}}", "not made of r, w and m");
}

Test(oci_config, ignores_unknown_keys)
{
	kiwi_err e;
	struct kiwi_oci_config *c = parse("{" BASE ",\"vm\":{},\"windows\":{},\"x-future\":1," LINUX_NS
					  ",\"newThing\":[]}}", &e);
	cr_assert_not_null(c, "%s", e.msg);
	kiwi_oci_config_free(c);
}

Test(oci_config, refusals_name_the_field)
{
	refused("[]", "must be object");
	refused("{\"root\":{\"path\":\"r\"}}", "ociVersion: is required");
	refused("{\"ociVersion\":\"2.0.0\",\"root\":{\"path\":\"r\"}}", "not a 1.x");
	refused("{\"ociVersion\":\"1.0.0\"," LINUX_NS "}}", "root: is required");
	refused("{" BASE "}", "linux: is required");
	refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":[],\"cwd\":\"/\"}," LINUX_NS "}}",
		"process.args");
	refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":[\"x\"],\"cwd\":\"rel\"}," LINUX_NS "}}",
		"process.cwd");
	refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":[\"x\"],\"env\":[\"NOEQ\"]}," LINUX_NS "}}",
		"KEY=VALUE");
	refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":[\"x\"],"
		"\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":5,\"hard\":4}]}," LINUX_NS "}}", "soft is above hard");
	refused("{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":[\"x\"],"
		"\"scheduler\":{\"policy\":\"SCHED_FIFO\"}}," LINUX_NS "}}", "process.scheduler");
	refused("{" BASE ",\"mounts\":[{\"destination\":\"rel\",\"type\":\"tmpfs\"}]," LINUX_NS "}}",
		"destination must be an absolute path");
	refused("{" BASE ",\"mounts\":[{\"destination\":\"/x\",\"type\":\"tmpfs\",\"options\":[\"tmpcopyup\"]}]," LINUX_NS "}}",
		"`tmpcopyup` is not supported");
	refused("{" BASE ",\"mounts\":[{\"destination\":\"/x\",\"source\":\"/y\"}]," LINUX_NS "}}", "needs a type");
	refused("{" BASE ",\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"pid\"}]}}", "listed twice");
	refused("{" BASE ",\"linux\":{\"namespaces\":[{\"type\":\"nope\"}]}}", "unknown namespace type");
	refused("{" BASE ",\"linux\":{\"namespaces\":[{\"type\":\"user\",\"path\":\"/proc/1/ns/user\"}]}}",
		"joining an existing user namespace");
	refused("{" BASE ",\"linux\":{\"namespaces\":[{\"type\":\"user\"}]}}", "needs uidMappings and gidMappings");
	refused("{" BASE ",\"hostname\":\"h\",\"linux\":{\"namespaces\":[{\"type\":\"mount\"}]}}",
		"needs a new uts namespace");
	refused("{" BASE "," LINUX_NS ",\"sysctl\":{\"../../etc\":\"x\"}}}", "not a sysctl name");
	refused("{" BASE "," LINUX_NS ",\"sysctl\":{\"net.ipv4.ip_forward\":\"1\"}}}", "needs a network namespace");
	refused("{" BASE ",\"mounts\":[{\"destination\":\"/m\",\"type\":\"tmpfs\",\"options\":[\"idmap\"]}]," LINUX_NS "}}",
		"idmapped mounts are bind mounts");
	refused("{" BASE ",\"mounts\":[{\"destination\":\"/m\",\"source\":\"/s\",\"options\":[\"rbind\",\"idmap\"]}]," LINUX_NS "}}",
		"idmap needs uidMappings and gidMappings, or a user namespace");
	refused("{" BASE ",\"mounts\":[{\"destination\":\"/m\",\"source\":\"/s\",\"options\":[\"rbind\"],"
		"\"uidMappings\":[{\"containerID\":0,\"hostID\":1,\"size\":1}]}]," LINUX_NS "}}", "both uidMappings and gidMappings");
	refused("{" BASE "," LINUX_NS ",\"sysctl\":{\"kernel.shmmax\":\"1\"}}}", "needs an ipc namespace");
	refused("{" BASE "," LINUX_NS ",\"sysctl\":{\"fs.mqueue.msg_max\":\"1\"}}}", "needs an ipc namespace");
	refused("{" BASE "," LINUX_NS ",\"sysctl\":{\"kernel.hostname\":\"x\"}}}", "set `hostname`");
	refused("{" BASE "," LINUX_NS ",\"sysctl\":{\"vm.swappiness\":\"1\"}}}", "would change the host");
	refused("{" BASE "," LINUX_NS ",\"resources\":{\"cpu\":{\"cpus\":\"0-1\"}}}}", "linux.resources.cpu.cpus");
	refused("{" BASE "," LINUX_NS ",\"resources\":{\"hugepageLimits\":[{\"pageSize\":\"2MB\",\"limit\":1}]}}}",
		"hugepageLimits");
	refused("{" BASE "," LINUX_NS ",\"intelRdt\":{\"closID\":\"x\"}}}", "linux.intelRdt");
	refused("{" BASE "," LINUX_NS "},\"hooks\":{\"prestart\":[{\"path\":\"rel\"}]}}", "hooks.prestart[0]");
	refused("{" BASE "," LINUX_NS "},\"annotations\":{\"a\":1}}", "value of `a` must be a string");
	refused("{" BASE "," LINUX_NS ",\"maskedPaths\":[\"rel\"]}}", "linux.maskedPaths");
}

Test(oci_config, cap_and_signal_names)
{
	cr_assert_eq(kiwi_oci_cap_from_name("CAP_CHOWN"), 0);
	cr_assert_eq(kiwi_oci_cap_from_name("sys_admin"), 21);
	cr_assert_eq(kiwi_oci_cap_from_name("CAP_CHECKPOINT_RESTORE"), 40);
	cr_assert_eq(kiwi_oci_cap_from_name("CAP_"), -1);
	cr_assert_eq(kiwi_oci_signal_from_name("KILL"), 9);
	cr_assert_eq(kiwi_oci_signal_from_name("SIGTERM"), 15);
	cr_assert_eq(kiwi_oci_signal_from_name("sigusr1"), 10);
	cr_assert_eq(kiwi_oci_signal_from_name("9"), 9);
	cr_assert_eq(kiwi_oci_signal_from_name("0"), -1);
	cr_assert_eq(kiwi_oci_signal_from_name("99"), -1);
	cr_assert_eq(kiwi_oci_signal_from_name("NOPE"), -1);
}

Test(oci_config, ids)
{
	cr_assert_eq(kiwi_oci_check_id("abc-1.2_x+y", NULL), 0);
	const char *bad[] = { "", ".", "..", "a/b", "a b", "../x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_lt(kiwi_oci_check_id(bad[i], NULL), 0, "accepted `%s`", bad[i]);
}
