/* chat.h — chat templates: a conversation (system/user/assistant/tool messages) rendered as the prompt text
 * the model was trained on.
 *
 * WHY: a chat client re-sends the whole transcript every turn, and the engine reuses the longest common
 * token prefix of that prompt with what its KV holds (docs/design.md §2). Two things follow. The rendering
 * must be exactly what the model's own Jinja template gives (anything else is a different prompt), and
 * it must be prefix-stable: the rendering of turns 1..k with the generation prompt, followed by the
 * reply the model wrote, must be a prefix of the rendering of turns 1..k+1 — then the KV of the last turn
 * (prompt + generated tokens) is reused as far as re-tokenization agrees. Where a template itself rewrites
 * history (DEEPSEEK and Qwen3 at past reasoning, MISTRAL with a system message: see below) the rendering does too, exactly,
 * and reuse breaks where the template's does. Jinja is not interpreted here:
 * the few template families in wide use are written out in C, each following its source line by line.
 *
 * The families (what chat_render writes; [x] is optional, `+` concatenates, no other whitespace):
 * - CHAT_CHATML — Qwen2.5-Instruct's template (data/templates/Qwen-Qwen2.5-7B-Instruct.jinja) without
 *   tool definitions:
 *     ["<|im_start|>system\n" + default_system + "<|im_end|>\n"]   when messages[0] is not a system message
 *                                                                   and the template has a default system
 *     system/user/assistant: "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"
 *     tool (a run of consecutive tool messages shares one turn):
 *        ["<|im_start|>user"] + "\n<tool_response>\n" + content + "\n</tool_response>" + ["<|im_end|>\n"]
 *     generation prompt: "<|im_start|>assistant\n"
 *   Prefix-stable: the reply is written verbatim after the generation prompt.
 *   With qwen3_thinking — Qwen3's template (data/templates/Qwen-Qwen3-0.6B.jinja; the MoE models' too), no default
 *   system, the same tool forms — an assistant content with "</think>" is split: visible = what follows the
 *   last "</think>" minus leading newlines; reasoning = what precedes the first, after the last "<think>",
 *   minus outer newlines. An assistant message after the last user message that is not a wrapped
 *   "<tool_response>" (the template's last_query_index) is written "<think>\n" + reasoning + "\n</think>\n\n"
 *   + visible when it is the last message or has reasoning; every other one as visible alone. Generation
 *   prompt: "<|im_start|>assistant\n", + "<think>\n\n</think>\n\n" when no_thinking (enable_thinking = false).
 *   REWRITES HISTORY by design, precisely: turn k+1's rendering keeps turn k's whole prompt as an exact
 *   prefix (through the "<|im_start|>assistant\n" of the generation prompt) and then writes the reply's visible
 *   text only — a reply with reasoning is recomputed from its first byte; with no_thinking the prompt's empty
 *   think block is dropped, so reuse ends 16 bytes before the prompt's end. Replies without "</think>" are
 *   prefix-stable. Within a tool loop (no new user message) the reasoning stays, so the loop is prefix-stable
 *   until the next user message drops it. A reasoning given apart (chat_message.reasoning, OpenAI's
 *   reasoning_content) is the template's reasoning_content: the content is then not split, and is written as is
 *   outside a think block, without leading newlines inside one.
 *   With qwen3_coder — Qwen3-Coder's template (data/templates/Qwen3-Coder.jinja; the 30B-A3B MoE's), no thinking:
 *     ["<|im_start|>system\n" + (messages[0] when a system message, else "You are Qwen, a helpful AI assistant that
 *       can interact with a computer to solve tasks." with tools) + [the tool block] + "<|im_end|>\n"]
 *     tool block: "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>" + per tool "\n<function>\n
 *       <name>" + name + "</name>" + ["\n<description>" + strip(description) + "</description>"] + "\n<parameters>" +
 *       per parameter ("\n<parameter>\n<name>" + name + "</name>" + ["\n<type>" + type + "</type>"] +
 *       ["\n<description>" + strip(its description) + "</description>"] + its other keys + "\n</parameter>") +
 *       the parameters' other keys + "\n</parameters>" + the tool's other keys + "\n</function>", then "\n</tools>"
 *       and the call format's instructions; an other key: "\n<" + key + ">" + (a mapping or list as json.dumps, else
 *       Python's str()) + "</" + key + ">"
 *     assistant with calls: "<|im_start|>assistant" + ["\n" + strip(content) + "\n" when not blank] + per call
 *       "\n<tool_call>\n<function=" + name + ">\n" + per argument ("<parameter=" + key + ">\n" + (a mapping or list
 *       as json.dumps, else str()) + "\n</parameter>\n") + "</function>\n</tool_call>", then "<|im_end|>\n"
 *     tool: ["<|im_start|>user\n" after a message that is no tool result] + "<tool_response>\n" + content +
 *       "\n</tool_response>\n" + ["<|im_end|>\n" unless a tool result follows]   (a first message that is a tool
 *       result opens no turn: the template's quirk, kept)
 *     other messages and the generation prompt as CHATML's.
 *   Prefix-stable for any reply, calls included when the model writes them as the template does.
 *   With both — Qwen3.5's template (data/templates/Qwen3.5-4B.jinja; the whole Qwen3.5/3.6 line, dense and MoE):
 *     every content stripped (the template's |trim) before use; the template refuses a conversation with no user
 *     message but wrapped tool responses, and a system message after the first (chat_render fails)
 *     ["<|im_start|>system\n" + (with tools: "# Tools\n\nYou have access to the following functions:\n\n<tools>" +
 *       per tool "\n" + json.dumps(tool) + "\n</tools>" + the call format's instructions + ["\n\n" + system when
 *       not empty]; else the system text) + "<|im_end|>\n"]   with tools or a leading system message
 *     user: "<|im_start|>user\n" + content + "<|im_end|>\n"
 *     assistant: "<|im_start|>assistant\n" + ["<think>\n" + strip(reasoning) + "\n</think>\n\n" after the last
 *       query, always] + visible, the reasoning and visible split as Qwen3's (or the reasoning given apart); per call
 *       ("\n\n" before the first when visible is not blank, "\n" before the others) + "<tool_call>\n<function=" +
 *       name + ">\n" + Qwen3-Coder's parameters + "</function>\n</tool_call>"; then "<|im_end|>\n"
 *     tool: Qwen2.5's form, a run sharing one user turn (a first message that is a tool result opens none)
 *     generation prompt: "<|im_start|>assistant\n<think>\n", or with no_thinking "<|im_start|>assistant\n<think>
 *       \n\n</think>\n\n"
 *   REWRITES HISTORY as Qwen3 does: once a user message follows, a reply's think block is dropped, so a reply is
 *   reused through the prompt's "<|im_start|>assistant\n" only (the prompt's "<think>\n" is gone); within a tool
 *   loop the blocks stay. With no_thinking the prompt's empty block is dropped too.
 * - CHAT_SMOLLM3 — HuggingFaceTB/SmolLM3-3B's template:
 *     "<|im_start|>system\n" + "## Metadata\n\nKnowledge Cutoff Date: June 2025\n" + ["Today Date: " +
 *     date_string + "\n"] + "Reasoning Mode: " + mode + "\n\n## Custom Instructions\n\n" + (custom + "\n\n",
 *     or the mode's default text) + "<|im_end|>\n"
 *     mode: "/no_think" when the leading system message contains "/no_think", else "/think" when it contains
 *     "/think", else "/think" unless no_thinking; custom: that system text with "/no_think" and then "/think"
 *     removed and trailing whitespace stripped. Other system messages are written nowhere.
 *     With date_string (the original template) a system text containing "/system_override" replaces the whole
 *     header: "<|im_start|>system\n" + custom without "/system_override", rstripped, + "<|im_end|>\n".
 *     user and tool: "<|im_start|>user\n" + content + "<|im_end|>\n"
 *     assistant: "<|im_start|>assistant\n" + ["<think>\n\n</think>\n" in /no_think] + lstrip("\n", content)
 *                + "<|im_end|>\n"
 *     generation prompt: "<|im_start|>assistant\n" + ["<think>\n\n</think>\n" in /no_think]
 *   The template writes strftime_now("%d %B %Y"): date_string is fixed at "08 July 2025" (the release) for the
 *   reason given for LLAMA3; Unsloth's edit (no date line) is detected too. Prefix-stable for replies without
 *   leading newlines; switching the mode between turns rewrites the header (reuse breaks at the mode).
 * - CHAT_LLAMA2 — Llama-2-chat's template (meta-llama/Llama-2-*-chat-hf tokenizer_config.json):
 *     the first message, when a system message, is folded into the first user message as
 *     "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + user; then for message i of the rest (which must alternate
 *     user, other, user, other...: the template raises otherwise, chat_render fails):
 *     user: bos_text + "[INST] " + strip(content) + " [/INST]"
 *     assistant: " " + strip(content) + " " + eos_text
 *     system/tool at an odd index: nothing (the template has no branch for them).
 *     There is no generation prompt: a rendering ending in a user message already ends in " [/INST]".
 *   strip() removes ASCII whitespace (Python's str.strip also removes Unicode spaces; the difference
 *   matters only for content that begins or ends with them; the same holds for every family's strip).
 *   Prefix-stable when the reply is " " + strip(reply) — what a SentencePiece model writes, since its
 *   first piece carries the space.
 * - CHAT_LLAMA3 — Llama-3.1/3.2/3.3-Instruct's template (data/templates/meta-llama-Llama-3.*.jinja)
 *   without tools, and Llama-3.0's (date_string NULL):
 *     bos_text
 *     3.1+ only: "<|start_header_id|>system<|end_header_id|>\n\n" + "Cutting Knowledge Date: December 2023\n"
 *       + "Today Date: " + date_string + "\n\n" + [strip(messages[0]) when a system message] + "<|eot_id|>"
 *       (written even without a system message; a leading system message goes only here)
 *     tool (3.1+): "<|start_header_id|>ipython<|end_header_id|>\n\n" + content + "<|eot_id|>"   (no strip)
 *     other messages: "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + strip(content) + "<|eot_id|>"
 *     generation prompt: "<|start_header_id|>assistant<|end_header_id|>\n\n"
 *   Llama-3.0 writes bos_text before the first message only and gives tool messages the "tool" header.
 *   date_string is the templates' own fallback "26 Jul 2024": 3.2's template writes today's date when the
 *   renderer defines strftime_now, which would change the prompt's 10th token every midnight and break
 *   reuse. Prefix-stable for replies without leading or trailing whitespace.
 * - CHAT_MISTRAL — Mistral-Instruct's "[INST]" templates, in one of three whitespace variants:
 *     V3 (Mistral-7B-Instruct-v0.3):   user "[INST] " + c + "[/INST]"    assistant " " + strip(c) + eos_text
 *     TEKKEN (data/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja):
 *                                      user "[INST]" + c + "[/INST]"     assistant c + eos_text
 *     V1 (v0.1/v0.2 as first released): user "[INST] " + c + " [/INST]"  assistant c + eos_text
 *   preceded by bos_text once; after an optional leading system message (V1: none), roles must
 *   alternate user/assistant starting with user (the templates raise otherwise). V3/TEKKEN write the
 *   system text only in the LAST message, when it is a user's: "[INST]" (V3: "[INST] ") + system + "\n\n"
 *   + c + "[/INST]" — so with a system message they REWRITE HISTORY (the text moves to each new user
 *   message and reuse breaks inside the first instruction). Without one they are prefix-stable (V3 for
 *   replies " " + strip(reply), as LLAMA2; TEKKEN/V1 for any reply). Tool messages are refused: the
 *   templates require a 9-character tool_call_id, which chat_message does not carry. No generation
 *   prompt.
 * - CHAT_PHI3 — Phi-3/3.5-mini-instruct's (data/templates/microsoft-Phi-3.5-mini-instruct.jinja):
 *     system (non-empty only)/user/assistant: "<|" + role + "|>\n" + content + "<|end|>\n"
 *     tool: nothing (the template has no branch for it)
 *     generation prompt: "<|assistant|>\n"; without it the rendering ends in eos_text
 *   Phi-4-mini (phi = CHAT_PHI_4_MINI; its template without tools): every message, tool and empty system
 *   included, "<|" + role + "|>" + content + "<|end|>"; generation prompt "<|assistant|>", else eos_text.
 *   Prefix-stable for any reply.
 * - CHAT_GEMMA — Gemma-2's (data/templates/google-gemma-2-2b-it.jinja) and Gemma-3's:
 *     bos_text, then for message i (roles must alternate user, other, user...; the template raises):
 *     "<start_of_turn>" + ("model" for assistant, else role) + "\n" + strip(content) + "<end_of_turn>\n"
 *     generation prompt: "<start_of_turn>model\n"
 *   A leading system message is refused (Gemma-2: "System role not supported"), or with fold_system
 *   (Gemma-3's template, --chat-template gemma3) written as content + "\n\n" before the first message's
 *   stripped content.
 *   Prefix-stable for replies without leading or trailing whitespace.
 * - CHAT_ZEPHYR — HuggingFaceH4/zephyr-7b-beta's (its newlines are output: HF renders with trim_blocks):
 *     system/user/assistant: "<|" + role + "|>\n" + content + eos_text + "\n";  tool: nothing
 *     generation prompt (after at least one message): "<|assistant|>\n"
 *   Prefix-stable for any reply.
 * - CHAT_DEEPSEEK — DeepSeek-R1-Distill's (data/templates/deepseek-ai-DeepSeek-R1-Distill-*.jinja):
 *     bos_text + the LAST system message's content (system messages are written nowhere else), then
 *     user: "<｜User｜>" + content
 *     assistant: "<｜Assistant｜>" + (the text after the last "</think>" of content, or all of it)
 *                + "<｜end▁of▁sentence｜>"; right after tool messages: "<｜tool▁outputs▁end｜>" + content
 *                + "<｜end▁of▁sentence｜>" instead
 *     tool: the conversation's first: "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" + content
 *           + "<｜tool▁output▁end｜>"; later ones: "\n<｜tool▁output▁begin｜>" + content + "<｜tool▁output▁end｜>"
 *     end: "<｜tool▁outputs▁end｜>" when the last message is a tool message; otherwise the generation
 *          prompt "<｜Assistant｜><think>\n"
 *   NOT prefix-stable: the template REWRITES HISTORY. A past reply loses "<think>\n" and its reasoning
 *   (everything up to "</think>"), so reuse breaks right after the "<｜Assistant｜>" of the first past
 *   reply; a new or changed system message rewrites the very start.
 * - CHAT_HARMONY — gpt-oss's harmony format (data/templates/openai-gpt-oss-120b.jinja):
 *     "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
 *       + "2024-06\nCurrent date: " + date_string + "\n\nReasoning: " + reasoning_effort + "\n\n# Valid channels: "
 *       + "analysis, commentary, final. Channel must be included for every message." + ["\nCalls to these tools "
 *       + "must go to the commentary channel: 'functions'." with tools] + "<|end|>"
 *     ["<|start|>developer<|message|>" + ["# Instructions\n\n" + messages[0] + "\n\n"] + ["# Tools\n\n" + the
 *       tools as a TypeScript namespace] + "<|end|>"]   when messages[0] is a non-empty system message, or tools
 *     user: "<|start|>user<|message|>" + content + "<|end|>";  a later system message: nothing
 *     assistant: "<|start|>assistant<|channel|>final<|message|>" + content + "<|end|>" (the last message without a
 *       generation prompt: its reasoning as an analysis message first, and "<|return|>" for "<|end|>")
 *     assistant with calls (its first call only: the template assumes one):
 *       ["<|start|>assistant<|channel|>analysis<|message|>" + (reasoning, or else content) + "<|end|>"]
 *       + "<|start|>assistant to=functions." + name + "<|channel|>commentary json<|message|>" + arguments (json.dumps)
 *       + "<|call|>"
 *     tool: "<|start|>functions." + (the last call's name) + " to=assistant<|channel|>commentary<|message|>"
 *       + content as a JSON string + "<|end|>"   (without a call before it the template raises: refused)
 *     generation prompt: "<|start|>assistant"
 *   The template reads an assistant's reasoning from `thinking`: chat_message.reasoning is it, and a message with
 *   both reasoning and calls is written from its reasoning (the template raises on the pair; content there is a
 *   preamble the model also wrote). Contents holding "<|channel|>analysis<|message|>" or "<|channel|>final
 *   <|message|>" are refused, as the template refuses them. reasoning_effort: "medium" unless set (NULL); the
 *   template writes strftime_now("%Y-%m-%d"): date_string is fixed at "2025-08-05" (the release) for the reason
 *   given for LLAMA3. A tool as TypeScript (render_typescript_type, line by line): "// " + description + "\ntype "
 *   + name + " = " + ("() => any;\n\n" without parameters.properties, else "(_: {\n" + per parameter ["// " +
 *   its description + "\n"] + name + ["?" unless required] + ": " + its type + [its default] + ",\n", then
 *   "}) => any;\n\n"); a tool without a description gets "// \n" (the template's undefined would raise).
 *   REWRITES HISTORY, precisely: a past final answer is written without its reasoning, so a reply that began with
 *   an analysis message is recomputed from the first byte after the prompt's "<|start|>assistant"; one without
 *   reasoning is reused through its content (the template's "<|end|>" stands where the model's "<|return|>" ended
 *   it). In a tool loop the analysis before each call stays (prefix-stable through the call's arguments when the
 *   model wrote the recipient before the channel, as the template does; a model that writes "<|channel|>commentary
 *   to=functions.NAME" is reused up to that header) until an assistant message without calls follows: from then
 *   on every call's analysis is dropped, and reuse breaks after the "<|start|>assistant" of the first call that had
 *   one.
 * - CHAT_GLM — GLM-4.5/4.6's (data/templates/GLM-4.6.jinja) and, glm = CHAT_GLM_47, GLM-4.7's
 *   (data/templates/GLM-4.7-Flash.jinja), which write no newlines between parts ([n] below: "\n" in 4.6 only):
 *     "[gMASK]<sop>" + ["<|system|>\n# Tools\n\n..." + each tool as json.dumps writes it + "\n" + "</tools>\n\n..."
 *       + the call format   with tools]
 *     system: "<|system|>" + [n] + content;   user: "<|user|>" + [n] + content + ["/nothink": 4.6 with no_thinking,
 *       unless the content ends with it]
 *     assistant: "<|assistant|>" + ([n] + "<think>" + strip(reasoning) + "</think>"   after the last user message
 *       and with reasoning; else 4.6 "\n<think></think>", 4.7 "</think>") + [[n] + strip(content) when not blank]
 *       + per call [n] + "<tool_call>" + name + [n] + per argument ("<arg_key>" + key + "</arg_key>" + [n]
 *       + "<arg_value>" + (a string as is, else json.dumps) + "</arg_value>" + [n]) + "</tool_call>"
 *     tool: ["<|observation|>" unless after a tool message] + [n] + "<tool_response>" + [n] + content + [n]
 *       + "</tool_response>"
 *     generation prompt: "<|assistant|>" + (4.6: ["\n<think></think>" with no_thinking]; 4.7: "</think>" with
 *       no_thinking, else "<think>")
 *   reasoning: chat_message.reasoning, or else split from the content as Qwen3's (what precedes the first
 *   "</think>" after its last "<think>", outer newlines dropped; the content: what follows the last "</think>").
 *   A call's arguments must be a JSON object (the template raises otherwise). The BOS text is "[gMASK]", which the
 *   template writes itself: a vocabulary whose BOS it is gets no second one.
 *   REWRITES HISTORY, as Qwen3: past reasoning is dropped once a user message follows — 4.6 keeps the prompt and
 *   the reply's "\n<think>" and breaks inside the think block; 4.7 breaks right after the reply's "<|assistant|>",
 *   the prompt's "<think>" included. Replies without reasoning and outer whitespace (4.7 with no_thinking, whose
 *   prompt ends "</think>") are prefix-stable; so is a tool loop whose reasoning comes back as given.
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
 * Hermes-2-Pro/Hermes-3 are CHATML (no default system). Their templates render tool results as a "tool"
 * turn rather than Qwen's "user" turn; that difference is not written here (Qwen's form is used).
 *
 * BOS/EOS: LLAMA2, LLAMA3, MISTRAL, GEMMA and DEEPSEEK write bos_text as their templates write bos_token
 * (LLAMA2, MISTRAL, PHI3 and ZEPHYR write eos_text too); CHATML, PHI3, ZEPHYR and PLAIN write no BOS and
 * the caller adds it as the model's tokenizer says. chat_prompt_ids passes each family's usual texts
 * ("<s>"/"</s>", "<|begin_of_text|>", "<bos>", "<｜begin▁of▁sentence｜>", Phi-3's "<|endoftext|>") when the
 * vocabulary has them as single tokens, "" otherwise, and has the tokenizer add BOS only when the
 * rendering does not already begin with it: BOS exactly once, whichever side writes it.
 *
 * Control tokens come from the template only: chat_prompt_ids parses control-token texts in what the
 * template writes and keeps them as text in what the conversation supplies (contents, tool calls, tool
 * definitions), so a message cannot inject "<|im_end|>" or "<s>". (User-defined tokens are split out of
 * contents as llama.cpp and HF split them from any text: gpt-oss's "<|start|>", "<|channel|>", "<|message|>",
 * "<|constrain|>" and "<|end|>" among them, which the tokenizer makes user-defined as llama.cpp does.)
 *
 * Thread-safety: pure functions; the returned strings are the caller's.
 */
