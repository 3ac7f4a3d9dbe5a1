/* ptrset: a set of device addresses for the engine (see ptrset.h). Kept at most half full, so that a
 * lookup stops after a few slots; removal shifts the entries after it back instead of leaving
 * tombstones, so a set that sees millions of adds and removes never needs rebuilding. */
#include "ptrset.h"

#include <errno.h>
#include <stdlib.h>

static size_t home(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static void put(uint64_t *slots, size_t cap, uint64_t key)
{
    size_t i = home(key, cap);
    while (slots[i] && slots[i] != key)
        i = (i + 1) & (cap - 1);
    slots[i] = key;
}

int ag_ptrset_add(ag_ptrset_t *s, uint64_t key)
{
    if (ag_ptrset_has(s, key))
        return 0;
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        uint64_t *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return -ENOMEM;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i])
                put(slots, cap, s->slots[i]);
        free(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    put(s->slots, s->cap, key);
    s->n++;
    return 0;
}

int ag_ptrset_has(const ag_ptrset_t *s, uint64_t key)
{
    if (!s->cap || !key)
        return 0;
    for (size_t i = home(key, s->cap); s->slots[i]; i = (i + 1) & (s->cap - 1))
        if (s->slots[i] == key)
            return 1;
    return 0;
}

int ag_ptrset_remove(ag_ptrset_t *s, uint64_t key)
{
    if (!s->cap || !key)
        return 0;
    size_t mask = s->cap - 1, i = home(key, s->cap);
    while (s->slots[i] != key) {
        if (!s->slots[i])
            return 0;
        i = (i + 1) & mask;
    }
    /* Backward shift: an entry after the hole moves into it unless its home lies cyclically in (hole, j]. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; s->slots[j]; j = (j + 1) & mask) {
        size_t h = home(s->slots[j], s->cap);
        int stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
        if (!stays) {
            s->slots[hole] = s->slots[j];
            hole = j;
        }
    }
    s->slots[hole] = 0;
    s->n--;
    return 1;
}

void ag_ptrset_free(ag_ptrset_t *s)
{
    free(s->slots);
    s->slots = NULL;
    s->cap = s->n = 0;
}
