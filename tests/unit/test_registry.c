/* SPDX-License-Identifier: Apache-2.0 */
/* The registry's state files: what the parser accepts and refuses, and
 * that writing an entry out and reading it back gives the same entry. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/registry.h"

static const char good[] =
	"{\"version\":1,\"id\":\"0123456789ab\",\"pid\":42,\"supervisor_pid\":41,\"uid\":999,"
	"\"phase\":null,\"cgroup\":\"/kiwi.slice/kiwi-00\",\"network\":\"none\","
	"\"command\":\"sleep 1000\",\"started_ns\":1795976437065493000,\"later\":[1,2]}";

Test(registry, parses_a_state_file)
{
	struct kiwi_registry_entry e;
	kiwi_err err = { 0 };
	cr_assert_eq(kiwi_registry_parse(good, strlen(good), &e, &err), 0, "%s", err.msg);
	cr_assert_str_eq(e.id, "0123456789ab");
	cr_assert_eq(e.pid, 42);
	cr_assert_eq(e.supervisor_pid, 41);
	cr_assert_eq(e.uid, 999);
	cr_assert_str_eq(e.phase, "");
	cr_assert_str_eq(e.cgroup, "/kiwi.slice/kiwi-00");
	cr_assert_str_eq(e.command, "sleep 1000");
	cr_assert_eq(e.started_ns, 1795976437065493000LL);
}

Test(registry, round_trip_keeps_every_byte)
{
	struct kiwi_registry_entry e = { .id = "abcdefabcdef", .pid = 7, .supervisor_pid = 6, .uid = 0,
					 .started_ns = 5 };
	strcpy(e.phase, "test");
	strcpy(e.network, "egress");
	strcpy(e.command, "sh -c \"echo \\\"hi\\\"\n\ttab\" \xc3\xa9");
	struct kiwi_registry_entry back;
	kiwi_err err = { 0 };
	char *text = kiwi_registry_format(&e);
	cr_assert_not_null(text);
	cr_assert_eq(kiwi_registry_parse(text, strlen(text), &back, &err), 0, "%s: %s", text, err.msg);
	cr_assert_str_eq(back.command, e.command);
	cr_assert_str_eq(back.phase, "test");
	cr_assert_str_eq(back.cgroup, "");
	cr_assert_eq(back.pid, 7);
	free(text);
}

Test(registry, a_sealed_session_has_the_audit_now)
{
	struct kiwi_registry_entry e = { .id = "abcdefabcdef", .pid = 7, .supervisor_pid = 6, .started_ns = 5,
					 .session = true };
	strcpy(e.network, "egress");
	strcpy(e.command, "(session)");
	struct kiwi_registry_entry back;
	kiwi_err err = { 0 };
	cr_assert_str_eq(kiwi_registry_network_now(&e), "egress");
	e.sealed = true;
	char *text = kiwi_registry_format(&e);
	cr_assert_not_null(text);
	cr_assert_eq(kiwi_registry_parse(text, strlen(text), &back, &err), 0, "%s: %s", text, err.msg);
	/* The network pinned at create stays (exec and phase read it); what
	 * the session has now is the audit. */
	cr_assert(back.sealed);
	cr_assert_str_eq(back.network, "egress");
	cr_assert_str_eq(kiwi_registry_network_now(&back), "audit");
	free(text);
	/* Written before sessions could be sealed: not sealed. */
	cr_assert_eq(kiwi_registry_parse(good, strlen(good), &back, &err), 0, "%s", err.msg);
	cr_assert(!back.sealed);
}

