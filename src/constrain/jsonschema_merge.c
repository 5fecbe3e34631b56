/* jsonschema_merge.c — pointers resolved, schemas flattened and merged (contract in jsonschema_merge.h). */
#include "constrain/jsonschema_merge.h"

#include <stdlib.h>
#include <string.h>

#include "constrain/jsonschema_keywords.h"

#define JS_MAX_MERGE 32 /* $ref / allOf inside the schemas being merged */

json_t *js_resolve(jsctx *c, const char *ref, const char *path) {
    if (ref[0] != '#')
        return js_err(c, path, "unsupported $ref '%s': only pointers into this schema (#/...)", ref), NULL;
    json_t *t = c->doc;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') return js_err(c, path, "malformed $ref '%s'", ref), NULL;
        p++;
        sbuf seg = {0};
        for (; *p && *p != '/'; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
                sb_add(&seg, p[1] == '0' ? "~" : "/", 1);
                p++;
            } else if (*p == '%' && p[1] && p[2] && strchr("0123456789abcdefABCDEF", p[1]) &&
                       strchr("0123456789abcdefABCDEF", p[2])) {
                char hex[3] = {p[1], p[2], 0};
                char ch = (char)strtol(hex, NULL, 16);
                sb_add(&seg, &ch, 1);
                p += 2;
            } else {
                sb_add(&seg, p, 1);
            }
        }
        const char *key = seg.p ? seg.p : "";
        json_t *next = NULL;
        if (json_is_object(t)) {
            next = json_object_get(t, key);
        } else if (json_is_array(t)) {
            char *end;
            unsigned long i = strtoul(key, &end, 10);
            if (*key && !*end) next = json_array_get(t, i);
        }
        bool oom = seg.oom;
        free(seg.p);
        if (oom) return js_oom(c), NULL;
        if (!next) return js_err(c, path, "$ref '%s' points to nothing in the schema", ref), NULL;
        t = next;
    }
    return t;
}

json_t *js_flatten(jsctx *c, json_t *s, const char *path) {
    if (!json_is_object(s)) return json_incref(s);
    if (++c->merge_depth > JS_MAX_MERGE) {
        c->merge_depth--;
        return js_err(c, path, "$ref or allOf nested deeper than %d while merging schemas", JS_MAX_MERGE), NULL;
    }
    json_t *out = NULL;
    json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf");
    if (ref) {
        if (!json_is_string(ref)) {
            js_err(c, path, "malformed JSON Schema keyword '$ref': expected a string");
        } else {
            json_t *target = js_resolve(c, json_string_value(ref), path);
            json_t *rest = target ? js_without(s, "$ref") : NULL;
            json_t *ft = rest ? js_flatten(c, target, path) : NULL;
            json_t *fr = ft ? js_flatten(c, rest, path) : NULL;
            out = fr ? js_merge(c, ft, fr, path) : NULL;
            json_decref(rest);
            json_decref(ft);
            json_decref(fr);
        }
    } else if (all) {
        if (!json_is_array(all) || !json_array_size(all)) {
            js_err(c, path, "malformed JSON Schema keyword 'allOf': expected a non-empty array");
        } else {
            out = js_without(s, "allOf");
            size_t i;
            json_t *m;
            json_array_foreach(all, i, m) {
                json_t *fm = out ? js_flatten(c, m, path) : NULL;
                json_t *next = fm ? js_merge(c, out, fm, path) : NULL;
                json_decref(fm);
                json_decref(out);
                out = next;
            }
        }
    } else {
        out = json_incref(s);
    }
    c->merge_depth--;
    if (!out && !c->failed) js_oom(c);
    return out;
}

static json_t *all_of(json_t *x, json_t *y) { return json_pack("{s:[OO]}", "allOf", x, y); }

