/* chat.h — chat templates: a conversation (system/user/assistant/tool messages) rendered as the prompt text
 * the model was trained on.
 *
 * WHY: a chat client re-sends the whole transcript every turn, and the engine reuses the longest common
 * token prefix of that prompt with what its KV holds (DESIGN.md §2). Two things follow. The rendering
 * must be exactly what the model's own Jinja template gives (anything else is a different prompt), and
 * it must be prefix-stable: the rendering of turns 1..k with the generation prompt, followed by the
 * reply the model wrote, must be a prefix of the rendering of turns 1..k+1 — then the KV of the last turn
 * (prompt + generated tokens) is reused as far as re-tokenization agrees. Jinja is not interpreted here:
 * the few template families in wide use are written out in C, each following its source line by line.
 *
 * The families (what chat_render writes; [x] is optional, `+` concatenates, no other whitespace):
 * - CHAT_CHATML — Qwen2.5-Instruct's template (../shared/templates/Qwen-Qwen2.5-7B-Instruct.jinja) without
 *   tool definitions:
 *     ["<|im_start|>system\n" + default_system + "<|im_end|>\n"]   when messages[0] is not a system message
 *                                                                   and the template has a default system
 *     system/user/assistant: "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"
 *     tool (a run of consecutive tool messages shares one turn):
 *        ["<|im_start|>user"] + "\n<tool_response>\n" + content + "\n</tool_response>" + ["<|im_end|>\n"]
 *     generation prompt: "<|im_start|>assistant\n"
 *   Prefix-stable: the reply is written verbatim after the generation prompt.
 * - CHAT_LLAMA2 — Llama-2-chat's template (meta-llama/Llama-2-*-chat-hf tokenizer_config.json):
 *     the first message, when a system message, is folded into the first user message as
 *     "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + user; then for message i of the rest (which must alternate
 *     user, other, user, other...: the template raises otherwise, chat_render fails):
 *     user: bos_text + "[INST] " + strip(content) + " [/INST]"
 *     assistant: " " + strip(content) + " " + eos_text
 *     system/tool at an odd index: nothing (the template has no branch for them).
 *     There is no generation prompt: a rendering ending in a user message already ends in " [/INST]".
 *   strip() removes ASCII whitespace (Python's str.strip also removes Unicode spaces; the difference
 *   matters only for content that begins or ends with them). Prefix-stable when the reply is
 *   " " + strip(reply) — what a SentencePiece model writes, since its first piece carries the space.
 *   Mistral's "[INST]" templates differ from this in whitespace; they are detected as LLAMA2 (the closest
 *   family) but not rendered exactly.
 * - CHAT_PLAIN — for base models with no template (e.g. stories260K); this project's own format:
 *     system: content + "\n\n"
 *     user: "User: " + content + "\n"
 *     tool: "Tool: " + content + "\n"
 *     assistant: "Assistant:" + content + "\n"   (content verbatim: a model writing after "Assistant:"
 *                                                  supplies its own leading space)
 *     generation prompt: "Assistant:"
 *   Prefix-stable for any reply. No trailing space in the generation prompt: a SentencePiece tokenizer
 *   would make it a lone "▁" token the model rarely saw before a word.
 *
 * BOS/EOS: only LLAMA2 writes them, as the texts passed in (bos_text/eos_text: the vocabulary's control
 * token texts, "<s>" and "</s>" for Llama-2); the caller tokenizes with control-token parsing on and adds
 * no second BOS. CHATML and PLAIN write none: the caller adds BOS as the model's tokenizer says.
 *
 * Thread-safety: pure functions; the returned strings are the caller's.
 */
#ifndef FKV_CHAT_H
#define FKV_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "flatkv.h"

typedef enum { CHAT_CHATML = 0, CHAT_LLAMA2 = 1, CHAT_PLAIN = 2 } chat_family;

typedef struct {
    const char *role; /* "system", "user", "assistant" or "tool" */
    const char *content;
} chat_message;

typedef struct {
    chat_family family;
    const char *default_system; /* CHATML: the system text the template inserts when the conversation has
                                 * none (Qwen2.5's); NULL: none. Static storage. */
    bool guessed;               /* the source was not recognized: family is the CHATML fallback, and the
                                 * caller should say so */
} chat_template;

/* The family of a Jinja template source (tokenizer.chat_template): "<|im_start|>" → CHATML (with Qwen2.5's
 * default system text when the source carries it), "[INST]" → LLAMA2, NULL → PLAIN (a base model), anything
 * else → CHATML with guessed set. */
chat_template chat_template_detect(const char *jinja_source);

/* The family named "chatml", "llama2" or "plain" (a command-line override; no default system text);
 * 0, or -1 with err naming the unknown name. */
int chat_template_by_name(const char *name, chat_template *out, fkv_error *err);

/* Render messages[0..n) as the family's template does, with the generation prompt when
 * add_generation_prompt. bos_text/eos_text: LLAMA2's BOS/EOS texts (may be NULL for the other families).
 * *out: a malloc'd NUL-terminated string, its length in *len (may be NULL). 0, or -1 with err naming the
 * message at fault (an unknown role, NULL content, LLAMA2's role alternation broken) or out of memory. */
int chat_render(const chat_template *t, const chat_message *messages, size_t n, bool add_generation_prompt,
                const char *bos_text, const char *eos_text, char **out, size_t *len, fkv_error *err);

/* The prompt ids of messages[0..n) for model m: rendered with the generation prompt, tokenized with
 * control-token parsing on, BOS added unless the template wrote it (LLAMA2 writes the vocabulary's "<s>").
 * *ids malloc'd. 0, or -1 with err. */
int chat_prompt_ids(const fkv_model *m, const chat_template *t, const chat_message *messages, size_t n,
                    int32_t **ids, uint32_t *n_ids, fkv_error *err);

#endif
