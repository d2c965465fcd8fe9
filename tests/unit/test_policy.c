/* SPDX-License-Identifier: Apache-2.0 */
/* The policy file: every key, every error message, every credential rule. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiwi/cleanup.h"
#include "kiwi/json.h"
#include "kiwi/policy.h"

static int parse(const char *text, struct kiwi_policy *p, kiwi_err *e)
{
	return kiwi_policy_parse(text, strlen(text), "kiwi.json", p, e);
}

/* Parses text that must be refused, and returns the message. */
static const char *refused(const char *text)
{
	static kiwi_err e;
	struct kiwi_policy p;
	e = (kiwi_err){ 0 };
	cr_assert_eq(parse(text, &p, &e), -1, "accepted: %s", text);
	cr_assert_str_eq(e.step, "policy", "step of `%s`: %s", text, e.step);
	cr_assert_eq(strncmp(e.msg, "kiwi.json: ", 11), 0, "the error names the file: %s", e.msg);
	/* refused means nothing left over: the struct is back to defaults */
	cr_assert_eq(p.n_deny_env + p.n_model_keys + p.install.n_set_env + p.verify.n_pass_env, 0);
	return e.msg;
}

#define assert_refused(text, want)                                                                   \
	do {                                                                                         \
		const char *msg_ = refused(text);                                                    \
		cr_assert(strstr(msg_, want) != NULL, "`%s`\n  gave: %s\n  want: %s", text, msg_, want); \
	} while (0)

Test(policy, defaults)
{
	struct kiwi_policy p;
	kiwi_policy_init(&p);
	cr_assert(p.install.network_egress, "install is on the network by default");
	cr_assert_not(p.verify.network_egress, "verify never is");
	cr_assert_eq(p.install.limits.memory_max, -1);
	cr_assert_eq(p.verify.limits.pids_max, -1);
	cr_assert_not(p.install.timeout_set);
	cr_assert_not(p.allow_test_credentials);
	cr_assert_eq(p.n_model_keys, 0, "the built-ins are not copied");
	cr_assert_eq(kiwi_policy_phase(&p, KIWI_PHASE_INSTALL), &p.install);
	cr_assert_eq(kiwi_policy_phase(&p, KIWI_PHASE_VERIFY), &p.verify);
	cr_assert_str_eq(kiwi_phase_name(KIWI_PHASE_INSTALL), "install");
	cr_assert_str_eq(kiwi_phase_name(KIWI_PHASE_VERIFY), "verify");
	kiwi_policy_clear(&p);
}

Test(policy, minimal_file)
{
	_cleanup_policy_ struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(parse("{\"version\": 1}", &p, &e), 0, "%s", e.msg);
	cr_assert(p.install.network_egress);
	cr_assert_eq(p.install.n_egress, 0);
	cr_assert_eq(p.verify.n_pass_env, 0);
}

