/* common/tokenizer/chat.c: the Qwen2.5, Qwen3 and Llama-3 chat templates as C (see chat.h), checked against
 * transformers' apply_chat_template by tests/reference/make_tokenizer_fixtures.py.
 * Not here: Jinja, tools, other families. */
#include "tokenizer/chat.h"

#include <string.h>

static const char QWEN25_DEFAULT_SYSTEM[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

int chat_family_parse(const char *name, ChatFamily *out, char err[ERR_LEN]) {
    static const struct { const char *name; ChatFamily f; } tab[] = {
        { "none", CHAT_NONE }, { "qwen2.5", CHAT_QWEN25 }, { "qwen3", CHAT_QWEN3 }, { "llama3", CHAT_LLAMA3 },
    };
    for (size_t i = 0; name && i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(name, tab[i].name)) { *out = tab[i].f; return 0; }
    return err_set(err, ERR_INVAL, "data.chat_template: \"%s\" is not one of auto|qwen2.5|qwen3|llama3|none",
                   name ? name : "(null)");
}

const char *chat_family_name(ChatFamily f) {
    switch (f) {
    case CHAT_QWEN25: return "qwen2.5";
    case CHAT_QWEN3: return "qwen3";
    case CHAT_LLAMA3: return "llama3";
    default: return "none";
    }
}

int chat_family_detect(const char *j, ChatFamily *out, char err[ERR_LEN]) {
    if (!j) return err_set(err, ERR_UNSUPPORTED, "no chat_template in tokenizer_config.json; set data.chat_template");
    if (strstr(j, "<|start_header_id|>") && strstr(j, "<|eot_id|>")) {
        if (strstr(j, "Cutting Knowledge Date") || strstr(j, "Today Date"))
            return err_set(err, ERR_UNSUPPORTED, "chat template is Llama 3.1+ (date header), which is not supported; "
                           "set data.chat_template=llama3|none to override");
        *out = CHAT_LLAMA3;
        return 0;
    }
    if (strstr(j, "<|im_start|>")) {
        if (strstr(j, "reasoning_content") || strstr(j, "enable_thinking")) { *out = CHAT_QWEN3; return 0; }
        if (strstr(j, QWEN25_DEFAULT_SYSTEM)) { *out = CHAT_QWEN25; return 0; }
    }
    return err_set(err, ERR_UNSUPPORTED, "chat template not recognised (known: Qwen2.5, Qwen3, Llama 3); "
                   "set data.chat_template=qwen2.5|qwen3|llama3|none to choose one");
}

int chat_family_resolve(const char *setting, const Tokenizer *tok, ChatFamily *out, char err[ERR_LEN]) {
    if (setting && !strcmp(setting, "auto")) {
        if (!tok) return err_set(err, ERR_INVAL, "data.chat_template=auto needs a tokenizer");
        return chat_family_detect(tokenizer_chat_template(tok), out, err);
    }
    return chat_family_parse(setting, out, err);
}

static void put(TokBuf *o, const char *s) { tok_buf_append(o, s, strlen(s)); }

/* Python str.isspace() code points (jinja's trim filter is str.strip()). */
static size_t py_space_len(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (n >= 1 && ((u[0] >= 0x09 && u[0] <= 0x0D) || (u[0] >= 0x1C && u[0] <= 0x20))) return 1;
    if (n >= 2 && u[0] == 0xC2 && (u[1] == 0x85 || u[1] == 0xA0)) return 2;
    if (n >= 3 && u[0] == 0xE1 && u[1] == 0x9A && u[2] == 0x80) return 3;                       /* U+1680 */
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x80 &&
        (u[2] <= 0x8A || u[2] == 0xA8 || u[2] == 0xA9 || u[2] == 0xAF)) return 3;  /* U+2000-200A,2028,2029,202F */
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x81 && u[2] == 0x9F) return 3;                       /* U+205F */
    if (n >= 3 && u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x80) return 3;                       /* U+3000 */
    return 0;
}

/* Length of the Python-whitespace suffix ending at s+n (scans back over UTF-8 sequences). */
static size_t py_space_back(const char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        size_t l = py_space_len(s + n - k, k);
        if (l == k) return k;
    }
    return 0;
}

static void put_trimmed(TokBuf *o, const char *s, size_t n) {
    size_t a = 0, b = n, l;
    while (a < b && (l = py_space_len(s + a, b - a)) > 0) a += l;
    while (b > a && (l = py_space_back(s + a, b - a)) > 0) b -= l;
    tok_buf_append(o, s + a, b - a);
}

static bool has(const ChatMessage *m, const char *needle) {
    size_t k = strlen(needle);
    if (k > m->content_len) return false;
    for (size_t i = 0; i + k <= m->content_len; i++)
        if (!memcmp(m->content + i, needle, k)) return true;
    return false;
}

/* Qwen3: the assistant content split at </think> with the template's Python string methods:
 * content = c.split('</think>')[-1].lstrip('\n');
 * reasoning = c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n'). */
typedef struct { const char *content, *reason; size_t clen, rlen; } Qwen3Parts;

