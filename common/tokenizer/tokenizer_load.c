/* common/tokenizer/tokenizer_load.c: reading a HF tokenizer.json (+ tokenizer_config.json) into a Tokenizer:
 * normalizer, pre-tokenizer regexes (compiled with PCRE2), vocabulary, merges, added tokens, special tokens.
 * Not here: encoding (tokenizer_bpe.c), decoding (tokenizer.c). */
#include "tokenizer/tokenizer_internal.h"

/* ------------------------------------------------------------------------------------------ loading */

#define TJ "tokenizer.json: "

static const char *json_type_name(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object"; case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string"; case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number"; case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional boolean member: absent/null -> dflt; other non-bool -> error. */
static int get_bool(const json_t *o, const char *key, bool dflt, bool *out, const char *path, char err[ERR_LEN]) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_boolean(v))
        return err_set(err, ERR_DECODE, TJ "%s.%s: expected a boolean, got %s", path, key, json_type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* Regex rewrite for PCRE2, so that it matches what tokenizers' Oniguruma matches:
 * - \s: Oniguruma's is Unicode White_Space; PCRE2's (UCP) is \p{Xps}, which lacks U+0085. Spelled out.
 * - \p{L}, \p{N}: PCRE2 10.42 has Unicode 14 tables, the Oniguruma inside tokenizers 0.23 has Unicode 16.
 *   The code points that are L / N only in the latter are added explicitly (there are none the other way).
 *   The tables below were computed by comparing, for every code point, HF tokenizers' Split(Regex("\p{L}"))
 *   with PCRE2's \p{L} (and \s, \p{N} likewise; \s agreed exactly with WS_CLASS). A newer PCRE2 only makes
 *   the additions redundant. */
static const char UNI16_EXTRA_L[] =
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}"
    "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}"
    "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}"
    "\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}"
    "\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-\\x{16D6C}\\x{18CFF}"
    "\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}"
    "\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}";
static const char UNI16_EXTRA_N[] =
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}"
    "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}";
#define WS_CLASS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

static int regex_rewrite(const char *in, bool extras, TokBuf *out) {
    bool in_class = false;
    for (size_t i = 0; in[i]; i++) {
        char c = in[i];
        if (c == '\\' && in[i + 1]) {
            char d = in[++i];
            if (d == 's') {
                if (in_class) tok_buf_append(out, WS_CLASS, strlen(WS_CLASS));
                else tok_buf_append(out, "[" WS_CLASS "]", strlen(WS_CLASS) + 2);
            } else if (d == 'S') {
                if (in_class) return -1;
                tok_buf_append(out, "[^" WS_CLASS "]", strlen(WS_CLASS) + 3);
            } else if (extras && d == 'p' && (!strncmp(in + i + 1, "{L}", 3) || !strncmp(in + i + 1, "{N}", 3))) {
                const char *extra = in[i + 2] == 'L' ? UNI16_EXTRA_L : UNI16_EXTRA_N;
                if (!in_class) tok_buf_append(out, "[", 1);
                tok_buf_append(out, in[i + 2] == 'L' ? "\\p{L}" : "\\p{N}", 5);
                tok_buf_append(out, extra, strlen(extra));
                if (!in_class) tok_buf_append(out, "]", 1);
                i += 3;
            } else {
                char e[2] = { c, d };
                tok_buf_append(out, e, 2);
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            tok_buf_append(out, "[", 1);
            if (in[i + 1] == '^') { tok_buf_append(out, "^", 1); i++; }
            if (in[i + 1] == ']') { tok_buf_append(out, "]", 1); i++; }   /* leading ] is a literal */
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        tok_buf_append(out, &c, 1);
    }
    if (!out->v) tok_buf_append(out, "", 0);
    return 0;
}

static pcre2_code *regex_compile(const char *pattern, bool extras, const char *path, char err[ERR_LEN]) {
    TokBuf rw = {0};
    if (regex_rewrite(pattern, extras, &rw) < 0) {
        tok_buf_free(&rw);
        err_set(err, ERR_UNSUPPORTED, TJ "%s: \\S inside a character class is not supported", path);
        return NULL;
    }
    int ec; PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rw.v, rw.n, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    tok_buf_free(&rw);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        err_set(err, ERR_DECODE, TJ "%s: regex does not compile: %s", path, (const char *)msg);
        return NULL;
    }
    if (pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) != 0)
        log_warn("%s: PCRE2 JIT unavailable for %s; using the interpreter (slower)", __func__, path);
    return re;
}

