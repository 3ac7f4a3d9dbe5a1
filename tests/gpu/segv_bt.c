/* A diagnostic preload (not a test): on SIGSEGV, SIGBUS, SIGABRT or SIGFPE, writes to stderr the faulting
 * address, the thread, a backtrace and the process's executable mappings (to turn the addresses into
 * functions with addr2line against the same build), then dies of the signal as it would have.
 *   gcc -O1 -g -shared -fPIC -o segv_bt.so tests/gpu/segv_bt.c
 *   LD_PRELOAD="segv_bt.so build/lib/libautograph.so" program ... */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char alt[1 << 16];

static void put(const char *s)
{
    ssize_t w = write(2, s, strlen(s));
    (void)w;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char line[256];
    snprintf(line, sizeof line, "segv_bt: signal %d at address %p in thread %ld\n", sig, si->si_addr,
             (long)syscall(SYS_gettid));
    put(line);
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, 2);
    put("segv_bt: executable mappings:\n");
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd >= 0) {
        char buf[4096], acc[512];
        size_t a = 0;
        ssize_t r;
        while ((r = read(fd, buf, sizeof buf)) > 0)
            for (ssize_t i = 0; i < r; i++) {
                if (a < sizeof acc - 1)
                    acc[a++] = buf[i];
                if (buf[i] == '\n') {
                    acc[a] = '\0';
                    if (strstr(acc, " r-xp ") || strstr(acc, "r--p 00000000"))
                        put(acc);
                    a = 0;
                }
            }
        close(fd);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void segv_bt_init(void)
{
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
}
