/* A full disk on demand, for the fault tests (tests/integration/test_faults_files_and_workers.py): preloaded (LD_PRELOAD), it lets the
 * first $ENOSPC_SHIM_AFTER writes to regular files through and fails every later one with
 * ENOSPC, as a disk that fills and stays full. Writes to pipes and terminals (stderr) pass, so
 * the error line still reaches the test. Built by the test with `gcc -shared -fPIC ... -ldl`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static long seen = 0;

static int full(int fd) {
    struct stat st;
    const char *after = getenv("ENOSPC_SHIM_AFTER");
    if (after == NULL || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if (__atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST) <= atol(after)) return 0;
    errno = ENOSPC;
    return 1;
}

ssize_t write(int fd, const void *buf, size_t n) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = dlsym(RTLD_NEXT, "write");
    return full(fd) ? -1 : real(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = dlsym(RTLD_NEXT, "pwrite");
    return full(fd) ? -1 : real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    static ssize_t (*real)(int, const void *, size_t, off64_t);
    if (!real) real = dlsym(RTLD_NEXT, "pwrite64");
    return full(fd) ? -1 : real(fd, buf, n, off);
}