/* tokenizers pre_tokenizers/byte_level.rs RE (GPT-2). */
static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_bytelevel(Tokenizer *t, const json_t *o, const char *path, char err[ERR_LEN]) {
    bool use_regex;
    int rc;
    if ((rc = get_bool(o, "add_prefix_space", true, &t->add_prefix_space, path, err)) < 0) return rc;
    if ((rc = get_bool(o, "use_regex", true, &use_regex, path, err)) < 0) return rc;
    if (use_regex && (!(t->re_bl[0] = regex_compile(GPT2_RE, false, path, err)) ||
                      !(t->re_bl[1] = regex_compile(GPT2_RE, true, path, err))))
        return ERR_DECODE;
    return 0;
}

static int load_split(Tokenizer *t, const json_t *o, const char *path, char err[ERR_LEN]) {
    json_t *pat = json_object_get(o, "pattern");
    json_t *re = pat ? json_object_get(pat, "Regex") : NULL;
    if (!json_is_string(re))
        return err_set(err, ERR_UNSUPPORTED, TJ "%s.pattern: only {\"Regex\": \"...\"} patterns are supported", path);
    json_t *beh = json_object_get(o, "behavior");
    if (!json_is_string(beh) || strcmp(json_string_value(beh), "Isolated") != 0)
        return err_set(err, ERR_UNSUPPORTED, TJ "%s.behavior: only \"Isolated\" is supported", path);
    bool invert;
    int rc = get_bool(o, "invert", false, &invert, path, err);
    if (rc < 0) return rc;
    if (invert) return err_set(err, ERR_UNSUPPORTED, TJ "%s.invert: true is not supported", path);
    if (t->re_split[0]) return err_set(err, ERR_UNSUPPORTED, TJ "%s: only one Split pre-tokenizer is supported", path);
    char p2[96];
    snprintf(p2, sizeof p2, "%s.pattern.Regex", path);
    if (!(t->re_split[0] = regex_compile(json_string_value(re), false, p2, err))) return ERR_DECODE;
    return (t->re_split[1] = regex_compile(json_string_value(re), true, p2, err)) ? 0 : ERR_DECODE;
}

static int load_pretokenizer(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *pt = json_object_get(root, "pre_tokenizer");
    if (!json_is_object(pt))
        return err_set(err, ERR_UNSUPPORTED, TJ "pre_tokenizer: a ByteLevel pre-tokenizer is required");
    const char *type = json_string_value(json_object_get(pt, "type"));
    if (!type) return err_set(err, ERR_DECODE, TJ "pre_tokenizer.type: expected a string");
    if (!strcmp(type, "ByteLevel")) return load_bytelevel(t, pt, "pre_tokenizer", err);
    if (strcmp(type, "Sequence") != 0)
        return err_set(err, ERR_UNSUPPORTED, TJ "pre_tokenizer.type: \"%s\" is not supported", type);
    json_t *seq = json_object_get(pt, "pretokenizers");
    if (!json_is_array(seq)) return err_set(err, ERR_DECODE, TJ "pre_tokenizer.pretokenizers: expected an array");
    bool have_bl = false;
    for (size_t i = 0; i < json_array_size(seq); i++) {
        json_t *o = json_array_get(seq, i);
        char path[64];
        snprintf(path, sizeof path, "pre_tokenizer.pretokenizers[%zu]", i);
        const char *ty = json_is_object(o) ? json_string_value(json_object_get(o, "type")) : NULL;
        if (!ty) return err_set(err, ERR_DECODE, TJ "%s.type: expected a string", path);
        int rc;
        if (!strcmp(ty, "Split") && !have_bl) rc = load_split(t, o, path, err);
        else if (!strcmp(ty, "ByteLevel") && !have_bl) { rc = load_bytelevel(t, o, path, err); have_bl = true; }
        else rc = err_set(err, ERR_UNSUPPORTED, TJ "%s: \"%s\" is not supported here (Split then ByteLevel)", path, ty);
        if (rc < 0) return rc;
    }
    if (!have_bl) return err_set(err, ERR_UNSUPPORTED, TJ "pre_tokenizer.pretokenizers: no ByteLevel step");
    return 0;
}

