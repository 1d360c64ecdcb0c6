"""A scripted OpenAI-compatible server with known timing: the ground truth for the load driver (issue 44).

    python tests/run/scripted_server.py --queue-delay 0.05 --ttft 0.12 --gap 0.03 --tokens 6 --limit 2

Every chat completion waits for one of `--limit` slots (the concurrency limit), then a fixed
`--queue-delay` more, both counted as queue wait (as vLLM's `vllm:request_queue_time_seconds` counts
the time a request waits before it is scheduled); then `--ttft` until its first token and `--gap`
between tokens, `--tokens` tokens in all, one token per streamed chunk. A non-streamed request gets
one JSON reply when its last token would have been sent. Response headers go out when the request is
admitted, as a real engine's do, so a client that starts its clock at the headers misses the queue.

It runs in a process of its own (its timing is not disturbed by the client's), and timestamps with
`time.perf_counter()` (CLOCK_MONOTONIC on Linux, the same clock in every process), so `GET /truth`
gives each request's arrival, admission, first and last token on the client's clock. `/metrics`
exposes the queue time as a Prometheus histogram's `_sum` and `_count`. It prints its port on stdout
once it listens, and exits when stdin closes. A request's arrival is when its connection opened, for the
first request on a connection (the client's clock runs from there too), else when its body was read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

_state: dict = {"records": [], "queue_sum": 0.0, "queue_count": 0}


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict, bytes] | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    return method, path, headers, body


def _head(status: str, ctype: str, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"content-type: {ctype}", "connection: keep-alive"]
    lines.append(f"content-length: {length}" if length is not None else "transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _send_json(writer: asyncio.StreamWriter, obj: object, status: str = "200 OK") -> None:
    data = json.dumps(obj).encode()
    writer.write(_head(status, "application/json", len(data)) + data)
    await writer.drain()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _metrics() -> bytes:
    return (
        "# TYPE vllm:request_queue_time_seconds histogram\n"
        f'vllm:request_queue_time_seconds_sum{{model_name="scripted"}} {_state["queue_sum"]}\n'
        f'vllm:request_queue_time_seconds_count{{model_name="scripted"}} {_state["queue_count"]}\n'
    ).encode()


async def _complete(writer: asyncio.StreamWriter, body: dict, arrived: float, slots: asyncio.Semaphore, args: argparse.Namespace) -> None:
    stream = bool(body.get("stream"))
    async with slots:
        await asyncio.sleep(args.queue_delay)
        admitted = time.perf_counter()
        _state["queue_sum"] += admitted - arrived
        _state["queue_count"] += 1
        rec = {"arrived": arrived, "admitted": admitted, "stream": stream, "tokens": []}
        _state["records"].append(rec)
        if stream:
            writer.write(_head("200 OK", "text/event-stream", None))
            await writer.drain()
        for i in range(args.tokens):
            await asyncio.sleep(args.ttft if i == 0 else args.gap)
            if stream:
                event = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}
                writer.write(_chunk(f"data: {json.dumps(event)}\n\n".encode()))
                await writer.drain()
            rec["tokens"].append(time.perf_counter())
        usage = {"prompt_tokens": 3, "completion_tokens": args.tokens, "total_tokens": 3 + args.tokens}
        text = "".join(f"t{i} " for i in range(args.tokens))
        if stream:
            last = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": usage}
            writer.write(_chunk(f"data: {json.dumps(last)}\n\n".encode()) + _chunk(b"data: [DONE]\n\n") + _chunk(b""))
            await writer.drain()
        else:
            msg = {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}]}
            await _send_json(writer, {**msg, "usage": usage})
        rec["done"] = time.perf_counter()


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slots: asyncio.Semaphore, args: argparse.Namespace) -> None:
    opened: float | None = time.perf_counter()  # a new connection: its first request arrived when it opened
    try:
        while True:
            try:
                got = await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            arrived, opened = opened or time.perf_counter(), None
            method, path, _headers, raw = got
            if method == "POST" and path.endswith("/chat/completions"):
                await _complete(writer, json.loads(raw or b"{}"), arrived, slots, args)
            elif path == "/metrics":
                data = _metrics()
                writer.write(_head("200 OK", "text/plain; version=0.0.4", len(data)) + data)
                await writer.drain()
            elif path == "/truth":
                await _send_json(writer, _state["records"])
            elif path in ("/health", "/v1/models"):
                await _send_json(writer, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            else:
                await _send_json(writer, {"error": {"message": f"no route {path}"}}, "404 Not Found")
    finally:
        writer.close()


async def main(args: argparse.Namespace) -> None:
    slots = asyncio.Semaphore(args.limit)
    server = await asyncio.start_server(lambda r, w: _serve(r, w, slots, args), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the test closes our stdin
    server.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--queue-delay", type=float, default=0.05)
    ap.add_argument("--ttft", type=float, default=0.12)
    ap.add_argument("--gap", type=float, default=0.03)
    ap.add_argument("--tokens", type=int, default=6)
    ap.add_argument("--limit", type=int, default=2)
    asyncio.run(main(ap.parse_args()))
