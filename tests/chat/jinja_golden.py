#!/usr/bin/env python3
"""jinja_golden.py — the chat templates' own renderings of fixed conversations, for tests/test_chat.c.

flatkv writes each template family out in C (src/chat/chat.c). What it must equal is what the model's Jinja source
renders, and Jinja is the judge: this renders every case below with Python's jinja2 configured as Hugging Face
transformers renders chat templates (a sandboxed environment with trim_blocks and lstrip_blocks, loop controls, its
`tojson` — json.dumps with ensure_ascii=False — `raise_exception` and `strftime_now`), and writes the results to
tests/golden/chat_templates.json, which test_chat.c renders again in C and compares byte for byte.

    tests/chat/jinja_golden.py            # check: the committed goldens are what Jinja renders now (ctest runs this)
    tests/chat/jinja_golden.py --write    # rewrite them (after adding a case)

A case names a template file of data/templates/, the messages (OpenAI's shape: an assistant's reasoning in
`reasoning_content`, tool calls with their arguments as JSON text), the tools, and the template variables flatkv
sets (add_generation_prompt, enable_thinking, reasoning_effort). The messages reach each template as flatkv hands
them over: arguments parsed into objects (the templates iterate or re-serialize them); for gpt-oss, whose template
reads an assistant's reasoning from `thinking`, reasoning_content renamed so, and the content dropped from a message
that has both reasoning and tool calls (the template refuses the pair).

strftime_now gives the date flatkv fixes for templates that write today's (src/chat/chat.h): 2025-08-05, gpt-oss's
release. Exit status 1 when a golden differs (check) or a case fails to render.
"""
import copy
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(REPO, "data", "templates")
GOLDEN = os.path.join(REPO, "tests", "golden", "chat_templates.json")
FIXED_DATE = datetime.datetime(2025, 8, 5)


def environment():
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_DATE.strftime(fmt)
    return env


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city's name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}},
        "required": ["city"]}}}
# Every TypeScript form gpt-oss's template writes for a parameter.
KINDS = {"type": "function", "function": {
    "name": "search", "description": "Search the index",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"},
        "limit": {"type": "number", "default": 10},
        "exact": {"type": "boolean", "description": "Match whole words"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "scores": {"type": "array", "items": {"type": "integer"}},
        "flags": {"type": "array", "items": {"type": "boolean"}},
        "any_list": {"type": "array"},
        "points": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "maybe": {"type": "string", "nullable": True},
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "either": {"type": ["string", "number"]},
        "one": {"type": ["string"]},
        "choice": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "number"}]},
        "filter": {"type": "object", "properties": {"field": {"type": "string"}, "value": {"type": "string"}},
                   "required": ["field"]},
        "blob": {"type": "object"},
        "unknown": {}},
        "required": ["query"]}}}
NOARGS = {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {}}}
UNICODE_TOOL = {"type": "function", "function": {
    "name": "translate", "description": "Übersetzen — 翻訳", "parameters": {"type": "object", "properties": {
        "text": {"type": "string"}}}}}


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


PARIS = call("get_weather", {"city": "Paris"})
OSLO = call("get_weather", {"city": "Oslo", "days": 2, "unit": "celsius"})
NESTED = call("search", {"query": "cats", "filter": {"field": "tag", "value": "b"}, "tags": ["a", "é"],
                         "exact": True, "limit": 2.5})

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]
TOOL_LOOP = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": "", "reasoning_content": "I should call the tool.", "tool_calls": [PARIS]},
             {"role": "tool", "content": "sunny, 24 C"}]
TOOL_LOOP_DONE = TOOL_LOOP + [{"role": "assistant", "content": "It is sunny.", "reasoning_content": "Say it."},
                              {"role": "user", "content": "And Oslo?"}]

CASES = []


def case(name, template, messages, tools=None, add_generation_prompt=True, **kwargs):
    CASES.append({"name": name, "template": template, "messages": messages, "tools": tools,
                  "add_generation_prompt": add_generation_prompt, "kwargs": kwargs})


# --- gpt-oss (harmony) ---
G = "openai-gpt-oss-120b.jinja"
case("harmony: a chat with a system message", G, CHAT)
case("harmony: no system message, no generation prompt", G, CHAT[1:], add_generation_prompt=False)
case("harmony: an empty system message writes no developer message", G, [{"role": "system", "content": ""}] + CHAT[1:2])
case("harmony: reasoning effort", G, CHAT[1:2], reasoning_effort="high")
case("harmony: past reasoning is dropped", G, [{"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet back."}, {"role": "user", "content": "Bye"}])
case("harmony: the last reply's reasoning without a generation prompt", G, [{"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet back."}], add_generation_prompt=False)
case("harmony: tools and a call in flight", G, TOOL_LOOP, tools=[WEATHER])
case("harmony: a call's reasoning stays until a final answer", G,
     TOOL_LOOP + [{"role": "assistant", "content": "", "reasoning_content": "Again.", "tool_calls": [OSLO]},
                  {"role": "tool", "content": "{\"temp\": 3}"}], tools=[WEATHER])