static int load_normalizer(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *n = json_object_get(root, "normalizer");
    if (!n || json_is_null(n)) return 0;
    const char *type = json_is_object(n) ? json_string_value(json_object_get(n, "type")) : NULL;
    if (!type) return err_set(err, ERR_DECODE, TJ "normalizer.type: expected a string");
    if (!strcmp(type, "NFC")) { t->nfc = true; return 0; }
    if (!strcmp(type, "Sequence")) {
        json_t *seq = json_object_get(n, "normalizers");
        if (!json_is_array(seq)) return err_set(err, ERR_DECODE, TJ "normalizer.normalizers: expected an array");
        for (size_t i = 0; i < json_array_size(seq); i++) {
            const char *ty = json_string_value(json_object_get(json_array_get(seq, i), "type"));
            if (!ty || strcmp(ty, "NFC") != 0)
                return err_set(err, ERR_UNSUPPORTED, TJ "normalizer.normalizers[%zu]: only NFC is supported", i);
            t->nfc = true;
        }
        return 0;
    }
    return err_set(err, ERR_UNSUPPORTED, TJ "normalizer.type: \"%s\" is not supported (NFC or none)", type);
}

/* Registers id with decode bytes from token string s (ByteLevel decode rule). */
static int entry_set(Tokenizer *t, int64_t id, const char *s, size_t len, uint8_t flags) {
    if (id < 0 || id >= TOK_MAX_IDS) return -1;
    if (id >= t->n_ent) {
        int32_t n = t->n_ent ? t->n_ent : 1024;
        while (n <= id) n *= 2;
        t->ent = xrealloc(t->ent, (size_t)n * sizeof *t->ent);
        memset(t->ent + t->n_ent, 0, (size_t)(n - t->n_ent) * sizeof *t->ent);
        t->n_ent = n;
    }
    size_t off = t->arena.n;
    tok__bytelevel_decode(s, len, &t->arena);
    t->ent[id].off = (uint32_t)off;
    t->ent[id].len = (uint32_t)(t->arena.n - off);
    t->ent[id].flags = flags | TF_DEFINED;
    return 0;
}

/* Model token string -> bytes lookup key (same ByteLevel rule), in scratch. */
static int32_t vocab_find_str(Tokenizer *t, const char *s, size_t len) {
    t->piece.n = 0;
    tok__bytelevel_decode(s, len, &t->piece);
    return vocab_find(t, t->piece.v, t->piece.n);
}

static int load_vocab(Tokenizer *t, const json_t *model, char err[ERR_LEN]) {
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return err_set(err, ERR_DECODE, TJ "model.vocab: expected an object, got %s", vocab ? json_type_name(vocab) : "nothing");
    size_t nv = json_object_size(vocab);
    if (nv == 0) return err_set(err, ERR_DECODE, TJ "model.vocab: empty");
    int64_t max_id = -1;
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        const char *k = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        json_t *v = json_object_iter_value(it);
        if (!json_is_integer(v) || entry_set(t, json_integer_value(v), k, klen, 0) < 0)
            return err_set(err, ERR_DECODE, TJ "model.vocab[\"%.40s\"]: expected an id in [0, %d), got %s", k,
                           TOK_MAX_IDS, json_type_name(v));
        if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
        if (klen == 0) return err_set(err, ERR_DECODE, TJ "model.vocab: empty token string");
    }
    t->vmask = pow2_at_least(nv) - 1;
    t->vslot = xmalloc(((size_t)t->vmask + 1) * sizeof *t->vslot);
    memset(t->vslot, 0xff, ((size_t)t->vmask + 1) * sizeof *t->vslot);
    for (int32_t id = 0; id <= max_id; id++)
        if (t->ent[id].flags & TF_DEFINED) vocab_insert(t, id);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = vocab_find(t, &c, 1);
    }
    return 0;
}

