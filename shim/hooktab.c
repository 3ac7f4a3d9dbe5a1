/* Lookup tables for hooked entry points: names and kinds generated from hooks.def, and small
 * open-addressing tables from an ABI name, an API family name or a real driver address to the hook id.
 * Pure C on plain data, so the unit tests use it without a driver.
 * Locking: ag_hooktab_init runs once in the constructor; ag_hooktab_add_real only while binding
 * (under core.c's pthread_once, before ag_bound is released). Lookups are read-only after that. */
#define _GNU_SOURCE /* clock_gettime (internal.h, fakecuda_prog.h) under -std=c11 */
#include <string.h>

#include "internal.h"

const char *const ag_hook_names[AG_ID_COUNT] = {
#define AG_HOOK(kind, name, params, args) #name,
#include "hooks.def"
#undef AG_HOOK
};

const unsigned char ag_hook_kinds[AG_ID_COUNT] = {
#define AG_HOOK(kind, name, params, args) AG_KIND_##kind,
#include "hooks.def"
#undef AG_HOOK
};


/* Open-addressing tables: hooked ABI name -> id, API family name -> present, real address -> id.
 * Sized to stay under half full. */
#define AG_TABLE_SLOTS 512
static short name_slots[AG_TABLE_SLOTS];   /* id + 1, 0 = empty */
static short family_slots[AG_TABLE_SLOTS]; /* id + 1 of one member */
static short real_slots[AG_TABLE_SLOTS];
static const void *real_of[AG_ID_COUNT];

_Static_assert(AG_ID_COUNT * 2 < AG_TABLE_SLOTS, "grow AG_TABLE_SLOTS");

static uint32_t hash_bytes(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static uint32_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* Length of the family part of an ABI name: without "_ptsz"/"_ptds" and a trailing "_v<digits>". */
static size_t family_len(const char *name)
{
    size_t len = strlen(name);
    if (len > 5 && (strcmp(name + len - 5, "_ptsz") == 0 || strcmp(name + len - 5, "_ptds") == 0))
        len -= 5;
    size_t i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i < len && i >= 2 && name[i - 1] == 'v' && name[i - 2] == '_')
        len = i - 2;
    return len;
}

unsigned char ag_hook_per_thread[AG_ID_COUNT];
unsigned char ag_bar_class[AG_ID_COUNT];

void ag_hooktab_init(void)
{
    for (int id = 0; id < AG_ID_COUNT; id++) {
        const char *n = ag_hook_names[id];
        uint32_t h = hash_bytes(n, strlen(n)) % AG_TABLE_SLOTS;
        while (name_slots[h])
            h = (h + 1) % AG_TABLE_SLOTS;
        name_slots[h] = (short)(id + 1);

        size_t len = strlen(n);
        ag_hook_per_thread[id] =
            len > 5 && (strcmp(n + len - 5, "_ptsz") == 0 || strcmp(n + len - 5, "_ptds") == 0);
        unsigned k = ag_hook_kinds[id];
        ag_bar_class[id] = strstr(n, "Synchronize")            ? AG_BAR_SYNC
                           : strstr(n, "Query")                ? AG_BAR_QUERY
                           : k == AG_KIND_GRAPH || k == AG_KIND_CAPTURE ? AG_BAR_GRAPH
                                                                : AG_BAR_OTHER;

        size_t fl = family_len(n);
        h = hash_bytes(n, fl) % AG_TABLE_SLOTS;
        int dup = 0;
        for (; family_slots[h]; h = (h + 1) % AG_TABLE_SLOTS) {
            const char *m = ag_hook_names[family_slots[h] - 1];
            if (family_len(m) == fl && strncmp(m, n, fl) == 0) {
                dup = 1;
                break;
            }
        }
        if (!dup)
            family_slots[h] = (short)(id + 1);
    }
}

int ag_hook_by_name(const char *name)
{
    uint32_t h = hash_bytes(name, strlen(name)) % AG_TABLE_SLOTS;
    for (; name_slots[h]; h = (h + 1) % AG_TABLE_SLOTS)
        if (strcmp(ag_hook_names[name_slots[h] - 1], name) == 0)
            return name_slots[h] - 1;
    return -1;
}

int ag_hook_family_known(const char *symbol)
{
    size_t fl = family_len(symbol);
    uint32_t h = hash_bytes(symbol, fl) % AG_TABLE_SLOTS;
    for (; family_slots[h]; h = (h + 1) % AG_TABLE_SLOTS) {
        const char *m = ag_hook_names[family_slots[h] - 1];
        if (family_len(m) == fl && strncmp(m, symbol, fl) == 0)
            return 1;
    }
    return 0;
}

int ag_hook_by_real(const void *real)
{
    if (!real)
        return -1;
    for (uint32_t h = hash_ptr(real) % AG_TABLE_SLOTS; real_slots[h]; h = (h + 1) % AG_TABLE_SLOTS)
        if (real_of[real_slots[h] - 1] == real)
            return real_slots[h] - 1;
    return -1;
}

void ag_hooktab_add_real(ag_id_t id, void *real)
{
    real_of[id] = real;
    uint32_t s = hash_ptr(real) % AG_TABLE_SLOTS;
    while (real_slots[s])
        s = (s + 1) % AG_TABLE_SLOTS;
    real_slots[s] = (short)(id + 1);
}