#ifndef FKV_CHAT_H
#define FKV_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "flatkv.h"

typedef enum {
    CHAT_CHATML = 0,
    CHAT_LLAMA2 = 1,
    CHAT_PLAIN = 2,
    CHAT_LLAMA3 = 3,
    CHAT_MISTRAL = 4,
    CHAT_PHI3 = 5,
    CHAT_GEMMA = 6,
    CHAT_ZEPHYR = 7,
    CHAT_DEEPSEEK = 8,
    CHAT_SMOLLM3 = 9,
    CHAT_HARMONY = 10,
    CHAT_GLM = 11,
} chat_family;

typedef enum { CHAT_PHI_3 = 0, CHAT_PHI_4_MINI = 1 } chat_phi_variant;

typedef enum { CHAT_MISTRAL_V3 = 0, CHAT_MISTRAL_TEKKEN = 1, CHAT_MISTRAL_V1 = 2 } chat_mistral_variant;

typedef enum { CHAT_GLM_46 = 0, CHAT_GLM_47 = 1 } chat_glm_variant;

/* A function call an assistant message made (OpenAI's tool_calls[i].function). */
typedef struct {
    const char *name;
    const char *arguments; /* JSON text: an object, as the model wrote it */
} chat_tool_call;

typedef struct {
    const char *role; /* "system", "user", "assistant" or "tool" */
    const char *content;
    const chat_tool_call *tool_calls; /* assistant: calls it made (content may then be "") */
    size_t n_tool_calls;
    const char *reasoning; /* assistant: its reasoning given apart from the content (OpenAI's reasoning_content);
                            * NULL: none given (Qwen3 and GLM then look for it in the content) */
} chat_message;

