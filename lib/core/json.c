/* lib/core/json.h: checked cJSON building. */
#include "core/json.h"

#include <stdlib.h>
#include <string.h>

cJSON *hz_json_add(cJSON *obj, const char *key, cJSON *item, int *ok) {
    if (obj && item && cJSON_AddItemToObject(obj, key, item)) return item;
    cJSON_Delete(item);
    *ok = 0;
    return NULL;
}

cJSON *hz_json_push(cJSON *arr, cJSON *item, int *ok) {
    if (arr && item && cJSON_AddItemToArray(arr, item)) return item;
    cJSON_Delete(item);
    *ok = 0;
    return NULL;
}

char *hz_json_print(const cJSON *item, int formatted) {
    char *text = item ? (formatted ? cJSON_Print(item) : cJSON_PrintUnformatted(item)) : NULL;
    if (!text) return NULL;
    /* cJSON allocates through its hooks (cJSON_InitHooks, process-wide): hand over a plain malloc copy */
    size_t n = strlen(text) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, text, n);
    cJSON_free(text);
    return copy;
}

char *hz_json_finish(cJSON *root, int ok, int formatted) {
    char *text = ok ? hz_json_print(root, formatted) : NULL;
    cJSON_Delete(root);
    return text;
}
