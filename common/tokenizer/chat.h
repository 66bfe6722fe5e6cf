/* common/tokenizer/chat.h: chat templates without Jinja. Each supported family is rendered by C code that
 * reproduces, byte for byte, what transformers' apply_chat_template(messages, tokenize=False,
 * add_generation_prompt=...) produces with that family's tokenizer_config.json template for plain
 * system/user/assistant messages and default options:
 *   qwen2.5  Qwen2.5-Instruct ChatML; default system prompt "You are Qwen, created by Alibaba Cloud. You are
 *            a helpful assistant." when the first message is not a system message;
 *   qwen3    Qwen3 ChatML; assistant turns after the last user query get the <think>\n...\n</think>\n\n
 *            block (reasoning split out of the content at </think>), as the template does;
 *   llama3   Meta-Llama-3-Instruct: bos_token, <|start_header_id|>role<|end_header_id|>\n\n + content|trim +
 *            <|eot_id|>;
 *   none     raw text: the message contents concatenated, nothing added.
 * A template text from tokenizer_config.json is recognised by family markers (chat_family_detect); anything
 * else is refused with an error that names the data.chat_template setting.
 * Not here: tools/tool calls, the `tool` role, enable_thinking=False, Llama 3.1+ (date header) templates. */
#ifndef DAPO_CHAT_H
#define DAPO_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "tokenizer/tokenizer.h"

typedef enum { CHAT_NONE = 0, CHAT_QWEN25 = 1, CHAT_QWEN3 = 2, CHAT_LLAMA3 = 3 } ChatFamily;

typedef struct {
    const char *role;        /* "system" | "user" | "assistant" (NUL-terminated) */
    const char *content;     /* UTF-8 text, content_len bytes (may hold NUL) */
    size_t      content_len;
} ChatMessage;

/* "qwen2.5" | "qwen3" | "llama3" | "none" -> family. "auto" is not a family: use chat_family_resolve.
 * Returns 0 or ERR_INVAL naming the allowed values. */
int chat_family_parse(const char *name, ChatFamily *out, char err[ERR_LEN]);
const char *chat_family_name(ChatFamily f);     /* static string */

/* Recognises a Jinja template text by its family markers. Returns 0, or ERR_UNSUPPORTED for NULL/unknown
 * templates (err says which families are known and that data.chat_template can force one). */
int chat_family_detect(const char *jinja, ChatFamily *out, char err[ERR_LEN]);

/* data.chat_template semantics: "auto" -> detect from tok's tokenizer_config.json chat_template (error when
 * it has none), else chat_family_parse(setting). tok may be NULL when setting is not "auto". */
int chat_family_resolve(const char *setting, const Tokenizer *tok, ChatFamily *out, char err[ERR_LEN]);

/* Renders n messages and APPENDS the text to out. bos: the bos_token text for llama3 (NULL -> "<|begin_of_text|>"),
 * ignored by the other families. add_gen_prompt appends the assistant header (ignored by `none`).
 * Returns 0, or ERR_INVAL for an unknown role, a NULL role/content or n == 0 (chat families). */
int chat_render(ChatFamily f, const char *bos, const ChatMessage *m, size_t n, bool add_gen_prompt, TokBuf *out,
                char err[ERR_LEN]);

#endif
