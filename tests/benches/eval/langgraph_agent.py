#!/usr/bin/env python3
"""The anchor of droidwarden's home eval (docs/eval.md): one task through
LangGraph's prebuilt ReAct agent (`langgraph.prebuilt.create_react_agent`).

The eval bench (`cargo bench -p droidwarden-e2e --bench eval` with
`EVAL_AGENTS=droidwarden,langgraph`) starts the phones and the daemon, sets
each task up, runs this script with the task's prompt, answers the approval
requests the daemon raises (the same way as for droidwarden's own agent) and
checks the phones' end state afterwards. This script only runs the agent:

- the model: the same OpenAI-compatible endpoint and model name, through
  `langchain_openai.ChatOpenAI` (temperature 0, as the daemon's default);
- the system prompt: the daemon's (`--system-prompt`, passed by the bench);
- the tools: the daemon's own, from its MCP endpoint (`android_device`,
  `list_devices`, ...) via `langchain-mcp-adapters`, so every call goes
  through the same catalogue validation, policy and approvals;
- the iteration cap: droidwarden's default, 10 model calls.

It prints one JSON line last: answer, steps (tool calls), model calls,
prompt and completion tokens as the server counted them, every device call
with whether it failed, and an error if the run ended with one.
"""

import argparse
import asyncio
import json
import os
import sys
import time


async def run(args):
    # Imported here so that `--help` works without the packages.
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_openai import ChatOpenAI
    from langgraph.errors import GraphRecursionError
    from langgraph.prebuilt import create_react_agent

    api_key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    llm = ChatOpenAI(
        base_url=args.base_url,
        model=args.model,
        api_key=api_key or "none",
        temperature=0,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        max_retries=args.max_retries,
        stream_usage=True,
    )
    out = {"answer": "", "steps": 0, "model_calls": 0, "prompt_tokens": 0,
           "completion_tokens": 0, "calls": [], "stop_reason": "final_answer",
           "error": None}
    messages = []
    started = time.monotonic()
    try:
        client = MultiServerMCPClient(
            {"droidwarden": {"url": args.mcp_url, "transport": "streamable_http"}}
        )
        tools = await client.get_tools()
        # A tool's error goes back to the model as the tool's result, as
        # droidwarden's agent does, instead of ending the run.
        for tool in tools:
            tool.handle_tool_error = True
        agent = create_react_agent(llm, tools, prompt=args.system_prompt)
        # Two graph steps (model, tools) per iteration, one more to answer.
        state = await agent.ainvoke(
            {"messages": [("user", args.prompt)]},
            config={"recursion_limit": 2 * args.max_iterations + 1},
        )
        messages = state["messages"]
    except GraphRecursionError:
        out["stop_reason"] = "max_iterations"
    except Exception as e:  # the run's end, reported like droidwarden's errors
        out["error"] = f"{type(e).__name__}: {e}"[:500]
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    for m in messages:
        if not isinstance(m, AIMessage):
            continue
        out["model_calls"] += 1
        usage = m.usage_metadata or {}
        out["prompt_tokens"] += usage.get("input_tokens", 0)
        out["completion_tokens"] += usage.get("output_tokens", 0)
        for call in m.tool_calls:
            out["steps"] += 1
            a = call.get("args") or {}
            result = results.get(call.get("id"))
            service = a.get("service_id") or a.get("service")
            if not service and call["name"].startswith("android_") and call["name"] != "android_device":
                service = call["name"][len("android_"):]
            out["calls"].append({
                "tool": call["name"], "service": service, "action": a.get("action"),
                "device": a.get("device"),
                "is_error": result is None or getattr(result, "status", "success") == "error",
            })
        if isinstance(m.content, str) and m.content and not m.tool_calls:
            out["answer"] = m.content
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mcp-url", required=True, help="the daemon's MCP endpoint, http://HOST:PORT/mcp")
    p.add_argument("--base-url", required=True, help="the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--model", required=True)
    p.add_argument("--api-key-env", default="", help="the variable holding the API key, if any")
    p.add_argument("--system-prompt", required=True)
    p.add_argument("--prompt", required=True, help="the task")
    p.add_argument("--max-iterations", type=int, default=10)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per model request")
    p.add_argument("--max-retries", type=int, default=2)
    args = p.parse_args()
    out = asyncio.run(run(args))
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
