"""An independent MCP client for the end-to-end tests: the official Python
MCP SDK (PyPI `mcp`) drives `droidwarden mcp` over stdio, or the daemon over
Streamable HTTP, and checks every schema with `jsonschema`.

Usage: mcp_client.py PLAN_JSON
PLAN: {"stdio": [argv...]} or {"http": URL, "token": T}, and "steps", a list of
  {"op": "list"}                          -> the tools, each schema checked
  {"op": "call", "name": N, "arguments": A}
                                          -> the result; structuredContent
                                             validated against outputSchema
  {"op": "resources"}                     -> the resources and the first read
or {"stdio": [...], "listen": URI, "call": {"name", "arguments"}}: subscribe
to URI (subscriptions/listen), make the call, report the first update;
or {"stdio": [...], "tools_changed": "listen" | "legacy"}: wait for a
notifications/tools/list_changed (on a subscriptions/listen stream at
2026-07-28, or unscoped on a 2025-11-25 session), then list the tools.
or {"stdio": [...] | "http": URL, "elicit": MODE, "answers": [...], "steps": [...]}:
a client that answers approvals itself (elicitation). MODE "auto" speaks
2026-07-28 (the SDK's Client drives InputRequiredResult rounds through its
elicitation callback); "legacy" forces the 2025-11-25 handshake (the server
sends elicitation/create during the call). Each elicitation takes the next
answer ({"action": "accept"|"decline"|"cancel", "content": {...}}, with
"hold": PATH to answer only once PATH exists; {"op": "withdrawn"} when the
server cancels it meanwhile) and is reported ({"op": "elicited", "params": ...}). Steps:
  {"op": "call", "name", "arguments"}     -> the result
  {"op": "once", "name", "arguments"}     -> one round only: the raw result,
                                             an InputRequiredResult included
  {"op": "retry", "name", "arguments", "state": S | "from": N, "answer": A}
                                          -> one round with requestState S
                                             (or step N's) and inputResponses
                                             {"approval": A} (none when A is null)
or {"stdio": [...], "subscribe": "legacy", "steps": [...]}: a 2025-11-25
session (resources/subscribe). Each notifications/resources/updated is
reported as it comes ({"op": "updated", "uri": U}), in order with the steps:
  {"op": "subscribe" | "unsubscribe", "uri": U}
                                          -> {"op", "uri", "error": null or
                                             {"code", "message", "data"}}
  {"op": "call", "name", "arguments"}     -> the result
  {"op": "wait", "uri": U}                -> once an update for U came that
                                             no earlier wait took (60 s at most)
One JSON object per line on stdout, flushed, in step order; progress
notifications are also passed on as they come ({"op": "progress"}).
"""

import asyncio
import contextlib
import json
import os
import sys

import anyio
import jsonschema
from mcp import Client, ClientSession, StdioServerParameters
from mcp import types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def emit(obj):
    print(json.dumps(obj), flush=True)


async def run(session, steps):
    await session.initialize()
    tools = {}
    for step in steps:
        op = step["op"]
        if op == "list":
            listed = await session.list_tools()
            out = []
            for tool in listed.tools:
                d = tool.model_dump(by_alias=True, exclude_none=True)
                jsonschema.Draft202012Validator.check_schema(d["inputSchema"])
                if "outputSchema" in d:
                    jsonschema.Draft202012Validator.check_schema(d["outputSchema"])
                tools[tool.name] = d
                out.append(d)
            emit({"op": "list", "tools": out})
        elif op == "call":
            progress = []

            async def on_progress(p, total, message):
                progress.append(message)
                emit({"op": "progress", "message": message})

            result = await session.call_tool(
                step["name"],
                step.get("arguments", {}),
                progress_callback=on_progress,
            )
            d = result.model_dump(by_alias=True, exclude_none=True)
            valid = None
            schema = tools.get(step["name"], {}).get("outputSchema")
            if schema is not None and not d.get("isError"):
                jsonschema.validate(d.get("structuredContent"), schema)
                valid = True
            emit({"op": "call", "name": step["name"], "result": d,
                  "validated": valid, "progress": progress})
        elif op == "resources":
            listed = await session.list_resources()
            res = [r.model_dump(by_alias=True, exclude_none=True) for r in listed.resources]
            read = None
            if res:
                got = await session.read_resource(res[0]["uri"])
                read = got.model_dump(by_alias=True, exclude_none=True)
            emit({"op": "resources", "resources": res, "read": read})
        else:
            raise ValueError(f"unknown op {op}")


async def listen(plan):
    """Subscribe to one resource (subscriptions/listen), make one call,
    and report the first update."""
    argv = plan["stdio"]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with Client(params) as client:
        async with client.listen(resource_subscriptions=[plan["listen"]]) as sub:
            emit({"op": "listening"})
            call = plan["call"]
            await client.call_tool(call["name"], call["arguments"])
            with anyio.fail_after(30):
                async for event in sub:
                    emit({"op": "updated", "uri": str(getattr(event, "uri", "")),
                          "kind": type(event).__name__})
                    break