typedef struct {
    chat_family family;
    const char *default_system; /* CHATML: the system text the template inserts when the conversation has
                                 * none (Qwen2.5's); NULL: none. Static storage. */
    bool guessed;               /* the source was not recognized: family is the CHATML fallback, and the
                                 * caller should say so */
    const char *date_string;    /* LLAMA3: the "Today Date" of the 3.1+ system header, NULL: Llama-3.0's template,
                                 * which has none; SMOLLM3 and HARMONY: the date their headers write. Static
                                 * storage. */
    chat_mistral_variant mistral; /* MISTRAL: the whitespace variant */
    bool fold_system;           /* GEMMA: a leading system message is folded into the first turn (Gemma-3)
                                 * rather than refused (Gemma-2) */
    chat_phi_variant phi;       /* PHI3: Phi-3/3.5-mini's form or Phi-4-mini's */
    bool qwen3_thinking;        /* CHATML: Qwen3's template (reasoning in <think> blocks; no default system) */
    bool qwen3_coder;           /* CHATML: Qwen3-Coder's template (tools and calls as XML); with qwen3_thinking,
                                 * Qwen3.5's (Qwen3's thinking, Qwen3-Coder's calls, its own tool block) */
    bool no_thinking;           /* CHATML with qwen3_thinking, SMOLLM3, GLM: the request's enable_thinking = false.
                                 * Not part of the model's template: a caller copies the template per
                                 * conversation and sets it (false, the zero value, is the templates' default). */
    const char *reasoning_effort; /* HARMONY: the request's reasoning effort ("low", "medium", "high"), set per
                                   * conversation like no_thinking (borrowed); NULL: "medium" */
    chat_glm_variant glm;       /* GLM: 4.5/4.6's form or 4.7's */
} chat_template;

