/* lib/core: building cJSON trees with every allocation checked. cJSON reports a failed add only through
 * its return value, and cJSON_AddItemToObject / cJSON_AddItemToArray leave an item they could not attach
 * to the caller. These helpers attach or delete every item they are given, accept a NULL parent (a
 * container whose creation failed) and clear *ok on the first failure, so a builder runs straight
 * through and checks once, in hz_json_finish. Internal. */
#ifndef HZ_CORE_JSON_H
#define HZ_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* Adds `item` under `key` to the object `obj` and returns it. `item` NULL (its creation failed), `obj`
 * NULL or a failed add: deletes item, sets *ok = 0 and returns NULL. */
cJSON *hz_json_add(cJSON *obj, const char *key, cJSON *item, int *ok);
/* The same for appending `item` to the array `arr`. */
cJSON *hz_json_push(cJSON *arr, cJSON *item, int *ok);

static inline cJSON *hz_json_num(cJSON *obj, const char *key, double v, int *ok) {
    return hz_json_add(obj, key, cJSON_CreateNumber(v), ok);
}
/* A NULL `s` is written as JSON null (not an allocation failure). */
/* A count or byte size (exact below 2^53, as JSON numbers are read). */
static inline cJSON *hz_json_u64(cJSON *obj, const char *key, uint64_t v, int *ok) {
    return hz_json_add(obj, key, cJSON_CreateNumber((double)v), ok);
}
static inline cJSON *hz_json_str(cJSON *obj, const char *key, const char *s, int *ok) {
    return hz_json_add(obj, key, s ? cJSON_CreateString(s) : cJSON_CreateNull(), ok);
}
static inline cJSON *hz_json_bool(cJSON *obj, const char *key, int v, int *ok) {
    return hz_json_add(obj, key, cJSON_CreateBool(v), ok);
}
static inline cJSON *hz_json_null(cJSON *obj, const char *key, int *ok) {
    return hz_json_add(obj, key, cJSON_CreateNull(), ok);
}
static inline cJSON *hz_json_obj(cJSON *obj, const char *key, int *ok) {
    return hz_json_add(obj, key, cJSON_CreateObject(), ok);
}
static inline cJSON *hz_json_arr(cJSON *obj, const char *key, int *ok) {
    return hz_json_add(obj, key, cJSON_CreateArray(), ok);
}

/* The text of `item` (NULL: NULL) as a malloc'd string, freed with free / hz_free whatever hooks cJSON
 * has; NULL when an allocation failed. Sets no error message. */
char *hz_json_print(const cJSON *item, int formatted);
/* Deletes `root` (NULL allowed) and returns its unformatted text (formatted when `formatted`) as a
 * malloc'd string that the caller frees with free / hz_free whatever hooks cJSON has; NULL when !ok,
 * root is NULL or an allocation failed. Sets no error message. */
char *hz_json_finish(cJSON *root, int ok, int formatted);

#endif