async def tools_changed(plan):
    """Wait (at most 60 s) for the server to say its tools changed, then
    list them."""
    argv = plan["stdio"]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    if plan["tools_changed"] == "listen":
        async with Client(params) as client:
            async with client.listen(tools_list_changed=True) as sub:
                emit({"op": "listening"})
                with anyio.fail_after(60):
                    async for event in sub:
                        emit({"op": "updated", "kind": type(event).__name__})
                        break
            listed = await client.list_tools()
            emit({"op": "list", "tools": [t.model_dump(by_alias=True, exclude_none=True)
                                          for t in listed.tools]})
        return
    changed = anyio.Event()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            emit({"op": "listening"})
            with anyio.fail_after(60):
                await changed.wait()
            emit({"op": "updated", "kind": "ToolListChangedNotification"})
            listed = await session.list_tools()
            emit({"op": "list", "tools": [t.model_dump(by_alias=True, exclude_none=True)
                                          for t in listed.tools]})


async def subscribe(plan):
    """A 2025-11-25 session subscribing to resources the legacy way."""
    argv = plan["stdio"]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    updates = {}
    taken = {}
    arrived = anyio.Event()

    async def on_message(message):
        nonlocal arrived
        if getattr(message, "method", None) == "notifications/resources/updated":
            uri = str(message.params.uri)
            updates[uri] = updates.get(uri, 0) + 1
            emit({"op": "updated", "uri": uri})
            arrived.set()
            arrived = anyio.Event()

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            emit({"op": "connected", "protocol": init.protocol_version,
                  "capabilities": init.capabilities.model_dump(by_alias=True, exclude_none=True)})
            for step in plan["steps"]:
                op = step["op"]
                if op in ("subscribe", "unsubscribe"):
                    error = None
                    try:
                        if op == "subscribe":
                            await session.subscribe_resource(step["uri"])
                        else:
                            await session.unsubscribe_resource(step["uri"])
                    except MCPError as e:
                        error = {"code": e.code, "message": e.message, "data": e.data}
                    emit({"op": op, "uri": step["uri"], "error": error})
                elif op == "call":
                    result = await session.call_tool(step["name"], step.get("arguments", {}))
                    emit({"op": "call", "name": step["name"],
                          "result": result.model_dump(by_alias=True, exclude_none=True)})
                elif op == "wait":
                    uri = step["uri"]
                    with anyio.fail_after(60):
                        while updates.get(uri, 0) <= taken.get(uri, 0):
                            await arrived.wait()
                    taken[uri] = taken.get(uri, 0) + 1
                    emit({"op": "waited", "uri": uri})
                else:
                    raise ValueError(f"unknown op {op}")


async def elicit(plan):
    """Calls whose approvals are answered in this client (elicitation)."""
    answers = list(plan.get("answers", []))

    async def on_elicit(context, params):
        emit({"op": "elicited", "params": params.model_dump(by_alias=True, exclude_none=True)})
        answer = answers.pop(0) if answers else {"action": "cancel"}
        if "hold" in answer:  # answer only once this file exists (60 s at most)
            try:
                with anyio.move_on_after(60):
                    while not os.path.exists(answer["hold"]):
                        await anyio.sleep(0.1)
            except anyio.get_cancelled_exc_class():
                # The server withdrew the request (notifications/cancelled).
                emit({"op": "withdrawn"})
                raise
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    stack = contextlib.AsyncExitStack()
    if "http" in plan:
        server = plan["http"]
        if plan.get("token"):
            http = await stack.enter_async_context(create_mcp_http_client(
                headers={"Authorization": "Bearer " + plan["token"]}))
            server = streamable_http_client(plan["http"], http_client=http)
    else:
        argv = plan["stdio"]
        server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    results = []
    async with stack, Client(server, mode=plan["elicit"], elicitation_callback=on_elicit) as client:
        emit({"op": "connected", "protocol": client.protocol_version})
        for step in plan["steps"]:
            op = step["op"]
            if op == "call":
                result = await client.call_tool(step["name"], step.get("arguments", {}))
            elif op == "once":
                result = await client.session.call_tool(
                    step["name"], step.get("arguments", {}), allow_input_required=True)
            elif op == "retry":
                state = step.get("state")
                if "from" in step:
                    state = results[step["from"]].get("requestState")
                answer = step.get("answer")
                result = await client.session.call_tool(
                    step["name"], step.get("arguments", {}),
                    request_state=state,
                    input_responses=None if answer is None else {
                        "approval": types.ElicitResult(
                            action=answer["action"], content=answer.get("content"))},
                    allow_input_required=True)
            else:
                raise ValueError(f"unknown op {op}")
            d = result.model_dump(by_alias=True, exclude_none=True)
            results.append(d)
            emit({"op": op, "name": step["name"], "result": d})


async def main():
    plan = json.loads(sys.argv[1])
    if "elicit" in plan:
        await elicit(plan)
        return
    if "subscribe" in plan:
        await subscribe(plan)
        return
    if "tools_changed" in plan:
        await tools_changed(plan)
        return
    if "listen" in plan:
        await listen(plan)
        return
    if "http" in plan:
        headers = {}
        if plan.get("token"):
            headers["Authorization"] = "Bearer " + plan["token"]
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(plan["http"], http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await run(session, plan["steps"])
        return
    argv = plan["stdio"]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await run(session, plan["steps"])


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as e:  # the test reads the reason
        emit({"op": "failed", "error": repr(e)})
        sys.exit(1)
