/* common/tokenizer/tokenizer.h: a Hugging Face `tokenizer.json` byte-level BPE tokenizer (Qwen2/2.5/3,
 * Llama 3, GPT-2 style) that encodes and decodes exactly as the Rust `tokenizers` library does
 * (reference: huggingface/tokenizers 0.23, `Tokenizer.encode(text, add_special_tokens=False)` and
 * `Tokenizer.decode(ids, skip_special_tokens)`).
 *
 * Pipeline of tokenizer_encode (tokenizers: TokenizerImpl::encode_single_sequence):
 *   1. invalid UTF-8 is replaced as Python's bytes.decode("utf-8", errors="replace") does: one U+FFFD per
 *      maximal invalid subpart (Unicode 15 §3.9, "U+FFFD substitution of maximal subparts");
 *   2. added tokens (tokenizer.json `added_tokens`, special or not) are cut out of the text, leftmost-longest
 *      (tokenizers: AddedVocabulary::split_with_indices, aho-corasick LeftmostLongest), honouring lstrip/rstrip;
 *   3. each remaining segment is normalized (NFC via utf8proc, or none);
 *   4. pre-tokenized: Split(regex, Isolated) with PCRE2 (UTF+UCP+JIT; `\s`/`\S` rewritten to Oniguruma's
 *      White_Space class because PCRE2's \s differs, e.g. U+0085), then ByteLevel (optionally with the GPT-2
 *      regex and add_prefix_space);
 *   5. each piece is BPE-merged over its bytes: lowest merge rank first, leftmost on ties (tokenizers:
 *      models/bpe/word.rs Word::merge_all), through a pair->(rank, new id) hash table; pieces of up to
 *      TOK_CACHE_MAX_PIECE bytes are cached.
 * Decoding is the ByteLevel decoder followed by String::from_utf8_lossy (same U+FFFD rule as 1).
 *
 * Not here: WordPiece/Unigram models, byte_fallback, BPE dropout, normalizers other than NFC, truncation and
 * padding, post-processors (add_special_tokens=True), offsets. Loading such a tokenizer.json is refused with
 * an error naming the JSON path. Chat templates: chat.h.
 *
 * Threads: tokenizer_encode mutates a piece cache and scratch buffers inside the Tokenizer, so one Tokenizer
 * must not encode on two threads at once (load one per thread, or serialise). Decoding is read-only and
 * may run concurrently with other decodes. */
#ifndef DAPO_TOKENIZER_H
#define DAPO_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct Tokenizer Tokenizer;

/* A growable array of token ids. Zero-initialise ({0}) before first use; free with tok_ids_free.
 * Functions that take a TokIds *append* to it (set n = 0 to reuse the buffer). */
typedef struct {
    int32_t *v;      /* [cap] ids, xmalloc'd */
    size_t   n, cap; /* used / allocated elements */
} TokIds;

/* A growable byte buffer, always NUL-terminated after any append (v[n] == 0) so text can be printed;
 * the text itself may contain NUL bytes. Zero-initialise before first use; free with tok_buf_free. */
typedef struct {
    char  *v;        /* [cap] bytes, xmalloc'd */
    size_t n, cap;   /* used bytes (excluding the terminator) / allocated */
} TokBuf;

void tok_ids_free(TokIds *ids);            /* NULL-safe; leaves {0} */
void tok_ids_push(TokIds *ids, int32_t id);
void tok_buf_free(TokBuf *b);              /* NULL-safe; leaves {0} */
void tok_buf_append(TokBuf *b, const void *p, size_t n);

/* Token ids with a fixed role; -1 where the tokenizer does not define one. eos/bos/pad come from
 * tokenizer_config.json (eos_token, bos_token, pad_token) when present; the others by their text. */
typedef struct {
    int32_t eos;        /* e.g. Qwen3 <|im_end|> 151645 (tokenizer_config.json eos_token) */
    int32_t bos;        /* Qwen: -1; Llama 3: <|begin_of_text|> */
    int32_t pad;        /* Qwen: <|endoftext|> 151643 */
    int32_t endoftext;  /* "<|endoftext|>" */
    int32_t im_start;   /* "<|im_start|>" */
    int32_t im_end;     /* "<|im_end|>" */
} TokenizerSpecial;

/* Loads DIR/tokenizer.json and, when it exists, DIR/tokenizer_config.json (chat template, eos/bos/pad).
 * Returns a new Tokenizer (free with tokenizer_free) or NULL with a reason in err: ERR_IO cases name the
 * file; JSON syntax errors give line and column; structural errors and unsupported components name the JSON
 * path (e.g. "tokenizer.json: model.merges[17]: ..."). Qwen3 (151k vocab, 151k merges): ~0.35 s on one idle
 * core, ~100 MB peak while the JSON tree exists, ~20 MB held afterwards (tables, piece cache). */