Test(policy, every_key)
{
	static const char text[] =
		"{\"version\": 1,"
		" \"install\": {\"network\": \"egress\","
		"   \"egress\": {\"mode\": \"host_allowlist\", \"allow_cidr\": [\"192.0.2.0/24\"],"
		"               \"allow_host\": [\"registry.example:443\"], \"allow_port\": [443, \"8443\"],"
		"               \"dns\": \"192.0.2.53\"},"
		"   \"limits\": {\"memory\": \"2G\", \"memory_swap\": 0, \"pids\": 512, \"cpus\": 1.5,"
		"              \"io_weight\": 200, \"io_max\": [\"8:0 rbps=1048576\", \"8:16 wiops=10\"],"
		"              \"timeout\": \"5m\", \"output_limit\": \"2M\", \"disk\": \"1G\"},"
		"   \"env\": {\"CI\": \"true\", \"NODE_ENV\": \"test\"},"
		"   \"caches\": [{\"host\": \"/var/cache/npm\", \"dest\": \"/root/.npm\"}]},"
		" \"verify\": {\"network\": \"none\", \"limits\": {\"pids\": \"max\", \"cpus\": \"max\", \"timeout\": 90,"
		"              \"memory\": \"max\"},"
		"   \"env\": {\"LANG\": \"C.UTF-8\"}, \"pass_env\": [\"DATABASE_URL\", \"REDIS_URL\"],"
		"   \"caches\": [{\"dest\": \"/root/.cache/go\", \"host\": \"/srv/go\"}]},"
		" \"deny_env\": [\"AWS_*\", \"GITHUB_TOKEN\"],"
		" \"model_keys\": [\"MY_LLM_*\", \"openai_api_key\"],"
		" \"allow_test_credentials\": true}";
	_cleanup_policy_ struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(parse(text, &p, &e), 0, "%s", e.msg);

	const struct kiwi_phase_policy *in = &p.install;
	static const char *const keys[] = { "egress", "allow-cidr", "allow-host", "allow-port", "allow-port", "dns" };
	static const char *const values[] = { "host_allowlist", "192.0.2.0/24", "registry.example:443", "443", "8443",
					      "192.0.2.53" };
	cr_assert_eq(in->n_egress, 6);
	for (size_t i = 0; i < 6; i++) {
		cr_assert_str_eq(in->egress_keys[i], keys[i]);
		cr_assert_str_eq(in->egress_values[i], values[i]);
	}
	cr_assert(in->network_egress);
	cr_assert_eq(in->limits.memory_max, 2LL << 30);
	cr_assert_eq(in->limits.memory_swap_max, 0);
	cr_assert_eq(in->limits.pids_max, 512);
	cr_assert_eq(in->limits.cpu_quota_us, 150000);
	cr_assert_eq(in->limits.cpu_period_us, 100000);
	cr_assert_eq(in->limits.io_weight, 200);
	cr_assert_str_eq(in->limits.io_max, "8:0 rbps=1048576\n8:16 wiops=10");
	cr_assert(in->timeout_set);
	cr_assert_eq(in->timeout_ns, 300000000000ULL);
	cr_assert(in->output_limit_set);
	cr_assert_eq(in->output_limit, 2 << 20);
	cr_assert_eq(in->disk_bytes, 1ULL << 30);
	cr_assert_eq(in->n_set_env, 2);
	cr_assert_str_eq(in->set_env[0], "CI=true");
	cr_assert_str_eq(in->set_env[1], "NODE_ENV=test");
	cr_assert_eq(in->n_caches, 1);
	cr_assert_str_eq(in->caches[0].host, "/var/cache/npm");
	cr_assert_str_eq(in->caches[0].dest, "/root/.npm");

	const struct kiwi_phase_policy *ve = &p.verify;
	cr_assert_not(ve->network_egress);
	cr_assert_eq(ve->n_egress, 0);
	cr_assert_eq(ve->limits.pids_max, KIWI_CGROUP_MAX);
	cr_assert_eq(ve->limits.cpu_quota_us, KIWI_CGROUP_MAX);
	cr_assert_eq(ve->limits.memory_max, KIWI_CGROUP_MAX);
	cr_assert_eq(ve->timeout_ns, 90000000000ULL, "a bare number is seconds, as with --timeout");
	cr_assert_not(ve->output_limit_set);
	cr_assert_eq(ve->disk_bytes, 0);
	cr_assert_eq(ve->n_pass_env, 2);
	cr_assert_str_eq(ve->pass_env[1], "REDIS_URL");
	cr_assert_str_eq(ve->set_env[0], "LANG=C.UTF-8");
	cr_assert_str_eq(ve->caches[0].host, "/srv/go");

	cr_assert_eq(p.n_deny_env, 2);
	cr_assert_str_eq(p.deny_env[0], "AWS_*");
	cr_assert_eq(p.n_model_keys, 1, "a built-in given again is not listed twice");
	cr_assert_str_eq(p.model_keys[0], "MY_LLM_*");
	cr_assert(p.allow_test_credentials);
}

Test(policy, install_network_none)
{
	_cleanup_policy_ struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(parse("{\"version\": 1, \"install\": {\"network\": \"none\"}, \"verify\": {\"network\": \"none\"}}",
			   &p, &e), 0, "%s", e.msg);
	cr_assert_not(p.install.network_egress);
	cr_assert_not(p.verify.network_egress);
}

Test(policy, numbers_and_strings_mean_the_same)
{
	_cleanup_policy_ struct kiwi_policy a;
	_cleanup_policy_ struct kiwi_policy b;
	kiwi_err e = { 0 };
	cr_assert_eq(parse("{\"version\":1,\"install\":{\"limits\":{\"memory\":1048576,\"pids\":64,\"cpus\":0.25,"
			   "\"timeout\":30,\"output_limit\":4096,\"disk\":65536}}}", &a, &e), 0, "%s", e.msg);
	cr_assert_eq(parse("{\"version\":1,\"install\":{\"limits\":{\"memory\":\"1M\",\"pids\":\"64\",\"cpus\":\"0.25\","
			   "\"timeout\":\"30s\",\"output_limit\":\"4k\",\"disk\":\"64k\"}}}", &b, &e), 0, "%s", e.msg);
	cr_assert_eq(a.install.limits.memory_max, b.install.limits.memory_max);
	cr_assert_eq(a.install.limits.pids_max, b.install.limits.pids_max);
	cr_assert_eq(a.install.limits.cpu_quota_us, 25000);
	cr_assert_eq(b.install.limits.cpu_quota_us, 25000);
	cr_assert_eq(a.install.timeout_ns, b.install.timeout_ns);
	cr_assert_eq(a.install.output_limit, b.install.output_limit);
	cr_assert_eq(a.install.disk_bytes, b.install.disk_bytes);
}

