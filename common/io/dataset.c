/* common/io/dataset.c: the verl-schema JSONL prompt reader (see dataset.h).
 * Not here: sampling order, epochs, parquet. */
#include "io/dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define DATASET_MAX_LINE   (64u << 20)    /* bytes; longer lines are malformed */
#define DATASET_MAX_MSGS   4096

int dataset_options_init(DatasetOptions *o, int max_prompt_length, bool filter_overlong, const char *truncation,
                         const char *chat_template, const char *on_malformed, const Tokenizer *tok,
                         char err[ERR_LEN]) {
    memset(o, 0, sizeof *o);
    o->max_prompt_length = max_prompt_length;
    o->filter_overlong = filter_overlong;
    static const char *tn[] = { "error", "left", "right", "middle" };
    int t = -1;
    for (int i = 0; i < 4; i++)
        if (truncation && !strcmp(truncation, tn[i])) t = i;
    if (t < 0) return err_set(err, ERR_INVAL, "data.truncation: \"%s\" is not one of error|left|right|middle",
                              truncation ? truncation : "(null)");
    o->truncation = (DataTruncation)t;
    if (!on_malformed || (strcmp(on_malformed, "skip") && strcmp(on_malformed, "error")))
        return err_set(err, ERR_INVAL, "data.on_malformed: \"%s\" is not one of skip|error",
                       on_malformed ? on_malformed : "(null)");
    o->malformed_fatal = !strcmp(on_malformed, "error");
    return chat_family_resolve(chat_template, tok, &o->chat, err);
}

void dataset_item_free(DatasetItem *it) {
    if (!it) return;
    xfree(it->ids); xfree(it->prompt_text); xfree(it->ground_truth); xfree(it->data_source);
    memset(it, 0, sizeof *it);
}

void dataset_free(Dataset *ds) {
    if (!ds) return;
    for (size_t i = 0; i < ds->n; i++) dataset_item_free(&ds->items[i]);
    xfree(ds->items);
    memset(ds, 0, sizeof *ds);
}

static char *ground_truth_text(const json_t *gt) {
    char tmp[64];
    if (json_is_string(gt)) {
        char *s = xmalloc(json_string_length(gt) + 1);
        memcpy(s, json_string_value(gt), json_string_length(gt) + 1);
        return s;
    }
    if (json_is_integer(gt)) { snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(gt)); return xstrdup(tmp); }
    if (json_is_real(gt)) { snprintf(tmp, sizeof tmp, "%.17g", json_real_value(gt)); return xstrdup(tmp); }
    return NULL;
}

/* Applies max_prompt_length; returns 0, 1 (filtered) or ERR_TOO_BIG. */
static int limit_length(TokIds *ids, const DatasetOptions *o, char err[ERR_LEN]) {
    size_t L = (size_t)o->max_prompt_length;
    if (o->max_prompt_length <= 0 || ids->n <= L) return 0;
    if (o->filter_overlong) return 1;
    switch (o->truncation) {
    case DATA_TRUNC_LEFT:
        memmove(ids->v, ids->v + ids->n - L, L * sizeof *ids->v);
        break;
    case DATA_TRUNC_RIGHT:
        break;
    case DATA_TRUNC_MIDDLE: {
        size_t left = L / 2, right = L - left;
        memmove(ids->v + left, ids->v + ids->n - right, right * sizeof *ids->v);
        break;
    }
    default:
        return err_set(err, ERR_TOO_BIG, "prompt has %zu tokens, more than data.max_prompt_length=%zu "
                       "(data.truncation=error; set data.filter_overlong_prompts=true or data.truncation=left|right|middle)",
                       ids->n, L);
    }
    ids->n = L;
    return 0;
}

