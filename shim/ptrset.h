/* ptrset: a set of device addresses (open addressing, linear probing, deletion by backward shift), for
 * the engine's record of the stream-ordered allocations the program holds. Pure C: unit-tested on a CPU.
 * Locking: none of its own; the engine calls it under its lock. */
#ifndef AG_PTRSET_H
#define AG_PTRSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t *slots; /* 0: empty (no allocation starts at address 0) */
    size_t cap;      /* a power of two, or 0 before the first add */
    size_t n;
} ag_ptrset_t;

/* Adds key (nonzero): 0, or -ENOMEM (the set is unchanged). Adding a present key changes nothing. */
int ag_ptrset_add(ag_ptrset_t *s, uint64_t key);
/* 1 if key is in the set. */
int ag_ptrset_has(const ag_ptrset_t *s, uint64_t key);
/* Removes key: 1 if it was there, 0 if not. */
int ag_ptrset_remove(ag_ptrset_t *s, uint64_t key);
void ag_ptrset_free(ag_ptrset_t *s);

#endif