Test(policy, structure_errors)
{
	assert_refused("", "malformed JSON");
	assert_refused("{\"version\": 1,", "malformed JSON");
	assert_refused("{\"version\": 1, \"version\": 1}", "repeats a key");
	assert_refused("[]", "a policy is a JSON object, got array");
	assert_refused("{}", "missing `version` (this kiwi-run reads version 1)");
	assert_refused("{\"install\": {}}", "missing `version`");
	assert_refused("{\"version\": \"1\"}", "`version`: expected an integer, got string");
	assert_refused("{\"version\": 1.0}", "`version`: expected an integer, got number");
	assert_refused("{\"version\": 2, \"future\": true}", "`version` 2 is not supported: this kiwi-run reads version 1");
	assert_refused("{\"version\": 0}", "`version` 0 is not supported");
	assert_refused("{\"version\": 1, \"instal\": {}}", "kiwi.json: unknown key `instal`");
	assert_refused("{\"version\": 1, \"install\": {\"limts\": {}}}", "kiwi.json: unknown key `install.limts`");
	assert_refused("{\"version\": 1, \"verify\": {\"limits\": {\"memroy\": \"1G\"}}}",
		       "unknown key `verify.limits.memroy`");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_hosts\": []}}}",
		       "unknown key `install.egress.allow_hosts`");
	assert_refused("{\"version\": 1, \"install\": {\"caches\": [{\"host\": \"/a\", \"dest\": \"/b\", \"ro\": true}]}}",
		       "unknown key `install.caches[0].ro`");
	assert_refused("{\"version\": 1, \"install\": []}", "`install`: expected an object, got array");
	assert_refused("{\"version\": 1, \"verify\": null}", "`verify`: expected an object, got null");
	assert_refused("{\"version\": 1, \"install\": {\"limits\": 5}}", "`install.limits`: expected an object, got number");
	/* deeper than the JSON module allows */
	char deep[300] = "{\"version\":1,\"x\":";
	for (int i = 0; i < 70; i++)
		strcat(deep, "[");
	assert_refused(deep, "nesting deeper than 64");
}

Test(policy, errors_stay_on_one_line)
{
	assert_refused("{\"version\": 1, \"install\": {\"a\\nb\\u001b[2J\": 1}}", "unknown key `install.a?b?[2J`");
	assert_refused("{\"version\": 1, \"install\": {\"network\": \"x\\ny\"}}", "got `x?y`");
	assert_refused("{\"version\": 1, \"install\": {\"limits\": {\"memory\": \"1\\r\"}}}", "got `1?`");
}

Test(policy, network_errors)
{
	assert_refused("{\"version\": 1, \"verify\": {\"network\": \"egress\"}}",
		       "`verify.network`: verify never has a network; only \"none\" is accepted");
	assert_refused("{\"version\": 1, \"verify\": {\"egress\": {}}}",
		       "`verify.egress`: verify never has a network, so it takes no egress settings");
	assert_refused("{\"version\": 1, \"install\": {\"network\": \"host\"}}",
		       "`install.network` wants \"egress\" or \"none\", got `host`");
	assert_refused("{\"version\": 1, \"install\": {\"network\": true}}",
		       "`install.network`: expected \"egress\" or \"none\", got boolean");
	assert_refused("{\"version\": 1, \"install\": {\"network\": \"none\", \"egress\": {\"mode\": \"public_internet\"}}}",
		       "`install.egress` needs `install.network` \"egress\" (it is \"none\")");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"mode\": \"everything\"}}}",
		       "`install.egress.mode` `everything`:");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"mode\": 1}}}",
		       "`install.egress.mode`: expected a string, got number");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_cidr\": [\"300.0.0.0/8\"]}}}",
		       "`install.egress.allow_cidr[0]` `300.0.0.0/8`:");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_cidr\": \"10.0.0.0/8\"}}}",
		       "`install.egress.allow_cidr`: expected an array, got string");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_cidr\": [\"10.0.0.0/8,192.0.2.0/24\"]}}}",
		       "`install.egress.allow_cidr[0]` `10.0.0.0/8,192.0.2.0/24`: one value per item; a list is a JSON array");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_port\": [0]}}}",
		       "`install.egress.allow_port[0]` `0`:");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_port\": [true]}}}",
		       "`install.egress.allow_port[0]`: expected a port number, got boolean");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_host\": [1]}}}",
		       "`install.egress.allow_host[0]`: expected a string, got number");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"dns\": \"127.0.0.1\"}}}",
		       "`install.egress`: --dns `127.0.0.1` is on loopback, which the sandbox itself asks in "
		       "public_internet");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"dns\": \"::1\"}}}",
		       "the resolver must be an IPv4 address");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"mode\": \"private_network\", "
		       "\"allow_cidr\": [\"10.0.0.0/8\", \"0.0.0.0/0\"]}}}",
		       "`install.egress`: --allow-cidr `0.0.0.0/0` is not private");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"mode\": \"host_allowlist\"}}}",
		       "`install.egress.mode` host_allowlist needs at least one `install.egress.allow_host`");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"mode\": \"private_network\"}}}",
		       "`install.egress.mode` private_network needs at least one `install.egress.allow_cidr`");
	assert_refused("{\"version\": 1, \"install\": {\"egress\": {\"allow_host\": [\"example.org\"]}}}",
		       "`install.egress.allow_host` needs `install.egress.mode` host_allowlist");
}

