/* tests/fuzz/fuzz_dataset.c: libFuzzer target for the JSONL dataset reader (common/io/dataset.c dataset_load) on
 * arbitrary file bytes — many lines, blank lines, CRLF, lines without a newline at the end, long lines — with the
 * tiny tokenizer (data/tokenizers/tiny) and options from byte 0 (max_prompt_length, filtering, truncation, malformed
 * lines skipped or fatal). Each item it keeps holds 1..max_prompt_length ids of the vocabulary (an overlong prompt
 * with truncation=error is ERR_TOO_BIG, never kept), its line is within the file, and the counts add up (items +
 * filtered <= non-blank lines <= lines). fuzz_tokenizer's mode 2 covers one line alone.
 * Not here: expected values (tests/unit/test_dataset.c). */
// fuzz-sources: common/tokenizer/tokenizer.c common/tokenizer/tokenizer_load.c common/tokenizer/tokenizer_bpe.c common/tokenizer/chat.c common/core/utf8.c common/io/dataset.c common/core/err.c common/core/log.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "io/dataset.h"

static Tokenizer *g_tok;

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    log_init("fuzz", LL_ERROR);
    char dir[4096], err[ERR_LEN];
    const char *root = getenv("DAPO_ROOT");
    snprintf(dir, sizeof dir, "%s/data/tokenizers/tiny", root && *root ? root : ".");
    g_tok = tokenizer_load(dir, err);
    if (!g_tok) { fprintf(stderr, "fuzz_dataset: %s\n", err); abort(); }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (256 << 10)) return 0;
    static const char *trunc[] = {"error", "left", "right", "middle"};
    DatasetOptions o;
    char err[ERR_LEN], path[64];
    int max_len = 1 + (data[0] & 0x3f);
    check(dataset_options_init(&o, max_len, data[0] & 0x40, trunc[(data[0] >> 4) & 3], "qwen3",
                               data[0] & 0x80 ? "error" : "skip", g_tok, err) == 0);
    int fd = memfd_create("ds", 0);
    if (fd < 0) return 0;
    if (size > 1 && write(fd, data + 1, size - 1) != (ssize_t)(size - 1)) { close(fd); return 0; }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    Dataset ds = {0};
    int rc = dataset_load(&ds, path, g_tok, &o, err);
    check(rc == 0 || rc == ERR_DECODE || rc == ERR_TOO_BIG);
    long lines = 1;
    for (size_t i = 1; i < size; i++) lines += data[i] == '\n';
    check(ds.n + ds.n_filtered <= ds.n_lines && (long)ds.n_lines <= lines);
    for (size_t i = 0; i < ds.n; i++) {
        const DatasetItem *it = &ds.items[i];
        check(it->n_ids >= 1 && it->n_ids <= max_len && it->n_ids <= it->n_ids_full);
        check(it->line >= 1 && it->line <= lines);
        for (int k = 0; k < it->n_ids; k++) check(it->ids[k] >= 0 && it->ids[k] < tokenizer_vocab_size(g_tok));
    }
    dataset_free(&ds);
    close(fd);
    return 0;
}
