/* Unit tests of the address set (ptrset.c): adds, lookups and removals checked against a plain array
 * model through random sequences that grow the table and remove entries in the middle of probe chains
 * (keys chosen to collide, as allocations 4 KB apart do in the low bits). */
#include <stdlib.h>

#include "check.h"
#include "ptrset.h"

#define MODEL 4096

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(void)
{
    ag_ptrset_t s = {0};
    CHECK(!ag_ptrset_has(&s, 0x1000));
    CHECK(ag_ptrset_remove(&s, 0x1000) == 0);
    CHECK(ag_ptrset_add(&s, 0x1000) == 0);
    CHECK(ag_ptrset_add(&s, 0x1000) == 0); /* twice: one entry */
    CHECK(s.n == 1);
    CHECK(ag_ptrset_has(&s, 0x1000));
    CHECK(!ag_ptrset_has(&s, 0)); /* 0 marks an empty slot: never a member */
    CHECK(ag_ptrset_remove(&s, 0x1000) == 1);
    CHECK(ag_ptrset_remove(&s, 0x1000) == 0); /* a double free is told apart */
    CHECK(s.n == 0);

    /* random adds and removes against a model; keys from a small pool of page-aligned addresses */
    static unsigned char in[MODEL];
    long wrong = 0, members = 0;
    for (long step = 0; step < 400000; step++) {
        uint64_t k = (uint64_t)(next() % MODEL), key = 0x7f0000000000ULL + (k << 12);
        int op = (int)(next() % 3);
        if (op == 0) {
            wrong += ag_ptrset_add(&s, key) != 0;
            members += !in[k];
            in[k] = 1;
        } else if (op == 1) {
            wrong += ag_ptrset_remove(&s, key) != in[k];
            members -= in[k];
            in[k] = 0;
        } else {
            wrong += ag_ptrset_has(&s, key) != in[k];
        }
        if (step % 50000 == 0)
            for (uint64_t j = 0; j < MODEL; j++)
                wrong += ag_ptrset_has(&s, 0x7f0000000000ULL + (j << 12)) != in[j];
    }
    CHECK(wrong == 0);
    CHECK((long)s.n == members);
    CHECK(2 * s.n <= s.cap);
    for (uint64_t j = 0; j < MODEL; j++)
        if (in[j])
            CHECK(ag_ptrset_remove(&s, 0x7f0000000000ULL + (j << 12)) == 1);
    CHECK(s.n == 0);
    for (size_t i = 0; i < s.cap; i++)
        wrong += s.slots[i] != 0;
    CHECK(wrong == 0);
    ag_ptrset_free(&s);
    return CHECK_DONE();
}