Test(registry, refuses_what_is_not_an_entry)
{
	static const char *const bad[] = {
		"",
		"[]",
		"{\"version\":2,\"id\":\"0123456789ab\",\"pid\":42,\"supervisor_pid\":41,\"uid\":0,\"phase\":null,"
		"\"cgroup\":null,\"network\":\"none\",\"command\":\"x\",\"started_ns\":1}",
		/* no pid */
		"{\"version\":1,\"id\":\"0123456789ab\",\"supervisor_pid\":41,\"uid\":0,\"phase\":null,"
		"\"cgroup\":null,\"network\":\"none\",\"command\":\"x\",\"started_ns\":1}",
		/* pid 0, and a pid as a string */
		"{\"version\":1,\"id\":\"0123456789ab\",\"pid\":0,\"supervisor_pid\":41,\"uid\":0,\"phase\":null,"
		"\"cgroup\":null,\"network\":\"none\",\"command\":\"x\",\"started_ns\":1}",
		"{\"version\":1,\"id\":\"0123456789ab\",\"pid\":\"42\",\"supervisor_pid\":41,\"uid\":0,\"phase\":null,"
		"\"cgroup\":null,\"network\":\"none\",\"command\":\"x\",\"started_ns\":1}",
		/* an id that could name a path */
		"{\"version\":1,\"id\":\"../../etc/x\",\"pid\":42,\"supervisor_pid\":41,\"uid\":0,\"phase\":null,"
		"\"cgroup\":null,\"network\":\"none\",\"command\":\"x\",\"started_ns\":1}",
		/* a network name longer than its field */
		"{\"version\":1,\"id\":\"0123456789ab\",\"pid\":42,\"supervisor_pid\":41,\"uid\":0,\"phase\":null,"
		"\"cgroup\":null,\"network\":\"egress-egress-egress\",\"command\":\"x\",\"started_ns\":1}",
		/* sealed not a boolean */
		"{\"version\":1,\"id\":\"0123456789ab\",\"pid\":42,\"supervisor_pid\":41,\"uid\":0,\"phase\":null,"
		"\"cgroup\":null,\"network\":\"egress\",\"command\":\"x\",\"started_ns\":1,\"sealed\":1}",
		/* duplicate keys */
		"{\"version\":1,\"version\":1,\"id\":\"0123456789ab\",\"pid\":42,\"supervisor_pid\":41,\"uid\":0,"
		"\"phase\":null,\"cgroup\":null,\"network\":\"none\",\"command\":\"x\",\"started_ns\":1}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kiwi_registry_entry e;
		kiwi_err err = { 0 };
		cr_assert_eq(kiwi_registry_parse(bad[i], strlen(bad[i]), &e, &err), -1, "accepted: %s", bad[i]);
		cr_assert(err.msg[0], "no message for: %s", bad[i]);
	}
}

Test(registry, signals_kill_takes)
{
	cr_assert(kiwi_registry_signal_ok(15) && kiwi_registry_signal_ok(9) && kiwi_registry_signal_ok(2));
	cr_assert(!kiwi_registry_signal_ok(19) && !kiwi_registry_signal_ok(0) && !kiwi_registry_signal_ok(64));
}

Test(registry, command_keeps_utf8_and_replaces_what_is_not)
{
	struct kiwi_registry_entry e = { 0 };
	char *argv[] = { "sh", "-c", "echo \xc3\xa9t\xc3\xa9", "\xffx\xc3y\xed\xa0\x80z", NULL };
	kiwi_registry_set_command(&e, argv);
	cr_assert_str_eq(e.command, "sh -c echo \xc3\xa9t\xc3\xa9 ?x?y???z");
	char *text = kiwi_registry_format(&e);
	cr_assert(text && strstr(text, "?x?y???z"), "%s", text);
	free(text);
	/* cut at the field's size, never in the middle of a character */
	char longer[600];
	memset(longer, 'a', sizeof(longer));
	memcpy(longer + 254, "\xc3\xa9", 2);
	longer[sizeof(longer) - 1] = '\0';
	char *one[] = { longer, NULL };
	kiwi_registry_set_command(&e, one);
	cr_assert_eq(strlen(e.command), 255);
	cr_assert_eq(e.command[254], '?');
}