Tokenizer *tokenizer_load(const char *dir, char err[ERR_LEN]);

/* Same from memory: json/json_len is a tokenizer.json document; config/config_len a tokenizer_config.json
 * document or NULL/0. The buffers are only read during the call. */
Tokenizer *tokenizer_load_mem(const char *json, size_t json_len, const char *config, size_t config_len,
                              char err[ERR_LEN]);

void tokenizer_free(Tokenizer *tok);       /* NULL-safe */

/* Encodes len bytes of text (any bytes: invalid UTF-8 is replaced first, see the file comment; NUL bytes
 * are ordinary characters) and APPENDS the ids to out. Equals HF `tokenizer.encode(text,
 * add_special_tokens=False).ids` for text = bytes.decode("utf-8", "replace"); added-token strings inside the
 * text become their ids. Returns 0, or ERR_INVAL (NULL arguments) / ERR_TOO_BIG (len > 1 GiB) with err set.
 * Not thread-safe on one Tokenizer (see the file comment). */
int tokenizer_encode(Tokenizer *tok, const char *text, size_t len, TokIds *out, char err[ERR_LEN]);

/* Decodes n ids and APPENDS the text to out: the ids' bytes concatenated (added tokens contribute their
 * content), then invalid UTF-8 replaced by U+FFFD per maximal subpart (Rust String::from_utf8_lossy), so out
 * gains valid UTF-8. skip_special drops added tokens flagged special (<|im_end|>, ...). Ids that the
 * tokenizer does not define (negative, >= tokenizer_vocab_size, holes) are skipped, as HF does.
 * Returns 0 (ERR_INVAL only for NULL arguments). Thread-safe (read-only on tok). */
int tokenizer_decode(const Tokenizer *tok, const int32_t *ids, size_t n, bool skip_special, TokBuf *out);

/* Incremental decoding for streaming: feed ids one at a time; each push appends only complete, valid
 * UTF-8 to out and holds back the bytes of a character that a later token may complete (at most 3 bytes).
 * Bytes that can no longer become valid are emitted as U+FFFD right away, so after tok_stream_finish the
 * concatenated output equals tokenizer_decode of all the ids. Zero-initialise or tok_stream_init. */
typedef struct {
    uint8_t pend[4];     /* held-back prefix of one UTF-8 sequence */
    int     npend;
} TokStream;
void tok_stream_init(TokStream *s);
/* Returns 0; unknown ids are skipped as in tokenizer_decode. */
int  tok_stream_push(const Tokenizer *tok, TokStream *s, int32_t id, bool skip_special, TokBuf *out);
/* Flushes held bytes (an incomplete sequence at the end becomes one U+FFFD) and resets s. */
void tok_stream_finish(TokStream *s, TokBuf *out);

/* 1 + the largest id defined (vocab or added). Model embedding tables may be larger (Qwen3: 151936). */
int tokenizer_vocab_size(const Tokenizer *tok);

/* The raw bytes of token id (added tokens: their content), borrowed until tokenizer_free; NULL when the id
 * is not defined. *len gets the byte count. */
const char *tokenizer_token_bytes(const Tokenizer *tok, int32_t id, size_t *len);

/* The id whose text is exactly s[0..len) (added tokens by content, vocab tokens by their raw bytes), or -1. */
int32_t tokenizer_token_id(const Tokenizer *tok, const char *s, size_t len);

/* True when id is an added token flagged special. */
bool tokenizer_is_special(const Tokenizer *tok, int32_t id);

const TokenizerSpecial *tokenizer_special(const Tokenizer *tok);   /* borrowed; never NULL */
/* The stop ids every generation request gets (beside the model's own EOS ids): the tokenizer's eos, <|im_end|> and
 * <|endoftext|> that exist, each once, in that order, into out[3]. Returns how many were written. */
int tokenizer_stop_ids(const Tokenizer *tok, int32_t out[3]);

/* tokenizer_config.json `chat_template` (the "default" entry when it is a list), or NULL when there is no
 * config or no template. Borrowed until tokenizer_free. */
const char *tokenizer_chat_template(const Tokenizer *tok);

/* tokenizer_config.json bos_token text ("" when none). Borrowed until tokenizer_free. */
const char *tokenizer_bos_text(const Tokenizer *tok);

/* Drops every cached piece (the cache refills as text is encoded); for cold-cache measurements. */
void tokenizer_cache_clear(Tokenizer *tok);

/* Replaces invalid UTF-8 in s[0..len) as Python's errors="replace" does and APPENDS the result to out.
 * Returns the number of U+FFFD inserted. Used by encode, decode and tools that must emit valid JSON. */
size_t tok_utf8_sanitize(const char *s, size_t len, TokBuf *out);

/* Length of the longest prefix of s[0..len) that is valid UTF-8 (no replacement needed). */
size_t tok_utf8_valid_prefix(const char *s, size_t len);

#endif