/* The family of a Jinja template source (tokenizer.chat_template), by the control texts it writes: the first row of
 * chat.c's family table (chat_families, in the order they are tried) whose marker the source contains and whose
 * detect function accepts it, with the variant that function reads from it (Llama-3.1+ and SmolLM3's dated form by
 * "Today Date: ", Qwen2.5's default system text, Qwen3's thinking, Gemma-3's folded system, Phi-4-mini's form,
 * Mistral's spacing). NULL → PLAIN (a base model); a source no row accepts → CHATML with guessed set. */
chat_template chat_template_detect(const char *jinja_source);

/* The template a command-line override names: a row of chat.c's preset table (chat_presets: "chatml", "qwen3",
 * "llama3" for 3.1+, "gemma" for Gemma-2, ...; no default system text). 0, or -1 with err naming the unknown name and
 * listing the table's. */
int chat_template_by_name(const char *name, chat_template *out, fkv_error *err);

/* Tools (tools: the request's OpenAI `tools` array, or NULL/empty for none) are rendered as the family's
 * template does — CHATML as Qwen2.5's "# Tools" system block (each tool as json.dumps writes it), LLAMA3
 * (3.1+) as the "Environment: ipython" header and the function list in the first user message (indent 4), HARMONY
 * as a TypeScript namespace in the developer message, GLM as its system block of json.dumps lines — and assistant
 * tool calls as <tool_call> JSON (CHATML), {"name", "parameters"} (LLAMA3), a commentary message to=functions.NAME
 * (HARMONY) or <tool_call> with <arg_key>/<arg_value> pairs (GLM). Other families have no tool form here: rendering
 * tools for them fails with err.
 *
 * Render messages[0..n) as the family's template does, with the generation prompt when
 * add_generation_prompt. bos_text/eos_text: the vocabulary's BOS/EOS texts for the families that write
 * them; NULL: the family's usual text (see BOS/EOS above). *out: a malloc'd NUL-terminated string, its
 * length in *len (may be NULL). 0, or -1 with err naming the message at fault (an unknown role, NULL
 * content, a role order or role the family's template raises on) or out of memory. */