json_t *js_merge(jsctx *c, json_t *a, json_t *b, const char *path) {
    if (json_is_true(a) || (json_is_object(a) && !json_object_size(a))) return json_incref(b);
    if (json_is_true(b) || (json_is_object(b) && !json_object_size(b))) return json_incref(a);
    if (!json_is_object(a) || !json_is_object(b))
        return js_err(c, path, "allOf: a member matches nothing (false) or is not a schema"), NULL;
    json_t *fa = js_flatten(c, a, path), *fb = fa ? js_flatten(c, b, path) : NULL;
    json_t *out = fb ? json_copy(fa) : NULL;
    if (!out) goto done;
    const char *k;
    json_t *vb;
    json_object_foreach(fb, k, vb) {
        json_t *va = json_object_get(out, k), *v = NULL;
        if (!va) {
            json_object_set(out, k, vb);
            continue;
        }
        if (strcmp(k, "type") == 0) {
            unsigned ta = js_type_set(va), tb = js_type_set(vb), t = ta & tb;
            if ((ta & T_INTEGER && tb & T_NUMBER) || (tb & T_INTEGER && ta & T_NUMBER)) t |= T_INTEGER;
            if (!t) {
                js_err(c, path, "allOf: no value has both of the types asked for ('type')");
                goto fail;
            }
            v = json_array();
            for (unsigned i = 0; i < 7 && v; i++)
                if (t & 1u << i) json_array_append_new(v, json_string(js_type_names[i]));
        } else if (strcmp(k, "properties") == 0 && json_is_object(va) && json_is_object(vb)) {
            v = json_copy(va);
            const char *pk;
            json_t *pv;
            json_object_foreach(vb, pk, pv) {
                json_t *prev = json_object_get(v, pk);
                if (prev) json_object_set_new(v, pk, all_of(prev, pv));
                else json_object_set(v, pk, pv);
            }
        } else if (strcmp(k, "required") == 0 && json_is_array(va) && json_is_array(vb)) {
            v = json_copy(va);
            size_t i, j;
            json_t *x, *y;
            json_array_foreach(vb, i, x) {
                bool dup = false;
                json_array_foreach(va, j, y) dup = dup || json_equal(x, y);
                if (!dup) json_array_append(v, x);
            }
        } else if (strcmp(k, "additionalProperties") == 0 || strcmp(k, "additionalItems") == 0 ||
                   strcmp(k, "items") == 0) {
            if (json_is_array(va) || json_is_array(vb)) {
                if (!json_equal(va, vb)) {
                    js_err(c, path, "allOf: members with different '%s' arrays are not supported", k);
                    goto fail;
                }
                v = json_incref(va);
            } else if (json_is_false(va) || json_is_false(vb)) {
                v = json_false();
            } else {
                v = all_of(va, vb);
            }
        } else if (strcmp(k, "minimum") == 0 || strcmp(k, "minLength") == 0 || strcmp(k, "minItems") == 0 ||
                   strcmp(k, "minProperties") == 0 ||
                   (strcmp(k, "exclusiveMinimum") == 0 && json_is_number(va) && json_is_number(vb))) {
            v = json_incref(json_number_value(va) >= json_number_value(vb) ? va : vb);
        } else if (strcmp(k, "maximum") == 0 || strcmp(k, "maxLength") == 0 || strcmp(k, "maxItems") == 0 ||
                   strcmp(k, "maxProperties") == 0 ||
                   (strcmp(k, "exclusiveMaximum") == 0 && json_is_number(va) && json_is_number(vb))) {
            v = json_incref(json_number_value(va) <= json_number_value(vb) ? va : vb);
        } else if (strcmp(k, "enum") == 0 && json_is_array(va) && json_is_array(vb)) {
            v = json_array();
            size_t i, j;
            json_t *x, *y;
            json_array_foreach(va, i, x) {
                bool both = false;
                json_array_foreach(vb, j, y) both = both || json_equal(x, y);
                if (both && v) json_array_append(v, x);
            }
        } else if (strcmp(k, "anyOf") == 0 || strcmp(k, "oneOf") == 0) {
            js_err(c, path, "allOf: two members with '%s' are not supported", k);
            goto fail;
        } else if (js_in_list(js_constraints, k) && !json_equal(va, vb)) {
            js_err(c, path, "allOf: members disagree on '%s'", k);
            goto fail;
        } else {
            continue; /* equal, or an annotation: the first one's */
        }
        if (!v || json_object_set_new(out, k, v)) {
            js_oom(c);
            goto fail;
        }
    }
    goto done;
fail:
    json_decref(out);
    out = NULL;
done:
    json_decref(fa);
    json_decref(fb);
    return out;
}
