/* Unit tests of logging: stderr only with the 'autograph:' prefix, level filter, errno kept, repeated
 * messages capped, debug lines timed from ag_log_init. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log.h"

static int pipefd[2];

static size_t drain(char *buf, size_t len)
{
    ssize_t n = read(pipefd[0], buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    return n > 0 ? (size_t)n : 0;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

int main(void)
{
    char buf[8192];
    int saved_stderr = dup(2);
    CHECK(pipe(pipefd) == 0);
    fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    dup2(pipefd[1], 2);

    ag_log_init(AG_LOG_WARN);
    errno = 1234;
    ag_log(AG_LOG_WARN, "hello %d", 42);
    CHECK(errno == 1234);
    drain(buf, sizeof buf);
    CHECK(strcmp(buf, "autograph: warn: hello 42\n") == 0);

    ag_log(AG_LOG_INFO, "not shown");
    CHECK(drain(buf, sizeof buf) == 0);
    ag_log(AG_LOG_ERROR, "shown");
    drain(buf, sizeof buf);
    CHECK(strstr(buf, "autograph: error: shown") == buf);

    /* Long messages are cut, still one line. */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ag_log(AG_LOG_WARN, "%s", big);
    drain(buf, sizeof buf);
    CHECK(count_lines(buf) == 1);

    for (int i = 0; i < 20; i++)
        AG_LOG_CAPPED(AG_LOG_WARN, "repeated %d", i);
    drain(buf, sizeof buf);
    CHECK(count_lines(buf) == AG_LOG_CAP + 1);
    CHECK(strstr(buf, "suppressed") != NULL);
    CHECK(strstr(buf, "repeated 4") != NULL && strstr(buf, "repeated 5") == NULL);

    /* Debug (and trace) lines carry the milliseconds since ag_log_init, warnings do not. */
    ag_log_init(AG_LOG_DEBUG);
    CHECK(ag_log_t0_s() > 0.0);
    ag_log(AG_LOG_DEBUG, "timed %d", 7);
    drain(buf, sizeof buf);
    double ms = -1.0;
    char tail[64] = "";
    CHECK(sscanf(buf, "autograph: debug: [%lf ms] %63[^\n]", &ms, tail) == 2);
    CHECK(ms >= 0.0 && ms < 60000.0 && strcmp(tail, "timed 7") == 0);
    ag_log(AG_LOG_WARN, "plain");
    drain(buf, sizeof buf);
    CHECK(strcmp(buf, "autograph: warn: plain\n") == 0);

    dup2(saved_stderr, 2);
    return CHECK_DONE();
}