static int merge_part(Tokenizer *t, const char *s, size_t len, size_t i, TokBuf *cat, int32_t *id, char err[ERR_LEN]) {
    *id = vocab_find_str(t, s, len);
    if (*id < 0) return err_set(err, ERR_DECODE, TJ "model.merges[%zu]: token \"%.40s\" is not in the vocab", i, s);
    tok_buf_append(cat, t->piece.v, t->piece.n);
    return 0;
}

static int load_merges(Tokenizer *t, const json_t *model, char err[ERR_LEN]) {
    json_t *merges = json_object_get(model, "merges");
    if (!merges || json_is_null(merges)) merges = NULL;
    else if (!json_is_array(merges))
        return err_set(err, ERR_DECODE, TJ "model.merges: expected an array, got %s", json_type_name(merges));
    size_t nm = merges ? json_array_size(merges) : 0;
    if (nm > (size_t)TOK_MAX_IDS) return err_set(err, ERR_TOO_BIG, TJ "model.merges: %zu entries", nm);
    t->mmask = pow2_at_least(nm) - 1;
    size_t ns = (size_t)t->mmask + 1;
    t->mkey = xmalloc(ns * sizeof *t->mkey);
    memset(t->mkey, 0xff, ns * sizeof *t->mkey);
    t->mrank = xmalloc(ns * sizeof *t->mrank);
    t->mnew = xmalloc(ns * sizeof *t->mnew);
    TokBuf cat = {0};
    int rc = 0;
    for (size_t i = 0; i < nm && rc == 0; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t alen, blen;
        if (json_is_string(m)) {                       /* "a b": exactly one space (tokenizers: split(' ')) */
            a = json_string_value(m);
            size_t len = json_string_length(m);
            const char *sp = memchr(a, ' ', len);
            if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - a))) {
                rc = err_set(err, ERR_DECODE, TJ "model.merges[%zu]: expected \"a b\" (one space)", i);
                break;
            }
            alen = (size_t)(sp - a); b = sp + 1; blen = len - alen - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0)); alen = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1)); blen = json_string_length(json_array_get(m, 1));
        } else {
            rc = err_set(err, ERR_DECODE, TJ "model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"], got %s", i,
                         json_type_name(m));
            break;
        }
        int32_t ia, ib;
        cat.n = 0;
        if ((rc = merge_part(t, a, alen, i, &cat, &ia, err)) < 0) break;
        if ((rc = merge_part(t, b, blen, i, &cat, &ib, err)) < 0) break;
        int32_t inew = vocab_find(t, cat.v, cat.n);
        if (inew < 0) { rc = err_set(err, ERR_DECODE, TJ "model.merges[%zu]: merged token is not in the vocab", i); break; }
        merge_insert(t, ia, ib, (int32_t)i, inew);
    }
    tok_buf_free(&cat);
    return rc;
}