Test(policy, limit_errors)
{
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"memory\":\"2Q\"}}}",
		       "kiwi.json: `install.limits.memory` wants a size such as 512M or 2G, got `2Q`");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"memory\":-1}}}",
		       "`install.limits.memory` wants a size such as 512M or 2G, got `-1`");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"memory\":[1]}}}",
		       "`install.limits.memory`: expected a size (\"512M\", \"2G\", a number of bytes or \"max\"), got array");
	assert_refused("{\"version\":1,\"verify\":{\"limits\":{\"memory_swap\":\"x\"}}}",
		       "`verify.limits.memory_swap` wants a size");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"pids\":0}}}",
		       "`install.limits.pids`: `0` is not a process count: want 1 to");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"pids\":1.5}}}",
		       "`install.limits.pids`: `1.5` is not a process count");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"pids\":null}}}",
		       "`install.limits.pids`: expected a process count or \"max\", got null");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"cpus\":0.001}}}",
		       "`install.limits.cpus`: `0.001` is not a CPU count");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"cpus\":1e3}}}",
		       "`install.limits.cpus`: `1e3` is not a CPU count");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"cpus\":[1]}}}",
		       "`install.limits.cpus`: expected a CPU count (1.5) or \"max\", got array");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"io_weight\":0}}}",
		       "`install.limits.io_weight` wants 1 to 10000, got `0`");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"io_weight\":2.5}}}",
		       "`install.limits.io_weight` wants 1 to 10000, got `2.5`");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"io_weight\":\"5\"}}}",
		       "`install.limits.io_weight`: expected an integer from 1 to 10000, got string");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"io_max\":\"8:0 speed=1\"}}}",
		       "`install.limits.io_max`: io.max line `8:0 speed=1` is malformed");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"io_max\":[]}}}",
		       "`install.limits.io_max`: io.max is empty");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"io_max\":[1]}}}",
		       "`install.limits.io_max[0]`: expected a string, got number");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"io_max\":{}}}}",
		       "`install.limits.io_max`: expected a string or an array");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"timeout\":\"5 minutes\"}}}",
		       "`install.limits.timeout` wants a duration such as 30s or 500ms, got `5 minutes`");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"timeout\":false}}}",
		       "`install.limits.timeout`: expected a duration");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"output_limit\":\"lots\"}}}",
		       "`install.limits.output_limit` wants a size");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"disk\":\"1k\"}}}",
		       "`install.limits.disk` must be at least 4k, got `1k`");
	assert_refused("{\"version\":1,\"install\":{\"limits\":{\"disk\":\"big\"}}}",
		       "`install.limits.disk` wants a size");
}

Test(policy, env_and_cache_errors)
{
	assert_refused("{\"version\":1,\"install\":{\"env\":[\"CI=1\"]}}", "`install.env`: expected an object, got array");
	assert_refused("{\"version\":1,\"install\":{\"env\":{\"CI\":1}}}", "`install.env.CI`: expected a string, got number");
	assert_refused("{\"version\":1,\"install\":{\"env\":{\"A=B\":\"x\"}}}", "`install.env.A=B`: not a variable name");
	assert_refused("{\"version\":1,\"install\":{\"env\":{\"1A\":\"x\"}}}", "`install.env.1A`: not a variable name");
	assert_refused("{\"version\":1,\"install\":{\"env\":{\"\":\"x\"}}}", "`install.env.`: not a variable name");
	assert_refused("{\"version\":1,\"install\":{\"pass_env\":[\"HOME\"]}}",
		       "`install.pass_env`: install never receives the caller's variables; pass_env is for verify only");
	assert_refused("{\"version\":1,\"verify\":{\"pass_env\":\"HOME\"}}", "`verify.pass_env`: expected an array, got string");
	assert_refused("{\"version\":1,\"verify\":{\"pass_env\":[7]}}", "`verify.pass_env[0]`: expected a variable name, got number");
	assert_refused("{\"version\":1,\"verify\":{\"pass_env\":[\"DB_*\"]}}",
		       "`verify.pass_env[0]`: `DB_*` is not a variable name (pass_env takes names, not patterns");
	assert_refused("{\"version\":1,\"verify\":{\"pass_env\":[\"A\",\"B\",\"A\"]}}", "`verify.pass_env[2]`: `A` is listed twice");
	assert_refused("{\"version\":1,\"verify\":{\"env\":{\"A\":\"1\"},\"pass_env\":[\"A\"]}}",
		       "`verify.env.A`: `A` is also in `verify.pass_env`: set it or pass it, not both");
	assert_refused("{\"version\":1,\"install\":{\"caches\":{}}}", "`install.caches`: expected an array, got object");
	assert_refused("{\"version\":1,\"install\":{\"caches\":[\"/a:/b\"]}}", "`install.caches[0]`: expected an object, got string");
	assert_refused("{\"version\":1,\"install\":{\"caches\":[{\"host\":\"rel\",\"dest\":\"/x\"}]}}",
		       "`install.caches[0].host` wants an absolute path without `..`, got `rel`");
	assert_refused("{\"version\":1,\"install\":{\"caches\":[{\"host\":\"/a\",\"dest\":\"/x/../etc\"}]}}",
		       "`install.caches[0].dest` wants an absolute path without `..`, got `/x/../etc`");
	assert_refused("{\"version\":1,\"install\":{\"caches\":[{\"host\":\"/a\",\"dest\":\"/\"}]}}",
		       "`install.caches[0].dest`: a cache is a directory of its own, never `/`");
	assert_refused("{\"version\":1,\"install\":{\"caches\":[{\"host\":\"//\",\"dest\":\"/b\"}]}}",
		       "`install.caches[0].host`: a cache is a directory of its own, never `/`");
	assert_refused("{\"version\":1,\"install\":{\"caches\":[{\"host\":\"/a\",\"dest\":3}]}}",
		       "`install.caches[0].dest`: expected an absolute path, got number");
	assert_refused("{\"version\":1,\"verify\":{\"caches\":[{\"host\":\"/a\"}]}}", "`verify.caches[0]` needs both \"host\" and \"dest\"");
	assert_refused("{\"version\":1,\"install\":{\"caches\":[{\"host\":\"/a\",\"dest\":\"/c\"},{\"host\":\"/b\",\"dest\":\"/c\"}]}}",
		       "`install.caches[1]`: two caches on `/c`");
	assert_refused("{\"version\":1,\"deny_env\":\"AWS_*\"}", "`deny_env`: expected an array, got string");
	assert_refused("{\"version\":1,\"deny_env\":[\"\"]}", "`deny_env[0]`: `` is not a variable name or pattern");
	assert_refused("{\"version\":1,\"model_keys\":[\"A B\"]}", "`model_keys[0]`: `A B` is not a variable name or pattern");
	assert_refused("{\"version\":1,\"model_keys\":[{}]}", "`model_keys[0]`: expected a variable name or pattern, got object");
	assert_refused("{\"version\":1,\"allow_test_credentials\":\"yes\"}",
		       "`allow_test_credentials`: expected true or false, got string");
	/* the file's credential rules, checked once everything is read */
	assert_refused("{\"version\":1,\"verify\":{\"pass_env\":[\"ANTHROPIC_API_KEY\"]}}",
		       "`verify.pass_env[0]`: `ANTHROPIC_API_KEY` is a model-provider key");
	assert_refused("{\"version\":1,\"verify\":{\"pass_env\":[\"AWS_SECRET_ACCESS_KEY\"]},\"deny_env\":[\"AWS_*\"]}",
		       "`verify.pass_env[0]`: `AWS_SECRET_ACCESS_KEY` is refused by the policy's deny_env (`AWS_*`)");
	assert_refused("{\"version\":1,\"install\":{\"env\":{\"OPENAI_API_KEY\":\"sk\"}},\"allow_test_credentials\":true}",
		       "`install.env.OPENAI_API_KEY`: `OPENAI_API_KEY` is a model-provider key (matches `OPENAI_API_KEY`): refused even when named");
	assert_refused("{\"version\":1,\"verify\":{\"env\":{\"MY_LLM_KEY\":\"x\"}},\"model_keys\":[\"MY_LLM_*\"]}",
		       "`verify.env.MY_LLM_KEY`: `MY_LLM_KEY` is a model-provider key (matches `MY_LLM_*`): refused even when named");
	assert_refused("{\"version\":1,\"verify\":{\"env\":{\"TOKEN\":\"x\"}},\"deny_env\":[\"TOKEN\"],\"allow_test_credentials\":true}",
		       "`verify.env.TOKEN`: `TOKEN` is refused by the policy's deny_env (`TOKEN`)");
}

