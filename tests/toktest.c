#include "toktest.h"

#include <stdarg.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

tok_vocab *tt_load_vocab(const char *path) {
    fkv_error err = {0};
    gguf_file *f = gguf_open(path, &err);
    if (!f) fail_msg("gguf_open %s: %s", path, err.msg);
    tok_vocab *v = tok_load(f, &err);
    if (!v) fail_msg("tok_load %s: %s", path, err.msg);
    gguf_close(f);
    return v;
}

int32_t *tt_encode(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special, int *n) {
    fkv_error err = {0};
    int total = tok_encode(v, text, len, add_bos, parse_special, NULL, 0, &err);
    if (total < 0) fail_msg("tok_encode: %s", err.msg);
    int32_t *ids = malloc(((size_t)total + 1) * sizeof *ids);
    assert_non_null(ids);
    assert_int_equal(tok_encode(v, text, len, add_bos, parse_special, ids, total, &err), total);
    *n = total;
    return ids;
}

char *tt_decode(const tok_vocab *v, const int32_t *ids, int n, int *len) {
    int total = tok_decode(v, ids, n, NULL, 0);
    assert_true(total >= 0);
    char *buf = malloc((size_t)total + 1);
    assert_non_null(buf);
    assert_int_equal(tok_decode(v, ids, n, buf, total + 1), total);
    assert_int_equal(buf[total], 0);
    *len = total;
    return buf;
}

void tt_print_ids(const char *label, const int32_t *ids, int n) {
    print_error("%s:", label);
    for (int i = 0; i < n; i++) print_error(" %d", (int)ids[i]);
    print_error("\n");
}

static void print_bytes(const char *label, const char *s, size_t n) {
    print_error("%s (%zu bytes):", label, n);
    for (size_t i = 0; i < n && i < 200; i++) print_error(" %02x", (unsigned char)s[i]);
    print_error("\n");
}

void tt_assert_ids(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                   const int32_t *want, int n_want) {
    int n;
    int32_t *got = tt_encode(v, text, len, add_bos, parse_special, &n);
    if (n != n_want || memcmp(got, want, (size_t)n * sizeof *got) != 0) {
        print_error("text (%zu bytes): '%.*s'\n", len, (int)len, text);
        tt_print_ids("want", want, n_want);
        tt_print_ids("got ", got, n);
        fail();
    }
    free(got);
}

void tt_assert_round_trip(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special) {
    int n, dlen;
    int32_t *ids = tt_encode(v, text, len, add_bos, parse_special, &n);
    char *back = tt_decode(v, ids, n, &dlen);
    if ((size_t)dlen != len || memcmp(back, text, len) != 0) {
        print_bytes("text", text, len);
        print_bytes("back", back, (size_t)dlen);
        tt_print_ids("ids", ids, n);
        fail();
    }
    free(ids);
    free(back);
}

void tt_assert_cap_protocol(const tok_vocab *v, int32_t bos) {
    const char *text = "Hello, world! How are you today?";
    fkv_error err = {0};
    int n;
    int32_t *full = tt_encode(v, text, strlen(text), true, false, &n);
    assert_true(n > 4);
    assert_int_equal(tok_encode(v, text, strlen(text), true, false, NULL, 0, &err), n);
    int32_t part[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    assert_int_equal(tok_encode(v, text, strlen(text), true, false, part, 3, &err), n);
    assert_memory_equal(part, full, 3 * sizeof *part);
    for (int i = 3; i < 8; i++) assert_int_equal(part[i], -7);
    assert_int_equal(tok_encode(v, "", 0, false, false, part, 8, &err), 0);
    assert_int_equal(tok_encode(v, "", 0, true, false, part, 8, &err), 1);
    assert_int_equal(part[0], bos);
    free(full);
}