static int load_model(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return err_set(err, ERR_DECODE, TJ "model: expected an object");
    json_t *type = json_object_get(model, "type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0))
        return err_set(err, ERR_UNSUPPORTED, TJ "model.type: only \"BPE\" is supported");
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        return err_set(err, ERR_UNSUPPORTED, TJ "model.dropout: BPE dropout is not supported");
    const char *keys[2] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(model, keys[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return err_set(err, ERR_UNSUPPORTED, TJ "model.%s: not supported (must be empty)", keys[i]);
    }
    bool bf;
    int rc;
    if ((rc = get_bool(model, "byte_fallback", false, &bf, "model", err)) < 0) return rc;
    if (bf) return err_set(err, ERR_UNSUPPORTED, TJ "model.byte_fallback: true is not supported");
    if ((rc = get_bool(model, "ignore_merges", false, &t->ignore_merges, "model", err)) < 0) return rc;
    if ((rc = load_vocab(t, model, err)) < 0) return rc;
    t->unk_id = -1;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        t->unk_id = vocab_find_str(t, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0) return err_set(err, ERR_DECODE, TJ "model.unk_token: not in the vocab");
    }
    return load_merges(t, model, err);
}

static int load_added(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *arr = json_object_get(root, "added_tokens");
    if (!arr || json_is_null(arr)) return 0;
    if (!json_is_array(arr)) return err_set(err, ERR_DECODE, TJ "added_tokens: expected an array");
    size_t n = json_array_size(arr);
    t->added = xcalloc(n ? n : 1, sizeof *t->added);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        char path[48];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!json_is_object(o)) return err_set(err, ERR_DECODE, TJ "%s: expected an object", path);
        json_t *id = json_object_get(o, "id"), *content = json_object_get(o, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= TOK_MAX_IDS)
            return err_set(err, ERR_DECODE, TJ "%s.id: expected an id in [0, %d)", path, TOK_MAX_IDS);
        if (!json_is_string(content) || json_string_length(content) == 0)
            return err_set(err, ERR_DECODE, TJ "%s.content: expected a non-empty string", path);
        AddedTok *a = &t->added[t->n_added];
        int rc;
        if ((rc = get_bool(o, "special", false, &a->special, path, err)) < 0 ||
            (rc = get_bool(o, "lstrip", false, &a->lstrip, path, err)) < 0 ||
            (rc = get_bool(o, "rstrip", false, &a->rstrip, path, err)) < 0 ||
            (rc = get_bool(o, "single_word", false, &a->single_word, path, err)) < 0)
            return rc;
        a->id = (int32_t)json_integer_value(id);
        a->len = (uint32_t)json_string_length(content);
        a->off = (uint32_t)t->arena.n;
        tok_buf_append(&t->arena, json_string_value(content), a->len);
        entry_set(t, a->id, json_string_value(content), a->len, TF_ADDED | (a->special ? TF_SPECIAL : 0));
        t->added_first[(uint8_t)json_string_value(content)[0]] = 1;
        if ((int)a->len > t->max_added_len) t->max_added_len = (int)a->len;
        t->n_added++;
    }
    return 0;
}

static int load_decoder(const json_t *root, char err[ERR_LEN]) {
    json_t *d = json_object_get(root, "decoder");
    const char *type = json_is_object(d) ? json_string_value(json_object_get(d, "type")) : NULL;
    if (!type || strcmp(type, "ByteLevel") != 0)
        return err_set(err, ERR_UNSUPPORTED, TJ "decoder: only the ByteLevel decoder is supported");
    return 0;
}

/* tokenizer_config.json token fields are a string or {"content": string}. */
static const char *config_token(const json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int load_config(Tokenizer *t, const char *config, size_t config_len, char err[ERR_LEN]) {
    json_error_t je;
    json_t *cfg = json_loadb(config, config_len, JSON_ALLOW_NUL, &je);
    if (!cfg) return err_set(err, ERR_DECODE, "tokenizer_config.json: line %d column %d: %s", je.line, je.column, je.text);
    int rc = 0;
    if (!json_is_object(cfg)) { rc = err_set(err, ERR_DECODE, "tokenizer_config.json: expected an object"); goto out; }
    json_t *ct = json_object_get(cfg, "chat_template");
    if (json_is_array(ct)) {                       /* [{"name": "default", "template": "..."}, ...] */
        json_t *pick = NULL;
        for (size_t i = 0; i < json_array_size(ct); i++) {
            json_t *e = json_array_get(ct, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, "default")) pick = json_object_get(e, "template");
        }
        ct = pick;
    }
    if (ct && !json_is_null(ct) && !json_is_string(ct)) {
        rc = err_set(err, ERR_DECODE, "tokenizer_config.json: chat_template: expected a string");
        goto out;
    }
    if (json_is_string(ct)) t->chat_template = xstrdup(json_string_value(ct));
    const char *bos = config_token(cfg, "bos_token"), *eos = config_token(cfg, "eos_token"),
               *pad = config_token(cfg, "pad_token");
    t->bos_text = xstrdup(bos ? bos : "");
    if (bos) t->sp.bos = tokenizer_token_id(t, bos, strlen(bos));
    if (eos) t->sp.eos = tokenizer_token_id(t, eos, strlen(eos));
    if (pad) t->sp.pad = tokenizer_token_id(t, pad, strlen(pad));
out:
    json_decref(cfg);
    return rc;
}

