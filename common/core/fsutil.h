/* common/core/fsutil.h: file-system helpers every service needs: create a directory tree, and write a file
 * atomically (temp file in the same directory, fsync, rename, fsync the directory) so a crash or a full disk
 * leaves either the old file or the new one, never a torn one (docs/design.md §7). */
#ifndef DAPO_FSUTIL_H
#define DAPO_FSUTIL_H
#include <stddef.h>
#include "core/err.h"

/* mkdir -p path (mode 0755). 0, or ERR_IO with the failing component and strerror in err. */
int fs_mkdir_p(const char *path, char err[ERR_LEN]);

/* Writes len bytes to path atomically. 0, or ERR_IO (the previous file, if any, is untouched; the temp file is
 * removed) with the reason, e.g. "No space left on device". */
int fs_write_atomic(const char *path, const void *data, size_t len, char err[ERR_LEN]);

/* Reads a whole file into a new xmalloc'd buffer (NUL-terminated; *len excludes the NUL). NULL with ERR_IO in
 * err when it cannot be read, or when it is larger than max_bytes. */
char *fs_read_all(const char *path, size_t max_bytes, size_t *len, char err[ERR_LEN]);

#endif
