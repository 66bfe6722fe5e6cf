/* common/core/embed.h: files embedded into a binary at build time (services/<svc>/static/... -> the array
 * `static_files_<svc>`, made by tools/embed_static.sh through the Makefile). */
#ifndef DAPO_EMBED_H
#define DAPO_EMBED_H
#include <stddef.h>
#include <string.h>

typedef struct {
    const char          *path;     /* "/index.html"; NULL ends the array */
    const unsigned char *data;
    size_t               len;
} EmbeddedFile;

/* The entry for path in files (terminated by a NULL path), or NULL. */
static inline const EmbeddedFile *embed_find(const EmbeddedFile *files, const char *path) {
    for (; files && files->path; files++)
        if (strcmp(files->path, path) == 0) return files;
    return NULL;
}
#endif