case("harmony: a final answer drops the calls' reasoning", G, TOOL_LOOP_DONE, tools=[WEATHER])
case("harmony: a call's preamble content is its analysis", G,
     [{"role": "user", "content": "Go"}, {"role": "assistant", "content": "Checking.", "tool_calls": [PARIS]},
      {"role": "tool", "content": "ok"}], tools=[WEATHER])
case("harmony: only the first of parallel calls", G,
     [{"role": "user", "content": "Go"}, {"role": "assistant", "content": "", "tool_calls": [PARIS, OSLO]},
      {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"}], tools=[WEATHER])
case("harmony: every parameter type", G, [{"role": "system", "content": "Be brief."},
     {"role": "user", "content": "Find"}, {"role": "assistant", "content": "", "tool_calls": [NESTED]},
     {"role": "tool", "content": "[]"}], tools=[WEATHER, KINDS, NOARGS])
case("harmony: unicode in tools and messages", G, [{"role": "user", "content": "Grüße 🌍"}], tools=[UNICODE_TOOL])

# --- GLM-4.6 and GLM-4.7-Flash ---
for version, T in (("4.6", "GLM-4.6.jinja"), ("4.7", "GLM-4.7-Flash.jinja")):
    case(f"glm{version}: a chat with a system message", T, CHAT)
    case(f"glm{version}: no generation prompt", T, CHAT[:3], add_generation_prompt=False)
    case(f"glm{version}: thinking off", T, CHAT, enable_thinking=False)
    case(f"glm{version}: a user message already ending in /nothink, thinking off", T,
         [{"role": "user", "content": "Hi /nothink"}], enable_thinking=False)
    case(f"glm{version}: reasoning in content and apart", T, [{"role": "user", "content": "Q1"},
         {"role": "assistant", "content": "<think>\nold\n</think>\n\nA1"}, {"role": "user", "content": "Q2"},
         {"role": "assistant", "content": "  A2  ", "reasoning_content": "\n new \n"}])
    case(f"glm{version}: tools, calls and results", T, TOOL_LOOP + [{"role": "tool", "content": "windy"}],
         tools=[WEATHER, NOARGS])
    case(f"glm{version}: a finished tool loop", T, TOOL_LOOP_DONE, tools=[WEATHER])
    case(f"glm{version}: argument values of every type", T,
         [{"role": "user", "content": "Go"},
          {"role": "assistant", "content": "Let me see.", "tool_calls": [NESTED, OSLO, call("now", {})]}],
         tools=[KINDS, WEATHER, NOARGS], add_generation_prompt=False)
    case(f"glm{version}: a tool result first, unicode", T,
         [{"role": "tool", "content": "früh"}, {"role": "user", "content": "日本"}], tools=[UNICODE_TOOL])

# --- Qwen3 (the MoE models' template too), with reasoning given apart ---
Q = "Qwen-Qwen3-0.6B.jinja"
case("qwen3: reasoning apart, after the last query", Q, [{"role": "user", "content": "Q"},
     {"role": "assistant", "content": "\n\nA", "reasoning_content": "\nthink\n"}], add_generation_prompt=False)
case("qwen3: reasoning apart before the last query", Q, [{"role": "user", "content": "Q"},
     {"role": "assistant", "content": "\nA", "reasoning_content": "think"}, {"role": "user", "content": "Q2"}])
case("qwen3: a tool loop with reasoning apart", Q, TOOL_LOOP, tools=[WEATHER])

# --- Qwen3-Coder (Qwen3-Coder-30B-A3B, a qwen3moe model): ChatML with XML tools ---
C = "Qwen3-Coder.jinja"
CODE = call("write_file", {"path": "a.py", "content": "if a < b:\n    print('x')\n", "mode": 420, "append": False,
                           "lines": [1, 2], "meta": {"k": None}})
WRITE = {"type": "function", "function": {
    "name": "write_file", "description": "  Write a file.  ",
    "parameters": {"type": "object", "properties": {
        "path": {"type": "string", "description": "Where"},
        "content": {"type": "string"},
        "mode": {"type": "integer", "minimum": 0, "default": 420},
        "append": {"type": "boolean", "enum": [True, False]},
        "lines": {"type": "array", "items": {"type": "integer"}},
        "meta": {"description": "anything"}},
        "required": ["path", "content"], "additionalProperties": False},
    "strict": True}}
case("qwen3-coder: a chat", C, CHAT)
case("qwen3-coder: tools with no system message", C, TOOL_LOOP + [{"role": "tool", "content": "windy"}],
     tools=[WEATHER, NOARGS])
case("qwen3-coder: tools, a system message, calls of every value type", C,
     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write it"},
      {"role": "assistant", "content": "  Writing.  ", "tool_calls": [CODE, call("now", {})]},
      {"role": "tool", "content": "ok"}, {"role": "user", "content": "Thanks"},
      {"role": "assistant", "content": "Done."}], tools=[WRITE, NOARGS])
case("qwen3-coder: a tool result first and last", C, [{"role": "tool", "content": "early"},
     {"role": "user", "content": "Hi"}, {"role": "tool", "content": "late"}], add_generation_prompt=False)

# --- Qwen3.5 (Qwen3.6 too; dense and MoE): Qwen3's thinking, Qwen3-Coder's calls, contents stripped ---
Q35 = "Qwen3.5-4B.jinja"
case("qwen3.5: a chat, thinking on", Q35, CHAT)
case("qwen3.5: thinking off", Q35, CHAT, enable_thinking=False)
case("qwen3.5: no generation prompt, reasoning in content and apart, contents stripped", Q35,
     [{"role": "system", "content": "  Be kind.\n"}, {"role": "user", "content": " Q1 "},
      {"role": "assistant", "content": "<think>\nold\n</think>\n\nA1"}, {"role": "user", "content": "Q2"},
      {"role": "assistant", "content": "  A2  ", "reasoning_content": "\n new \n"}], add_generation_prompt=False)
case("qwen3.5: tools without a system message, a call in flight", Q35, TOOL_LOOP + [{"role": "tool", "content": "windy"}],
     tools=[WEATHER, NOARGS])
case("qwen3.5: tools, a system message, calls of every value type, a finished loop", Q35,
     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write it"},
      {"role": "assistant", "content": "  Writing.  ", "tool_calls": [CODE, call("now", {})]},
      {"role": "tool", "content": "ok"}, {"role": "assistant", "content": "Done.", "reasoning_content": "Fine."},
      {"role": "user", "content": "Thanks"}], tools=[WRITE, NOARGS])
case("qwen3.5: a tool result first, a wrapped response as the user's, unicode", Q35,
     [{"role": "tool", "content": "früh"}, {"role": "user", "content": "日本"},
      {"role": "user", "content": "<tool_response>x</tool_response>"}], tools=[UNICODE_TOOL])


def template_messages(template, messages):
    """The messages as flatkv hands them to the template (see the top of this file)."""
    out = copy.deepcopy(messages)
    for m in out:
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        if template.startswith("openai-gpt-oss") and "reasoning_content" in m:
            m["thinking"] = m.pop("reasoning_content")
            if m.get("tool_calls"):
                del m["content"]
    return out


def render(env, c):
    with open(os.path.join(TEMPLATES, c["template"]), encoding="utf-8") as f:
        source = f.read()
    kwargs = dict(c["kwargs"])
    if c["tools"] is not None:
        kwargs["tools"] = c["tools"]
    return env.from_string(source).render(messages=template_messages(c["template"], c["messages"]),
                                          add_generation_prompt=c["add_generation_prompt"], **kwargs)


def main():
    env = environment()
    golden = []
    for c in CASES:
        try:
            golden.append(dict(c, expected=render(env, c)))
        except jinja2.exceptions.TemplateError as e:
            print(f"FAIL {c['name']}: the template raised: {e}")
            return 1
    text = json.dumps(golden, ensure_ascii=False, indent=1) + "\n"
    if sys.argv[1:] == ["--write"]:
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {len(golden)} cases to {os.path.relpath(GOLDEN, REPO)}")
        return 0
    try:
        with open(GOLDEN, encoding="utf-8") as f:
            committed = f.read()
    except OSError:
        committed = ""
    if committed == text:
        print(f"ok: the {len(golden)} golden renderings are what Jinja renders")
        return 0
    old = {g["name"]: g for g in json.loads(committed)} if committed else {}
    for g in golden:
        if old.get(g["name"]) != g:
            print(f"FAIL {g['name']}: the golden differs from Jinja's rendering:\n{g['expected']!r}")
    print("rewrite with: tests/chat/jinja_golden.py --write")
    return 1


if __name__ == "__main__":
    sys.exit(main())
