/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kiwi/cleanup.h"
#include "kiwi/json.h"

static kiwi_json *parse(const char *s, kiwi_err *e)
{
	return kiwi_json_parse(s, strlen(s), e);
}

Test(json, walks_a_tree)
{
	kiwi_err e = { 0 };
	_cleanup_json_ kiwi_json *j = parse("{\"a\": [1, 2.5, \"x\", true, null], \"b\": {\"c\": -3}}", &e);
	cr_assert_not_null(j, "%s", e.msg);
	cr_assert_eq(kiwi_json_type_of(j), KIWI_JSON_OBJECT);
	kiwi_json *a = kiwi_json_get(j, "a");
	cr_assert_eq(kiwi_json_len(a), 5);
	long long i;
	double d;
	bool b;
	cr_assert(kiwi_json_int(kiwi_json_at(a, 0), &i) && i == 1);
	cr_assert_not(kiwi_json_int(kiwi_json_at(a, 1), &i), "2.5 is not an integer");
	cr_assert(kiwi_json_double(kiwi_json_at(a, 1), &d) && d == 2.5);
	cr_assert_str_eq(kiwi_json_string(kiwi_json_at(a, 2)), "x");
	cr_assert(kiwi_json_bool(kiwi_json_at(a, 3), &b) && b);
	cr_assert_eq(kiwi_json_type_of(kiwi_json_at(a, 4)), KIWI_JSON_NULL);
	cr_assert_null(kiwi_json_at(a, 5));
	cr_assert_str_eq(kiwi_json_key_at(j, 1), "b");
	cr_assert(kiwi_json_int(kiwi_json_get(kiwi_json_get(j, "b"), "c"), &i) && i == -3);
	cr_assert_null(kiwi_json_get(j, "missing"));
	cr_assert_null(kiwi_json_get(a, "a"), "arrays have no keys");
	cr_assert_null(kiwi_json_string(kiwi_json_at(a, 0)));
}

Test(json, rejects_malformed_input)
{
	const char *bad[] = { "", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "nul", "{\"a\":1}}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kiwi_err e = { 0 };
		cr_assert_null(parse(bad[i], &e), "accepted `%s`", bad[i]);
		cr_assert_str_eq(e.step, "json");
		cr_assert_eq(e.errnum, EINVAL);
	}
}

Test(json, rejects_duplicate_keys_at_any_depth)
{
	kiwi_err e = { 0 };
	cr_assert_null(parse("{\"a\":1,\"a\":2}", &e));
	cr_assert(strstr(e.msg, "repeats a key"));
	cr_assert_null(parse("[{\"x\":{\"k\":1,\"k\":1}}]", &e));
	_cleanup_json_ kiwi_json *ok = parse("{\"a\":{\"k\":1},\"b\":{\"k\":1}}", &e);
	cr_assert_not_null(ok, "the same key in two objects is fine");
}

Test(json, rejects_embedded_nul)
{
	kiwi_err e = { 0 };
	cr_assert_null(kiwi_json_parse("{\"a\":\"x\0y\"}", 11, &e));
	cr_assert(strstr(e.msg, "NUL"));
}

Test(json, parse_file_enforces_size_and_names_the_file)
{
	char path[] = "/tmp/kiwi-test-json-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "{\"k\": \"v\"}", 10), 10);
	close(fd);
	kiwi_err e = { 0 };
	kiwi_json *j = kiwi_json_parse_file(path, 100, &e);
	cr_assert_not_null(j);
	kiwi_json_free(j);
	cr_assert_null(kiwi_json_parse_file(path, 5, &e));
	cr_assert_eq(e.errnum, EFBIG);
	unlink(path);
	cr_assert_null(kiwi_json_parse_file(path, 100, &e));
	cr_assert_eq(e.errnum, ENOENT);
	cr_assert(strstr(e.msg, path));
}

Test(json, writer_round_trips)
{
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "s");
	kiwi_jw_string(w, "a\"b\n");
	kiwi_jw_key(w, "n");
	kiwi_jw_string(w, NULL);
	kiwi_jw_key(w, "i");
	kiwi_jw_int(w, -42);
	kiwi_jw_key(w, "f");
	kiwi_jw_fixed(w, 1.2345, 3);
	kiwi_jw_key(w, "bad");
	kiwi_jw_string(w, "\xff\xfe");
	kiwi_jw_key(w, "arr");
	kiwi_jw_open_array(w);
	kiwi_jw_bool(w, false);
	kiwi_jw_null(w);
	kiwi_jw_close_array(w);
	kiwi_jw_close_object(w);
	size_t len;
	const char *text = kiwi_jw_text(w, &len);
	cr_assert(strstr(text, "\"f\":1.234") || strstr(text, "\"f\":1.235"), "%s", text);
	kiwi_err e = { 0 };
	_cleanup_json_ kiwi_json *j = kiwi_json_parse(text, len, &e);
	cr_assert_not_null(j, "writer produced invalid JSON: %s (%s)", text, e.msg);
	cr_assert_str_eq(kiwi_json_string(kiwi_json_get(j, "s")), "a\"b\n");
	cr_assert_eq(kiwi_json_type_of(kiwi_json_get(j, "n")), KIWI_JSON_NULL);
	cr_assert_str_eq(kiwi_json_string(kiwi_json_get(j, "bad")), "\xef\xbf\xbd");
	cr_assert_eq(kiwi_json_len(kiwi_json_get(j, "arr")), 2);
}

Test(json, value_writes_a_tree_back_exactly)
{
	const char *text = "{\"a\":[1,2.50,-3e2,\"x\",true,false,null],\"b\":{}}";
	kiwi_err e = { 0 };
	_cleanup_json_ kiwi_json *j = kiwi_json_parse(text, strlen(text), &e);
	cr_assert_not_null(j);
	_cleanup_jw_ kiwi_json_writer *w = kiwi_jw_new(false);
	kiwi_jw_value(w, j);
	size_t len;
	const char *out = kiwi_jw_text(w, &len);
	cr_assert_str_eq(out, text, "numbers must keep their text: %s", out);
}

Test(json, refuses_deep_nesting_but_not_brackets_in_strings)
{
	char deep[2 * (KIWI_JSON_MAX_DEPTH + 1) + 1];
	memset(deep, '[', KIWI_JSON_MAX_DEPTH + 1);
	memset(deep + KIWI_JSON_MAX_DEPTH + 1, ']', KIWI_JSON_MAX_DEPTH + 1);
	deep[sizeof(deep) - 1] = '\0';
	kiwi_err e = { 0 };
	cr_assert_null(kiwi_json_parse(deep, strlen(deep), &e));
	cr_assert(strstr(e.msg, "nesting"), "%s", e.msg);
	_cleanup_json_ kiwi_json *ok = kiwi_json_parse(deep + 1, strlen(deep) - 2, &e);
	cr_assert_not_null(ok, "%d levels are allowed", KIWI_JSON_MAX_DEPTH);
	const char *s = "{\"k\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"\"}";
	_cleanup_json_ kiwi_json *str = kiwi_json_parse(s, strlen(s), &e);
	cr_assert_not_null(str, "%s", e.msg);
}