static Qwen3Parts qwen3_split(const ChatMessage *m) {
    const char *c = m->content;
    size_t n = m->content_len;
    Qwen3Parts p = { c, "", n, 0 };
    static const char ET[] = "</think>", ST[] = "<think>";
    if (!has(m, ET)) return p;
    size_t first = 0, last = 0;
    bool seen = false;
    for (size_t i = 0; i + 8 <= n; i++)
        if (!memcmp(c + i, ET, 8)) { if (!seen) first = i; last = i; seen = true; }
    p.content = c + last + 8; p.clen = n - last - 8;
    while (p.clen && *p.content == '\n') { p.content++; p.clen--; }
    p.reason = c; p.rlen = first;
    while (p.rlen && p.reason[p.rlen - 1] == '\n') p.rlen--;
    for (size_t i = p.rlen; i >= 7; i--)
        if (!memcmp(p.reason + i - 7, ST, 7)) { p.reason += i; p.rlen -= i; break; }
    while (p.rlen && *p.reason == '\n') { p.reason++; p.rlen--; }
    return p;
}

static void qwen3_assistant(TokBuf *o, const Qwen3Parts *p, bool think_block) {
    const char *content = p->content, *reason = p->reason;
    size_t clen = p->clen, rlen = p->rlen;
    put(o, "<|im_start|>assistant\n");
    if (think_block) {
        put(o, "<think>\n");
        while (rlen && *reason == '\n') { reason++; rlen--; }        /* reasoning_content.strip('\n') */
        while (rlen && reason[rlen - 1] == '\n') rlen--;
        tok_buf_append(o, reason, rlen);
        put(o, "\n</think>\n\n");
        while (clen && *content == '\n') { content++; clen--; }      /* content.lstrip('\n') */
    }
    tok_buf_append(o, content, clen);
    put(o, "<|im_end|>\n");
}

int chat_render(ChatFamily f, const char *bos, const ChatMessage *m, size_t n, bool add_gen_prompt, TokBuf *out,
                char err[ERR_LEN]) {
    if (!out || (!m && n)) return err_set(err, ERR_INVAL, "chat_render: NULL argument");
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role || (!m[i].content && m[i].content_len))
            return err_set(err, ERR_INVAL, "chat_render: message %zu: NULL role or content", i);
        if (f != CHAT_NONE && strcmp(m[i].role, "system") && strcmp(m[i].role, "user") && strcmp(m[i].role, "assistant"))
            return err_set(err, ERR_INVAL, "chat_render: message %zu: role \"%.32s\" is not system|user|assistant", i,
                           m[i].role);
    }
    if (f != CHAT_NONE && n == 0) return err_set(err, ERR_INVAL, "chat_render: no messages");
    if (!out->v) tok_buf_append(out, "", 0);
    switch (f) {
    case CHAT_NONE:
        for (size_t i = 0; i < n; i++) tok_buf_append(out, m[i].content ? m[i].content : "", m[i].content_len);
        return 0;
    case CHAT_QWEN25:
        put(out, "<|im_start|>system\n");
        if (!strcmp(m[0].role, "system")) tok_buf_append(out, m[0].content, m[0].content_len);
        else put(out, QWEN25_DEFAULT_SYSTEM);
        put(out, "<|im_end|>\n");
        for (size_t i = 0; i < n; i++) {
            if (i == 0 && !strcmp(m[i].role, "system")) continue;
            put(out, "<|im_start|>"); put(out, m[i].role); put(out, "\n");
            tok_buf_append(out, m[i].content, m[i].content_len);
            put(out, "<|im_end|>\n");
        }
        if (add_gen_prompt) put(out, "<|im_start|>assistant\n");
        return 0;
    case CHAT_QWEN3: {
        size_t last_query = n - 1;
        for (size_t k = n; k-- > 0;) {
            if (strcmp(m[k].role, "user")) continue;
            const ChatMessage *u = &m[k];
            bool tool_resp = u->content_len >= 15 + 16 && !memcmp(u->content, "<tool_response>", 15) &&
                             !memcmp(u->content + u->content_len - 16, "</tool_response>", 16);
            if (!tool_resp) { last_query = k; break; }
        }
        if (!strcmp(m[0].role, "system")) {
            put(out, "<|im_start|>system\n");
            tok_buf_append(out, m[0].content, m[0].content_len);
            put(out, "<|im_end|>\n");
        }
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(m[i].role, "user") || (!strcmp(m[i].role, "system") && i > 0)) {
                put(out, "<|im_start|>"); put(out, m[i].role); put(out, "\n");
                tok_buf_append(out, m[i].content, m[i].content_len);
                put(out, "<|im_end|>\n");
            } else if (!strcmp(m[i].role, "assistant")) {
                Qwen3Parts p = qwen3_split(&m[i]);
                bool think = i > last_query && (i == n - 1 || p.rlen > 0);
                qwen3_assistant(out, &p, think);
            }
        }
        if (add_gen_prompt) put(out, "<|im_start|>assistant\n");
        return 0;
    }
    case CHAT_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            if (i == 0) put(out, bos ? bos : "<|begin_of_text|>");
            put(out, "<|start_header_id|>"); put(out, m[i].role); put(out, "<|end_header_id|>\n\n");
            put_trimmed(out, m[i].content, m[i].content_len);
            put(out, "<|eot_id|>");
        }
        if (add_gen_prompt) put(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        return 0;
    }
    return err_set(err, ERR_INVAL, "chat_render: unknown family %d", (int)f);
}