/* allow_test_credentials admits named non-model credentials; a model key
 * never, in either phase, from the file or from a flag */
Test(policy, test_credentials_never_model_keys)
{
	_cleanup_policy_ struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(parse("{\"version\":1,\"verify\":{\"pass_env\":[\"OPENAI_API_KEY\"]},\"allow_test_credentials\":true}",
			   &p, &e), -1, "a model key named in the file is refused even with the opt-in");
	cr_assert(strstr(e.msg, "`OPENAI_API_KEY` is a model-provider key") != NULL, "%s", e.msg);
	cr_assert(strstr(e.msg, "whatever the policy says") != NULL, "%s", e.msg);
	kiwi_policy_clear(&p);
	cr_assert_eq(parse("{\"version\":1,\"verify\":{\"pass_env\":[\"STRIPE_TEST_KEY\"],\"env\":{\"DB_PASSWORD\":\"t\"}},"
			   "\"allow_test_credentials\":true}", &p, &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "STRIPE_TEST_KEY", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "ANTHROPIC_API_KEY", &e), -1);
	cr_assert(strstr(e.msg, "allow_test_credentials admits named non-model test credentials only") != NULL,
		  "%s", e.msg);
	cr_assert_eq(kiwi_policy_check_literal(&p, KIWI_PHASE_VERIFY, "ANTHROPIC_API_KEY", &e), -1);
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_INSTALL, "ANTHROPIC_API_KEY", &e), -1);
	cr_assert(strstr(e.msg, "it is also a model-provider key, matching `ANTHROPIC_API_KEY`") != NULL, "%s", e.msg);
	cr_assert_eq(kiwi_policy_check_literal(&p, KIWI_PHASE_INSTALL, "ANTHROPIC_API_KEY", &e), -1);
	cr_assert(strstr(e.msg, "in install and verify") != NULL, "%s", e.msg);
}

