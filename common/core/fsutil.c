/* common/core/fsutil.c: see fsutil.h. */
#include "core/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fs_mkdir_p(const char *path, char err[ERR_LEN]) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return err_set(err, ERR_INVAL, "path too long: %s", path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST) return err_set(err, ERR_IO, "cannot create %s: %s", buf, strerror(errno));
            struct stat st;
            if (stat(buf, &st) || !S_ISDIR(st.st_mode)) return err_set(err, ERR_IO, "%s exists and is not a directory", buf);
            *p = saved;
            if (!saved) break;
        }
    }
    return 0;
}

int fs_write_atomic(const char *path, const void *data, size_t len, char err[ERR_LEN]) {
    char tmp[4096], dir[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return err_set(err, ERR_INVAL, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(err, ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : ENOSPC;
            close(fd);
            unlink(tmp);
            return err_set(err, ERR_IO, "writing %s: %s (the previous file is kept)", path, strerror(e));
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) || close(fd)) {
        int e = errno;
        unlink(tmp);
        return err_set(err, ERR_IO, "flushing %s: %s (the previous file is kept)", path, strerror(e));
    }
    if (rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return err_set(err, ERR_IO, "renaming %s into place: %s", tmp, strerror(e));
    }
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int drc = dfd >= 0 && fsync(dfd) == 0 ? 0 : errno;   /* the rename is durable only once its directory is */
    if (dfd >= 0) close(dfd);
    if (drc && drc != EINVAL)   /* EINVAL: a file system without directory fsync; the file itself is synced */
        return err_set(err, ERR_IO, "%s is in place but its directory could not be synced: %s", path, strerror(drc));
    return 0;
}

char *fs_read_all(const char *path, size_t max_bytes, size_t *len, char err[ERR_LEN]) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set(err, ERR_IO, "cannot open %s: %s", path, strerror(errno)); return NULL; }
    size_t cap = 4096, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap >= max_bytes) { fclose(f); xfree(buf); err_set(err, ERR_TOO_BIG, "%s is larger than %zu bytes", path, max_bytes); return NULL; }
            cap = cap * 2 > max_bytes ? max_bytes : cap * 2;
            buf = xrealloc(buf, cap + 1);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { xfree(buf); err_set(err, ERR_IO, "reading %s failed", path); return NULL; }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}
