/* common/io/dataset.h: prompt datasets in the verl / DAPO-Math-17k JSONL schema (docs/design.md "Datasets"):
 *   {"data_source": str, "prompt": [{"role", "content"}, ...], "ability": str,
 *    "reward_model": {"ground_truth": str|number, "style": str}, "extra_info": {"index": int, ...}}
 * Each prompt is rendered through the chat template with add_generation_prompt=True and tokenized; then
 * data.max_prompt_length applies as verl's RLHFDataset does (verl/utils/dataset/rl_dataset.py and
 * verl/utils/torch_functional.py postprocess_data):
 *   filter_overlong_prompts: prompts longer than max_prompt_length are dropped (counted);
 *   otherwise truncation = error (stop, naming file:line), left (keep the last L ids), right (keep the first L),
 *   middle (first L/2 and last L - L/2).
 * Malformed lines (bad JSON, missing/ill-typed prompt or ground truth) are reported as "file:line: reason"
 * and skipped (log_warn, counted) or fatal, per data.on_malformed. Blank lines are ignored.
 * This is the one prompt path of dapo-sft, the coordinator and dapo-generate.
 * Not here: shuffling and epochs (the coordinator's sampler), parquet (a conversion tool), multi-modal fields. */
#ifndef DAPO_DATASET_H
#define DAPO_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

typedef enum { DATA_TRUNC_ERROR = 0, DATA_TRUNC_LEFT, DATA_TRUNC_RIGHT, DATA_TRUNC_MIDDLE } DataTruncation;

typedef struct {
    int            max_prompt_length;   /* tokens (data.max_prompt_length); <= 0: no limit */
    bool           filter_overlong;     /* data.filter_overlong_prompts */
    DataTruncation truncation;          /* data.truncation */
    ChatFamily     chat;                /* resolved data.chat_template */
    bool           malformed_fatal;     /* data.on_malformed == "error" */
    long           max_items;           /* stop after this many items per dataset_load; <= 0: all */
} DatasetOptions;

/* Fills o from the data.* config values (strings as in common/core/config.c). chat_template "auto" is
 * resolved from tok's tokenizer_config.json. Returns 0 or ERR_INVAL / ERR_UNSUPPORTED naming the key. */
int dataset_options_init(DatasetOptions *o, int max_prompt_length, bool filter_overlong, const char *truncation,
                         const char *chat_template, const char *on_malformed, const Tokenizer *tok,
                         char err[ERR_LEN]);

typedef struct {
    int32_t *ids;            /* [n_ids] prompt token ids after truncation, xmalloc'd */
    int      n_ids;
    int      n_ids_full;     /* length before truncation (== n_ids unless truncated) */
    char    *prompt_text;    /* the rendered prompt (before truncation), NUL-terminated, xmalloc'd */
    char    *ground_truth;   /* reward_model.ground_truth as text (numbers printed), xmalloc'd */
    char    *data_source;    /* "" when absent, xmalloc'd */
    long     line;           /* 1-based line number in its file */
    long     index;          /* extra_info.index when an integer, else line - 1 */
    int      file;           /* which dataset_load call (0, 1, ...) added it */
} DatasetItem;

typedef struct {
    DatasetItem *items;      /* [n] in file order, xmalloc'd */
    size_t  n, cap;
    int     n_files;
    size_t  n_lines;         /* non-blank lines read */
    size_t  n_malformed;     /* skipped as malformed */
    size_t  n_filtered;      /* dropped by filter_overlong */
    size_t  n_truncated;     /* kept but truncated */
} Dataset;

/* Reads a JSONL file and APPENDS its items to ds (zero-initialise ds first; call again for more files).
 * tok encodes (not thread-safe, see tokenizer.h). Returns 0; ERR_IO (cannot open/read); ERR_DECODE (a malformed
 * line with malformed_fatal); ERR_TOO_BIG (an overlong prompt with truncation=error and no filtering). err
 * names "path:line". On error, items appended before the failing line stay in ds. */
int dataset_load(Dataset *ds, const char *path, Tokenizer *tok, const DatasetOptions *o, char err[ERR_LEN]);

/* Parses, renders, tokenizes and length-limits one JSONL line (len bytes, no newline needed) into *item
 * (owned by the caller afterwards: dataset_item_free). Returns 0 (item filled), 1 (dropped by
 * filter_overlong; item untouched), ERR_DECODE (malformed: err says why, without file:line) or ERR_TOO_BIG
 * (overlong with truncation=error). */
int dataset_parse_line(const char *line, size_t len, Tokenizer *tok, const DatasetOptions *o, DatasetItem *item,
                       char err[ERR_LEN]);

void dataset_item_free(DatasetItem *item);   /* frees the members; NULL-safe */
void dataset_free(Dataset *ds);              /* frees every item; leaves ds zeroed; NULL-safe */

#endif