Test(policy, credential_rules)
{
	struct kiwi_policy p;
	kiwi_policy_init(&p);
	kiwi_err e = { 0 };
	/* install: nothing from the caller, whatever it is */
	static const char *const any[] = { "HOME", "PATH", "DATABASE_URL", "CI" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(any); i++) {
		e = (kiwi_err){ 0 };
		cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_INSTALL, any[i], &e), -1, "%s crossed into install", any[i]);
		cr_assert_str_eq(e.step, "policy");
		cr_assert(strstr(e.msg, "install never receives the caller's variables, whatever is asked") != NULL, "%s", e.msg);
		cr_assert(strstr(e.msg, any[i]) != NULL, "names the variable: %s", e.msg);
		cr_assert(strstr(e.msg, "model-provider") == NULL, "%s is no model key: %s", any[i], e.msg);
		cr_assert_eq(kiwi_policy_check_literal(&p, KIWI_PHASE_INSTALL, any[i], &e), 0, "a literal %s may be set", any[i]);
	}
	/* verify: what is named, unless it is a model key */
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "DATABASE_URL", &e), 0, "%s", e.msg);
	static const char *const keys[] = { "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(keys); i++) {
		e = (kiwi_err){ 0 };
		cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, keys[i], &e), -1, "%s crossed", keys[i]);
		cr_assert(strstr(e.msg, "is a model-provider key (matches `") != NULL, "%s", e.msg);
		cr_assert(strstr(e.msg, "refused even when named") != NULL, "%s", e.msg);
		cr_assert(strstr(e.msg, "whatever the policy says") != NULL, "says nothing opens it: %s", e.msg);
		cr_assert_eq(kiwi_policy_check_literal(&p, KIWI_PHASE_VERIFY, keys[i], &e), -1);
		cr_assert_eq(kiwi_policy_check_literal(&p, KIWI_PHASE_INSTALL, keys[i], &e), -1);
	}
	/* names that are no names */
	static const char *const bad[] = { "", "A=B", "1X", "A B", "A-B" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(bad); i++) {
		cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, bad[i], &e), -1, "`%s`", bad[i]);
		cr_assert(strstr(e.msg, "is not a variable name") != NULL, "%s", e.msg);
		cr_assert_eq(kiwi_policy_check_literal(&p, KIWI_PHASE_VERIFY, bad[i], &e), -1, "`%s`", bad[i]);
	}
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "A\nB", &e), -1);
	cr_assert(strstr(e.msg, "`A?B` is not a variable name") != NULL, "one line: %s", e.msg);
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_INSTALL, "A\nB", &e), -1);
	cr_assert(strchr(e.msg, '\n') == NULL, "one line: %s", e.msg);
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, NULL, &e), -1);
	cr_assert_not(kiwi_policy_is_model_key(&p, NULL));
}

Test(policy, model_key_list)
{
	struct kiwi_policy p;
	kiwi_policy_init(&p);
	static const char *const yes[] = {
		"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AZURE_OPENAI_API_KEY",
		"MISTRAL_API_KEY", "COHERE_API_KEY", "CO_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY",
		"OPENROUTER_API_KEY", "TOGETHER_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
		"AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "FIREWORKS_API_KEY",
		"PERPLEXITY_API_KEY", "REPLICATE_API_TOKEN", "VOYAGE_API_KEY", "CEREBRAS_API_KEY",
		"MY_OPENAI_KEY", "OPENAI_KEY",
		/* case does not matter */
		"anthropic_api_key", "Openai_Api_Key", "hf_token",
	};
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(yes); i++)
		cr_assert(kiwi_policy_is_model_key(&p, yes[i]), "%s is not a model key", yes[i]);
	static const char *const no[] = {
		"HOME", "PATH", "DATABASE_URL", "STRIPE_API_KEY", "GITHUB_TOKEN", "NPM_TOKEN", "ANTHROPIC_BASE_URL",
		"OPENAI_BASE_URL", "TOGETHER", "HF_HOME", "AWS_REGION", "API_KEY", "TOKEN",
	};
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(no); i++)
		cr_assert_not(kiwi_policy_is_model_key(&p, no[i]), "%s is taken for a model key", no[i]);
	size_t n;
	const char *const *builtin = kiwi_policy_builtin_model_keys(&n);
	cr_assert_geq(n, 3);
	cr_assert_str_eq(builtin[0], "ANTHROPIC_API_KEY");
	cr_assert_str_eq(builtin[1], "OPENAI_API_KEY");
	cr_assert_str_eq(builtin[2], "GEMINI_API_KEY");
}

