"""Generated traffic for the traffic-import tests and benchmarks/bench_traffic.py: chat-completions requests
with their answers in the three logged formats (Batch API input + output JSONL, request/response JSONL,
a Parquet file with a `messages` column), with exact and near duplicates, Chinese requests, requests with
`response_format` and with `tools`, and planted e-mail addresses, phone numbers, API keys and card numbers."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

WORDS = (
    "storage backup retention dashboard invoice sync folder quota region latency replica archive export import schedule "
    "policy audit token session browser mobile desktop upload download share team admin billing plan upgrade refund "
    "outage status incident alert metric report weekly monthly nightly restore snapshot version history trash limit "
    "password login account email domain device license seat invite role permission group project workspace tag label"
).split()
ZH = "存储 备份 保留 仪表盘 发票 同步 文件夹 配额 区域 延迟 副本 归档 导出 导入 计划 策略 审计 会话 浏览器 手机 桌面 上传 下载 共享 团队 管理员 账单 套餐 升级 退款".split()
SCHEMA = {"type": "object", "properties": {"product": {"type": "string"}, "tagline": {"type": "string"}}, "required": ["product", "tagline"]}
CARD_NUMBERS = ("4111 1111 1111 1111", "5555555555554444", "4012-8888-8888-1881", "378282246310005")
PHONES = ("+1 415-555-0132", "+44 20 7946 0958", "13812345678", "+49 30 901820")
KEYS = ("AKIAIOSFODNN7EXAMPLE", "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", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx")


def _completion(text: str) -> dict:
    return {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


class _Maker:
    """Distinct base requests, each in one scenario, with the secrets planted in some."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.planted: dict[str, set[str]] = defaultdict(set)

    def words(self, n: int, zh: bool = False) -> str:
        return ("" if zh else " ").join(self.rng.choice(ZH if zh else WORDS) for _ in range(n))

    def secret(self) -> str:
        kind = self.rng.choice(("EMAIL_ADDRESS", "PHONE_NUMBER", "API_KEY", "CREDIT_CARD"))
        value = {
            "EMAIL_ADDRESS": f"user{self.rng.randrange(10**6)}@example.com",
            "PHONE_NUMBER": self.rng.choice(PHONES),
            "API_KEY": self.rng.choice(KEYS),
            "CREDIT_CARD": self.rng.choice(CARD_NUMBERS),
        }[kind]
        self.planted[kind].add(value)
        label = {"EMAIL_ADDRESS": "my email is", "PHONE_NUMBER": "call me on", "API_KEY": "my key is", "CREDIT_CARD": "my card is"}[kind]
        return f" ({label} {value})"

    def body(self, i: int) -> dict:
        """One request body (with its answer under `_answer`)."""
        zh = self.rng.random() < 0.25
        pii = self.secret() if self.rng.random() < 0.3 else ""
        kind = self.rng.choice(("kb", "kb", "brand", "code", "tools", "chat"))
        q = self.words(self.rng.choice((8, 30, 120)), zh)
        if kind == "kb":
            doc = f"kb-{i}"
            docs = f'<document id="{doc}">{self.words(40, zh)}</document>'
            return {"messages": [{"role": "system", "content": "Answer from the documents; cite [id]."}, {"role": "user", "content": f"{docs}\n{q}{pii}?"}], "_answer": f"{self.words(12, zh)} [{doc}]"}
        if kind == "brand":
            fmt = {"type": "json_schema", "json_schema": {"name": "card", "schema": SCHEMA}}
            answer = json.dumps({"product": "Lumora Cloud", "tagline": self.words(5, zh)}, ensure_ascii=False)
            return {"messages": [{"role": "user", "content": f"Product card as JSON: {q}{pii}"}], "response_format": fmt, "_answer": answer}
        if kind == "code":
            return {"messages": [{"role": "user", "content": f"Write a Python function: {q}{pii}"}], "_answer": f"```python\ndef f_{i}(x):\n    return x\n```"}
        if kind == "tools":
            tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
            return {"messages": [{"role": "user", "content": q + pii}], "tools": tools, "_answer": "calling lookup"}
        return {"messages": [{"role": "user", "content": q + pii}], "_answer": self.words(10, zh)}


def _variant(body: dict, rng: random.Random) -> dict:
    """A copy of a request: exact, differing only in case and spaces, or one word changed (a near duplicate)."""
    out = json.loads(json.dumps(body))
    last = out["messages"][-1]
    roll = rng.random()
    if roll < 0.3:
        last["content"] = "  " + last["content"].upper() + " "
    elif roll < 0.6:
        words = last["content"].split(" ")
        if len(words) > 40:
            words[len(words) // 2] = "changed"
        last["content"] = " ".join(words)
    return out


def generate(n: int, seed: int = 0, distinct_share: float = 0.6) -> tuple[list[dict], dict[str, set[str]]]:
    """`n` request bodies (their answers under `_answer`), a `distinct_share` of them distinct and the
    rest copies; and the planted secrets by type."""
    rng = random.Random(seed)
    maker = _Maker(rng)
    bases = [maker.body(i) for i in range(max(1, int(n * distinct_share)))]
    bodies = list(bases) + [_variant(rng.choice(bases), rng) for _ in range(n - len(bases))]
    rng.shuffle(bodies)
    return bodies, dict(maker.planted)


def write_traffic(out: Path, n: int, seed: int = 0) -> tuple[list[Path], dict[str, set[str]]]:
    """The requests split over the three formats under `out`; (the files, the planted secrets by type)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bodies, planted = generate(n, seed)
    out.mkdir(parents=True, exist_ok=True)
    third = len(bodies) // 3
    batch, pairs, rows = bodies[:third], bodies[third : 2 * third], bodies[2 * third :]
    files = [out / "batch_input.jsonl", out / "batch_output.jsonl", out / "pairs.jsonl", out / "messages.parquet"]
    with open(files[0], "w", encoding="utf-8") as fin, open(files[1], "w", encoding="utf-8") as fout:
        for i, b in enumerate(batch):
            body = {k: v for k, v in b.items() if k != "_answer"}
            fin.write(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}, ensure_ascii=False) + "\n")
            fout.write(json.dumps({"custom_id": f"r{i}", "response": {"status_code": 200, "body": _completion(b["_answer"])}, "error": None}, ensure_ascii=False) + "\n")
    with open(files[2], "w", encoding="utf-8") as fh:
        for b in pairs:
            fh.write(json.dumps({"request": {k: v for k, v in b.items() if k != "_answer"}, "response": _completion(b["_answer"])}, ensure_ascii=False) + "\n")
    columns = {
        "messages": [json.dumps(b["messages"] + [{"role": "assistant", "content": b["_answer"]}], ensure_ascii=False) for b in rows],
        "response_format": [json.dumps(b["response_format"]) if "response_format" in b else "" for b in rows],
        "tools": [json.dumps(b["tools"]) if "tools" in b else "" for b in rows],
    }
    pq.write_table(pa.table(columns), files[3])
    return files, planted