Tokenizer *tokenizer_load_mem(const char *json, size_t json_len, const char *config, size_t config_len,
                              char err[ERR_LEN]) {
    if (!json) { err_set(err, ERR_INVAL, "tokenizer_load_mem: NULL document"); return NULL; }
    tok__bytelevel_init();
    json_error_t je;
    json_t *root = json_loadb(json, json_len, JSON_ALLOW_NUL, &je);
    if (!root) {
        err_set(err, ERR_DECODE, TJ "line %d column %d (byte %d): %s", je.line, je.column, je.position, je.text);
        return NULL;
    }
    Tokenizer *t = xcalloc(1, sizeof *t);
    t->sp = (TokenizerSpecial){ -1, -1, -1, -1, -1, -1 };
    int rc;
    if (!json_is_object(root)) { rc = err_set(err, ERR_DECODE, TJ "top level: expected an object"); goto fail; }
    if ((rc = load_model(t, root, err)) < 0 || (rc = load_added(t, root, err)) < 0 ||
        (rc = load_normalizer(t, root, err)) < 0 || (rc = load_pretokenizer(t, root, err)) < 0 ||
        (rc = load_decoder(root, err)) < 0)
        goto fail;
    t->sp.endoftext = tokenizer_token_id(t, "<|endoftext|>", 13);
    t->sp.im_start = tokenizer_token_id(t, "<|im_start|>", 12);
    t->sp.im_end = tokenizer_token_id(t, "<|im_end|>", 10);
    if (config && (rc = load_config(t, config, config_len, err)) < 0) goto fail;
    if (!t->bos_text) t->bos_text = xstrdup("");
    t->md = pcre2_match_data_create(4, NULL);
    t->mctx = pcre2_match_context_create(NULL);
    t->jstack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!t->md || !t->mctx || !t->jstack) { rc = err_set(err, ERR_NOMEM, "tokenizer: PCRE2 allocation failed"); goto fail; }
    pcre2_jit_stack_assign(t->mctx, NULL, t->jstack);
    t->cache = xcalloc(TOK_CACHE_SLOTS, sizeof *t->cache);
    json_decref(root);
    return t;
fail:
    json_decref(root);
    tokenizer_free(t);
    return NULL;
}

static char *read_file(const char *path, size_t *len, char err[ERR_LEN]) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set(err, ERR_IO, "%s: %s", path, strerror(errno)); return NULL; }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) { cap = cap ? cap * 2 : 1 << 20; buf = xrealloc(buf, cap); }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { xfree(buf); err_set(err, ERR_IO, "%s: read error", path); return NULL; }
    *len = n;
    return buf;
}

Tokenizer *tokenizer_load(const char *dir, char err[ERR_LEN]) {
    if (!dir) { err_set(err, ERR_INVAL, "tokenizer_load: NULL dir"); return NULL; }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    size_t len, clen = 0;
    char *json = read_file(path, &len, err);
    if (!json) return NULL;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *cfg = NULL;
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
        if (!(cfg = read_file(path, &clen, err))) { xfree(json); return NULL; }
    }
    Tokenizer *t = tokenizer_load_mem(json, len, cfg, clen, err);
    xfree(json);
    xfree(cfg);
    if (!t && err) {                                        /* say which directory */
        char tmp[ERR_LEN];
        snprintf(tmp, sizeof tmp, "%s: %s", dir, err);
        memcpy(err, tmp, ERR_LEN);
    }
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    tok_buf_free(&t->arena);
    xfree(t->ent); xfree(t->vslot); xfree(t->mkey); xfree(t->mrank); xfree(t->mnew); xfree(t->added);
    for (int k = 0; k < 2; k++) { pcre2_code_free(t->re_split[k]); pcre2_code_free(t->re_bl[k]); }
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mctx);
    pcre2_jit_stack_free(t->jstack);
    xfree(t->chat_template); xfree(t->bos_text);
    xfree(t->cache);
    tok_buf_free(&t->cache_keys); tok_ids_free(&t->cache_ids);
    tok_buf_free(&t->clean); tok_buf_free(&t->norm); tok_buf_free(&t->piece);
    xfree(t->sym); xfree(t->prank); xfree(t->heap); xfree(t->cuts); xfree(t->cuts1);
    xfree(t);
}