Test(policy, patterns_from_the_file)
{
	_cleanup_policy_ struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(parse("{\"version\":1,\"model_keys\":[\"LLM_*\",\"MY_KEY_?\",\"VENDOR_[AB]_TOKEN\",\"EXACT_NAME\"],"
			   "\"deny_env\":[\"*_SECRET\",\"GITHUB_TOKEN\",\"npm_config_*\"]}", &p, &e), 0, "%s", e.msg);
	cr_assert(kiwi_policy_is_model_key(&p, "LLM_KEY"));
	cr_assert(kiwi_policy_is_model_key(&p, "llm_anything"));
	cr_assert(kiwi_policy_is_model_key(&p, "MY_KEY_1"));
	cr_assert_not(kiwi_policy_is_model_key(&p, "MY_KEY_12"));
	cr_assert(kiwi_policy_is_model_key(&p, "VENDOR_B_TOKEN"));
	cr_assert_not(kiwi_policy_is_model_key(&p, "VENDOR_C_TOKEN"));
	cr_assert(kiwi_policy_is_model_key(&p, "exact_name"));
	cr_assert_not(kiwi_policy_is_model_key(&p, "EXACT_NAME_2"));
	cr_assert(kiwi_policy_is_model_key(&p, "OPENAI_API_KEY"), "the built-ins stay");

	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "DB_SECRET", &e), -1);
	cr_assert(strstr(e.msg, "`DB_SECRET` is refused by the policy's deny_env (`*_SECRET`)") != NULL, "%s", e.msg);
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "github_token", &e), -1, "deny_env ignores case");
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "NPM_CONFIG_REGISTRY", &e), -1);
	cr_assert_eq(kiwi_policy_check_literal(&p, KIWI_PHASE_INSTALL, "NPM_CONFIG_TOKEN", &e), -1,
		     "deny_env holds for literals too");
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "SECRET_DB", &e), 0, "%s", e.msg);
	cr_assert_eq(kiwi_policy_check_env(&p, KIWI_PHASE_VERIFY, "LLM_KEY", &e), -1);
	cr_assert(strstr(e.msg, "(matches `LLM_*`)") != NULL, "%s", e.msg);
}

/* What `policy check` prints is itself a policy, and printing it again
 * gives the same text. */
Test(policy, written_back)
{
	static const char text[] =
		"{\"version\":1,\"install\":{\"egress\":{\"mode\":\"private_network\",\"allow_cidr\":[\"10.0.0.0/8\"],"
		"\"allow_port\":[443]},\"limits\":{\"memory\":\"1.5G\",\"cpus\":\"0.125\",\"timeout\":\"1500ms\","
		"\"pids\":\"max\",\"io_max\":\"8:0 rbps=max\"},\"env\":{\"CI\":\"1\"}},"
		"\"verify\":{\"pass_env\":[\"DB\"],\"limits\":{\"timeout\":\"2h\",\"output_limit\":0}},"
		"\"deny_env\":[\"X_*\"],\"model_keys\":[\"LLM_*\"],\"allow_test_credentials\":true}";
	_cleanup_policy_ struct kiwi_policy a;
	_cleanup_policy_ struct kiwi_policy b;
	kiwi_err e = { 0 };
	cr_assert_eq(parse(text, &a, &e), 0, "%s", e.msg);
	_cleanup_jw_ kiwi_json_writer *w1 = kiwi_jw_new(false);
	kiwi_policy_write_json(&a, w1);
	size_t len1;
	const char *out1 = kiwi_jw_text(w1, &len1);
	cr_assert_eq(kiwi_policy_parse(out1, len1, "out", &b, &e), 0, "%s\n%s", e.msg, out1);
	_cleanup_jw_ kiwi_json_writer *w2 = kiwi_jw_new(false);
	kiwi_policy_write_json(&b, w2);
	cr_assert_str_eq(kiwi_jw_text(w2, NULL), out1);
	cr_assert(strstr(out1, "\"cpus\":\"0.125\"") != NULL, "%s", out1);
	cr_assert(strstr(out1, "\"timeout\":\"1500ms\"") != NULL, "%s", out1);
	cr_assert(strstr(out1, "\"timeout\":\"2h\"") != NULL, "%s", out1);
	cr_assert(strstr(out1, "\"memory\":1610612736") != NULL, "%s", out1);
	cr_assert(strstr(out1, "\"pids\":\"max\"") != NULL, "%s", out1);
	cr_assert(strstr(out1, "\"allow_port\":[\"443\"]") != NULL, "%s", out1);
	cr_assert(strstr(out1, "\"ANTHROPIC_API_KEY\"") != NULL, "the built-ins are listed: %s", out1);
	cr_assert_eq(b.n_model_keys, 1, "built-ins read back are not added twice");
	cr_assert_eq(b.verify.output_limit, 0);
	cr_assert(b.verify.output_limit_set);
}

Test(policy, long_names_written_whole)
{
	char name[401];
	memset(name, 'N', 400);
	name[400] = '\0';
	char text[600];
	snprintf(text, sizeof(text), "{\"version\":1,\"verify\":{\"env\":{\"%s\":\"v\"}}}", name);
	_cleanup_policy_ struct kiwi_policy a;
	_cleanup_policy_ struct kiwi_policy b;
	kiwi_err e = { 0 };
	cr_assert_eq(parse(text, &a, &e), 0, "%s", e.msg);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_policy_write_json(&a, w);
	size_t len;
	const char *out = kiwi_jw_text(w, &len);
	cr_assert_eq(kiwi_policy_parse(out, len, "out", &b, &e), 0, "%s", e.msg);
	cr_assert_str_eq(b.verify.set_env[0], a.verify.set_env[0]);
}

Test(policy, default_written_out)
{
	struct kiwi_policy p;
	kiwi_policy_init(&p);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_policy_write_json(&p, w);
	const char *out = kiwi_jw_text(w, NULL);
	cr_assert(strstr(out, "\"install\":{\"network\":\"egress\",\"egress\":{\"mode\":\"public_internet\"") != NULL, "%s", out);
	cr_assert(strstr(out, "\"verify\":{\"network\":\"none\",\"limits\"") != NULL, "%s", out);
	cr_assert(strstr(out, "\"allow_test_credentials\":false}") != NULL, "%s", out);
}

