/* Shared between route_prog.c and dlsym_old.c (the old-glibc dlsym route needs its own translation
 * unit for the .symver alias). */
#ifndef RP_ROUTE_PROG_H
#define RP_ROUTE_PROG_H

/* dlsym@GLIBC_2.2.5; NULL (and rp_have_dlsym_old() == 0) where that version does not exist. */
void *rp_dlsym_old(void *handle, const char *name);
int rp_have_dlsym_old(void);

#endif