int chat_render(const chat_template *t, const chat_message *messages, size_t n, const json_t *tools,
                bool add_generation_prompt,
                const char *bos_text, const char *eos_text, char **out, size_t *len, fkv_error *err);

/* The prompt ids of messages[0..n) for model m: rendered with the generation prompt and the family's
 * BOS/EOS texts where the vocabulary has them, tokenized with control-token parsing on in the template's
 * text and off in the conversation's (see above; a content without control-token texts gets the same ids
 * either way), BOS added unless the rendering begins with it.
 * *ids malloc'd. 0, or -1 with err. */
int chat_prompt_ids(const fkv_model *m, const chat_template *t, const chat_message *messages, size_t n,
                    const json_t *tools, int32_t **ids, uint32_t *n_ids, fkv_error *err);

/* A token a family's template writes as one token, as its models' vocabularies hold it. */
typedef struct {
    const char *text;
    bool user_defined;   /* USER_DEFINED in the models' files (decoded as text, split out of any text); else CONTROL */
    const char *special; /* the special token the models' converter makes it ("bos", "eot", "eom": the key
                          * tokenizer.ggml.<special>_token_id), or NULL */
} chat_vocab_token;

/* The tokens t's family's template writes that a vocabulary must hold as single tokens for the rendering to mean
 * what the model was trained on — listed for the families whose models have a vocabulary of their own that the
 * test data lacks (HARMONY, GLM), so that a generated model with another vocabulary gets them (gen-model
 * --chat-template). *n of them (0 and NULL: none listed); static storage. */