/* ---- the file ---- */

static char dir[] = "/tmp/kiwi-policy-test-XXXXXX";

static void make_dir(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(path, mode), 0);
	return path;
}

Test(policy_file, loads, .init = make_dir, .fini = remove_dir)
{
	const char *path = write_file("kiwi.json", "{\"version\":1,\"verify\":{\"pass_env\":[\"DB\"]}}", 0644);
	_cleanup_policy_ struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_policy_load(path, &p, &e), 0, "%s", e.msg);
	cr_assert_str_eq(p.verify.pass_env[0], "DB");
	kiwi_policy_clear(&p);
	path = write_file("ro.json", "{\"version\":1}", 0400);
	cr_assert_eq(kiwi_policy_load(path, &p, &e), 0, "%s", e.msg);
}

Test(policy_file, errors_name_the_file, .init = make_dir, .fini = remove_dir)
{
	const char *path = write_file("kiwi.json", "{\"version\":1,\"install\":{\"limts\":{}}}", 0644);
	struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_policy_load(path, &p, &e), -1);
	char want[512];
	snprintf(want, sizeof(want), "%s: unknown key `install.limts`", path);
	cr_assert_str_eq(e.msg, want);
	cr_assert_eq(e.errnum, 0, "no strerror after a content error");
}

Test(policy_file, refuses_what_others_can_write, .init = make_dir, .fini = remove_dir)
{
	struct kiwi_policy p;
	kiwi_err e = { 0 };
	const char *path = write_file("g.json", "{\"version\":1}", 0664);
	cr_assert_eq(kiwi_policy_load(path, &p, &e), -1);
	cr_assert(strstr(e.msg, "writable by group or others (mode 0664)") != NULL, "%s", e.msg);
	cr_assert(strstr(e.msg, "chmod go-w") != NULL, "%s", e.msg);
	path = write_file("o.json", "{\"version\":1}", 0646);
	cr_assert_eq(kiwi_policy_load(path, &p, &e), -1);
	cr_assert(strstr(e.msg, "(mode 0646)") != NULL, "%s", e.msg);
}

Test(policy_file, checks_the_target_of_a_link, .init = make_dir, .fini = remove_dir)
{
	/* the link's own owner and mode mean nothing: the file read is checked */
	const char *target = write_file("g.json", "{\"version\":1,\"allow_test_credentials\":true}", 0666);
	char link[300];
	snprintf(link, sizeof(link), "%s/link.json", dir);
	cr_assert_eq(symlink(target, link), 0);
	struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_policy_load(link, &p, &e), -1);
	cr_assert(strstr(e.msg, "writable by group or others (mode 0666)") != NULL, "%s", e.msg);
	cr_assert_eq(chmod(target, 0644), 0);
	cr_assert_eq(kiwi_policy_load(link, &p, &e), 0, "%s", e.msg);
	cr_assert(p.allow_test_credentials);
	kiwi_policy_clear(&p);
}

Test(policy_file, refuses_a_stranger_s_file, .init = make_dir, .fini = remove_dir)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to give the file away");
	const char *path = write_file("s.json", "{\"version\":1}", 0644);
	cr_assert_eq(chown(path, 4242, 4242), 0);
	struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_policy_load(path, &p, &e), -1);
	cr_assert(strstr(e.msg, "owned by uid 4242, neither root nor the caller (uid 0)") != NULL, "%s", e.msg);
}

Test(policy_file, refuses_what_is_no_regular_file, .init = make_dir, .fini = remove_dir)
{
	struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_policy_load(dir, &p, &e), -1);
	cr_assert(strstr(e.msg, ": not a regular file") != NULL, "%s", e.msg);
	char fifo[300];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(kiwi_policy_load(fifo, &p, &e), -1, "a FIFO neither hangs nor loads");
	cr_assert(strstr(e.msg, ": not a regular file") != NULL, "%s", e.msg);
	cr_assert_eq(kiwi_policy_load("/dev/null", &p, &e), -1);
	char missing[300];
	snprintf(missing, sizeof(missing), "%s/missing.json", dir);
	cr_assert_eq(kiwi_policy_load(missing, &p, &e), -1);
	cr_assert_eq(e.errnum, ENOENT);
	cr_assert(strstr(e.msg, "missing.json: cannot open") != NULL, "%s", e.msg);
}

Test(policy_file, refuses_a_huge_file, .init = make_dir, .fini = remove_dir)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/big.json", dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("{\"version\":1,\"deny_env\":[", f);
	for (int i = 0; i < 100000; i++)
		fputs("\"NAME_XXXXX\",", f);
	fputs("\"LAST\"]}", f);
	fclose(f);
	cr_assert_eq(chmod(path, 0644), 0);
	struct kiwi_policy p;
	kiwi_err e = { 0 };
	cr_assert_eq(kiwi_policy_load(path, &p, &e), -1);
	cr_assert_eq(e.errnum, EFBIG);
	cr_assert(strstr(e.msg, "big.json: the file is larger than 1048576 bytes") != NULL, "%s", e.msg);
}
