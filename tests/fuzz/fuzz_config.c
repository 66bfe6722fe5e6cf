/* tests/fuzz/fuzz_config.c: libFuzzer target for the YAML config loader (common/core/config.c, with verl's key rules
 * of config_verl.c) on arbitrary file bytes: YAML syntax, anchors, nesting, every key's types and ranges, verl's
 * spellings and nulls. A file that loads must print (config_print_yaml) to text that loads back to the same run keys
 * and local keys: the coordinator sends that text to every worker. Inputs over 64 KiB are skipped.
 * Not here: expected values (tests/unit/test_config.c, test_config_verl.c). */
// fuzz-sources: common/core/config.c common/core/config_check.c common/core/config_verl.c common/core/err.c common/core/log.c common/core/fsutil.c common/core/yaml_doc.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"

/* libfyaml 0.7.12 (Debian) loses a 2 KiB buffer of its own when a document fails to build with a diag that collects
 * the errors (a file of quoted scalars ending in a stray ':'; the leak's frames are all inside libfyaml): not this
 * project's, so LeakSanitizer is told to skip what libfyaml allocated. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfyaml.so\n"; }

static void check(int cond) {
    if (!cond) abort();
}

/* data as a file (a memfd) loaded into a fresh config: its return code. */
static int load(const void *data, size_t size, Config *c, char err[ERR_LEN]) {
    config_defaults(c);
    int fd = memfd_create("cfg", 0);
    if (fd < 0) return -1;
    int rc = -1;
    if (!size || write(fd, data, size) == (ssize_t)size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        rc = config_load_file(c, path, err);
    }
    close(fd);
    return rc;
}

static char *printed(const Config *c, size_t *n) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    config_print_yaml(c, f);
    fclose(f);
    return buf;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    log_init("fuzz", LL_ERROR);                      /* warnings for verl keys would flood the output */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (64 << 10)) return 0;
    Config c, back;
    char err[ERR_LEN];
    if (load(data, size, &c, err) == 0) {
        size_t n;
        char *text = printed(&c, &n);
        if (load(text, n, &back, err) != 0) {
            fprintf(stderr, "the printed config does not load back: %s\n%s\n", err, text);
            abort();
        }
        char *a = config_run_keys(&c, false, NULL), *b = config_run_keys(&back, false, NULL);
        size_t n2;
        char *text2 = printed(&back, &n2);
        check(!strcmp(a, b) && n2 == n && !memcmp(text, text2, n));
        xfree(a);
        xfree(b);
        free(text);
        free(text2);
        config_free(&back);
        (void)config_validate(&c, err);
    }
    config_free(&c);
    return 0;
}