const chat_vocab_token *chat_vocab_tokens(const chat_template *t, size_t *n);

/* The ids that follow a finished reply when messages[0..n) come next: what the template writes after an assistant
 * message's content (its end of turn: ChatML's "<|im_end|>\n", PLAIN's "\n", ...), the messages, and the generation
 * prompt — tokenized as chat_prompt_ids tokenizes them, as text that follows the id prev (the reply's last id kept;
 * tok_encode_after), with no BOS. system: the conversation's leading system text (NULL: none), which some templates
 * write again later (MISTRAL V3/TEKKEN in the newest user message, SMOLLM3's reasoning mode in every turn).
 *
 * WHY: a conversation continued from the exact ids its last turn was fed and generated (the Responses API's
 * previous_response_id) never re-renders or re-tokenizes a past turn, so every one of them is reused; only this
 * continuation is new. It is rendered after a stand-in conversation of one turn and cut after the stand-in reply.
 * Exact — the text a rendering of the whole conversation writes after that reply — for every family whose
 * template writes a turn from that turn alone and the leading system text: CHATML (Qwen2.5, Hermes, Qwen3's,
 * Qwen3-Coder's and Qwen3.5's forms), LLAMA2, LLAMA3, MISTRAL, PHI3, GEMMA, ZEPHYR, SMOLLM3, GLM and PLAIN, and HARMONY after a final
 * answer (the template's "<|end|>" where the model's "<|return|>" ended it). Not for DEEPSEEK, whose tool outputs are
 * framed by whether an earlier one exists; a HARMONY tool result is refused (the stand-in reply makes no call for
 * the template to name). Where a template rewrites history (Qwen3 and DeepSeek drop past
 * reasoning, MISTRAL V3/TEKKEN move the system text to the newest user message) the past turns stay as they were
 * fed, which a whole re-rendering would change. Tools are not rendered: every family writes them before the first
 * turn. 0, or -1 with err (no messages, a role order the template refuses, a message containing the stand-in). */
int chat_continuation_ids(const fkv_model *m, const chat_template *t, const char *system, const chat_message *messages,
                          size_t n, int32_t prev, int32_t **ids, uint32_t *n_ids, fkv_error *err);
/* The ids of text[0..len) as they follow the id prev in a sequence (control tokens' texts as text): a model's output
 * after its prompt, with the space prefix SentencePiece gives a text's start only where the tokenizer's rule does
 * (tok_encode_after). *ids malloc'd (NULL for none), 0, or -1 with err. */
int chat_text_ids_after(const fkv_model *m, int32_t prev, const char *text, size_t len, int32_t **ids,
                        uint32_t *n_ids, fkv_error *err);
/* The text chat_continuation_ids tokenizes, with BOS/EOS texts as chat_render takes them. */
int chat_render_continuation(const chat_template *t, const char *system, const chat_message *messages, size_t n,
                             const char *bos_text, const char *eos_text, char **out, size_t *len, fkv_error *err);

#endif
