/* jsonschema_keywords.c — keyword lists, types, counts (contract in jsonschema_keywords.h). */
#include "constrain/jsonschema_keywords.h"

#include <math.h>
#include <string.h>

#include "constrain/grammar_limits.h"

const char *const js_constraints[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "additionalItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "format", "pattern",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems", "minProperties",
    "maxProperties", NULL};

static const char *const js_unsupported[] = {
    "patternProperties", "propertyNames", "contains", "minContains", "maxContains", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "dependencies", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$recursiveRef", "contentSchema",
    NULL};

bool js_in_list(const char *const *list, const char *k) {
    for (; *list; list++)
        if (strcmp(*list, k) == 0) return true;
    return false;
}

/* A propertyNames schema the converter takes: true, {} or {"type": "string"}, which every key meets, or a list of
 * names (js_listed_names), as zod's z.record writes. */
static bool names_are_strings(json_t *v) {
    if (!js_has_constraints(v)) return !json_is_false(v);
    json_t *t = json_object_get(v, "type");
    return json_object_size(v) == 1 && json_is_string(t) && strcmp(json_string_value(t), "string") == 0;
}

json_t *js_listed_names(json_t *v) {
    json_t *en = json_object_get(v, "enum"), *t = json_object_get(v, "type");
    size_t extra = json_object_size(v) - (en != NULL) - (t != NULL), i;
    json_t *x;
    if (!json_is_array(en) || extra || (t && (!json_is_string(t) || strcmp(json_string_value(t), "string") != 0)))
        return NULL;
    json_array_foreach(en, i, x) if (!json_is_string(x)) return NULL;
    return en;
}

int js_check_keywords(jsctx *c, json_t *s, const char *path) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (!js_in_list(js_unsupported, k)) continue;
        if (strcmp(k, "propertyNames") == 0 && (names_are_strings(v) || js_listed_names(v))) continue;
        return js_err(c, path, "unsupported JSON Schema keyword '%s'", k);
    }
    return 0;
}

bool js_has_constraints(json_t *s) {
    if (!json_is_object(s)) return json_is_false(s);
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        (void)v;
        if (js_in_list(js_constraints, k) || js_in_list(js_unsupported, k)) return true;
    }
    return false;
}

json_t *js_without(json_t *s, const char *key) {
    json_t *o = json_copy(s);
    if (o) json_object_del(o, key);
    return o;
}

const char *const js_type_names[7] = {"null", "boolean", "object", "array", "number", "string", "integer"};

static unsigned type_bit(const char *t) {
    for (unsigned i = 0; i < 7; i++)
        if (strcmp(t, js_type_names[i]) == 0) return 1u << i;
    return 0;
}

int js_schema_types(jsctx *c, json_t *s, const char *path, unsigned *out) {
    json_t *t = json_object_get(s, "type");
    unsigned types = 0;
    if (json_is_string(t)) {
        types = type_bit(json_string_value(t));
        if (!types)
            return js_err(c, path, "malformed JSON Schema keyword 'type': unknown type '%s'", json_string_value(t));
    } else if (json_is_array(t) && json_array_size(t)) {
        size_t i;
        json_t *x;
        json_array_foreach(t, i, x) {
            unsigned b = json_is_string(x) ? type_bit(json_string_value(x)) : 0;
            if (!b) return js_err(c, path, "malformed JSON Schema keyword 'type': not a type name in the array");
            types |= b;
        }
    } else if (t) {
        return js_err(c, path, "malformed JSON Schema keyword 'type': expected a type name or an array of them");
    } else {
        static const struct {
            const char *key;
            unsigned type;
        } implied[] = {{"properties", T_OBJECT}, {"required", T_OBJECT}, {"additionalProperties", T_OBJECT},
                       {"items", T_ARRAY}, {"prefixItems", T_ARRAY}, {"additionalItems", T_ARRAY},
                       {"minItems", T_ARRAY}, {"maxItems", T_ARRAY}, {"minLength", T_STRING},
                       {"maxLength", T_STRING}, {"format", T_STRING}, {"pattern", T_STRING}, {"minimum", T_NUMBER},
                       {"maximum", T_NUMBER}, {"exclusiveMinimum", T_NUMBER}, {"exclusiveMaximum", T_NUMBER},
                       {"multipleOf", T_NUMBER}, {"uniqueItems", T_ARRAY}, {"minProperties", T_OBJECT},
                       {"maxProperties", T_OBJECT}};
        for (size_t i = 0; i < sizeof implied / sizeof *implied; i++)
            if (json_object_get(s, implied[i].key)) types |= implied[i].type;
        if (!types) types = T_ANY;
    }
    if ((types & T_NUMBER) && (types & T_INTEGER)) types &= ~(unsigned)T_INTEGER; /* number covers integer */
    *out = types;
    return 0;
}

/* A non-negative integer keyword (absent: def). */
static int count_keyword(jsctx *c, json_t *s, const char *key, const char *path, int64_t def, int64_t *out) {
    json_t *v = json_object_get(s, key);
    if (!v) {
        *out = def;
        return 0;
    }
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (d < 0 || d != floor(d))
        return js_err(c, path, "malformed JSON Schema keyword '%s': expected a non-negative integer", key);
    *out = d > (double)INT32_MAX ? INT32_MAX : (int64_t)d;
    return 0;
}

static int limit_repeat(jsctx *c, const char *key, int64_t v, const char *path) {
    if (v > GRAMMAR_MAX_REPEAT && v != INT32_MAX)
        return js_err(c, path, "unsupported JSON Schema keyword '%s': %lld is above the supported %d", key,
                      (long long)v, GRAMMAR_MAX_REPEAT);
    return 0;
}

int js_count_range(jsctx *c, json_t *s, const char *min_key, const char *max_key, const char *path, int64_t *min,
                   int64_t *max) {
    if (count_keyword(c, s, min_key, path, 0, min) || count_keyword(c, s, max_key, path, INT32_MAX, max) ||
        limit_repeat(c, min_key, *min, path) || limit_repeat(c, max_key, *max, path))
        return -1;
    return 0;
}

unsigned js_type_set(json_t *t) {
    if (json_is_string(t)) return type_bit(json_string_value(t));
    if (!json_is_array(t)) return T_ANY | T_INTEGER;
    unsigned types = 0;
    size_t i;
    json_t *x;
    json_array_foreach(t, i, x) types |= json_is_string(x) ? type_bit(json_string_value(x)) : 0;
    return types;
}

bool js_value_has_type(const json_t *v, unsigned types) {
    switch (json_typeof(v)) {
    case JSON_NULL: return types & T_NULL;
    case JSON_TRUE: case JSON_FALSE: return types & T_BOOLEAN;
    case JSON_OBJECT: return types & T_OBJECT;
    case JSON_ARRAY: return types & T_ARRAY;
    case JSON_STRING: return types & T_STRING;
    case JSON_INTEGER: return types & (T_NUMBER | T_INTEGER);
    case JSON_REAL: {
        double d = json_real_value(v);
        return (types & T_NUMBER) || ((types & T_INTEGER) && d == floor(d));
    }
    }
    return false;
}

bool js_ref_has_siblings(json_t *s) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        (void)v;
        if (strcmp(k, "$ref") != 0 && (js_in_list(js_constraints, k) || js_in_list(js_unsupported, k))) return true;
    }
    return false;
}