int dataset_parse_line(const char *line, size_t len, Tokenizer *tok, const DatasetOptions *o, DatasetItem *item,
                       char err[ERR_LEN]) {
    if (!line || !tok || !o || !item) return err_set(err, ERR_INVAL, "dataset_parse_line: NULL argument");
    json_error_t je;
    json_t *root = json_loadb(line, len, JSON_ALLOW_NUL, &je);
    if (!root) return err_set(err, ERR_DECODE, "invalid JSON at column %d: %s", je.column, je.text);
    int rc = ERR_DECODE;
    ChatMessage *msgs = NULL;
    TokBuf text = {0};
    TokIds ids = {0};
    char *gt = NULL;
    if (!json_is_object(root)) { err_set(err, rc, "expected a JSON object"); goto out; }
    json_t *prompt = json_object_get(root, "prompt");
    size_t nm;
    if (json_is_string(prompt)) {                               /* a bare string: one user message */
        nm = 1;
        msgs = xcalloc(1, sizeof *msgs);
        msgs[0] = (ChatMessage){ "user", json_string_value(prompt), json_string_length(prompt) };
    } else if (json_is_array(prompt) && json_array_size(prompt) > 0 && json_array_size(prompt) <= DATASET_MAX_MSGS) {
        nm = json_array_size(prompt);
        msgs = xcalloc(nm, sizeof *msgs);
        for (size_t i = 0; i < nm; i++) {
            json_t *m = json_array_get(prompt, i);
            json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
            if (!json_is_string(role) || !json_is_string(content)) {
                err_set(err, rc, "prompt[%zu]: expected {\"role\": string, \"content\": string}", i);
                goto out;
            }
            msgs[i] = (ChatMessage){ json_string_value(role), json_string_value(content), json_string_length(content) };
        }
    } else {
        err_set(err, rc, "prompt: expected a non-empty array of messages (at most %d)", DATASET_MAX_MSGS);
        goto out;
    }
    json_t *gtj = json_object_get(json_object_get(root, "reward_model"), "ground_truth");
    if (!(gt = ground_truth_text(gtj))) { err_set(err, rc, "reward_model.ground_truth: expected a string or number"); goto out; }
    json_t *ds = json_object_get(root, "data_source");
    if (ds && !json_is_string(ds)) { err_set(err, rc, "data_source: expected a string"); goto out; }
    if ((rc = chat_render(o->chat, tokenizer_bos_text(tok)[0] ? tokenizer_bos_text(tok) : NULL, msgs, nm, true, &text,
                          err)) < 0) {
        rc = ERR_DECODE;
        goto out;
    }
    if ((rc = tokenizer_encode(tok, text.v, text.n, &ids, err)) < 0) { rc = ERR_DECODE; goto out; }
    size_t full = ids.n;
    if ((rc = limit_length(&ids, o, err)) != 0) goto out;
    memset(item, 0, sizeof *item);
    item->n_ids_full = (int)full;
    item->n_ids = (int)ids.n;
    item->ids = ids.v; ids.v = NULL;
    item->prompt_text = text.v; text.v = NULL;
    item->ground_truth = gt; gt = NULL;
    item->data_source = xstrdup(ds ? json_string_value(ds) : "");
    json_t *idx = json_object_get(json_object_get(root, "extra_info"), "index");
    item->index = json_is_integer(idx) ? (long)json_integer_value(idx) : -1;
    rc = 0;
out:
    xfree(gt);
    xfree(msgs);
    tok_buf_free(&text);
    tok_ids_free(&ids);
    json_decref(root);
    return rc;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

int dataset_load(Dataset *ds, const char *path, Tokenizer *tok, const DatasetOptions *o, char err[ERR_LEN]) {
    if (!ds || !path || !tok || !o) return err_set(err, ERR_INVAL, "dataset_load: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, added = 0, skipped_before = ds->n_malformed;
    ssize_t len;
    long lineno = 0;
    int rc = 0, file = ds->n_files++;
    char why[ERR_LEN];
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (blank(line, (size_t)len)) continue;
        if (o->max_items > 0 && (long)added >= o->max_items) break;
        ds->n_lines++;
        DatasetItem it;
        int r = (size_t)len > DATASET_MAX_LINE
                    ? err_set(why, ERR_DECODE, "line is longer than %u bytes", DATASET_MAX_LINE)
                    : dataset_parse_line(line, (size_t)len, tok, o, &it, why);
        if (r == 1) { ds->n_filtered++; continue; }
        if (r == ERR_TOO_BIG) { rc = err_set(err, r, "%s:%ld: %s", path, lineno, why); break; }
        if (r < 0) {
            if (o->malformed_fatal) { rc = err_set(err, ERR_DECODE, "%s:%ld: %s (data.on_malformed=error)", path, lineno, why); break; }
            log_warn("%s:%ld: skipped: %s", path, lineno, why);
            ds->n_malformed++;
            continue;
        }
        it.line = lineno;
        it.file = file;
        if (it.index < 0) it.index = lineno - 1;
        if (it.n_ids < it.n_ids_full) ds->n_truncated++;
        XGROW(ds->items, ds->n, ds->cap, 1024);
        ds->items[ds->n++] = it;
        added++;
    }
    if (rc == 0 && ferror(f)) rc = err_set(err, ERR_IO, "%s: read error after line %ld", path, lineno);
    free(line);                                   /* getline's buffer comes from malloc */
    fclose(f);
    if (rc == 0)
        log_info("%s: %zu prompts (%zu malformed skipped, %zu total filtered as overlong, %zu total truncated)", path,
                 added, ds->n_malformed - skipped_before, ds->n_filtered, ds->n_truncated);
    return rc;
}
