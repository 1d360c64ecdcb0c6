"""The Ray executor: a variant's batches become a Ray Dataset that model actors process with `map_batches`.

Each variant gets its own pool of `num_actors` actors; each actor builds the variant's backend
once (one model per actor, placed by Ray on `num_cpus` / `num_gpus` of some node) and runs the
runner's own batch call on every batch it is given. One dataset row is one evalsuite batch, so
batch composition, and with it every padded output, is the same as in a local run. Finished
batches stream back to the driver, where the runner caches and appends them as in a local run:
the run store, the cache and resume never leave the driver.

A vllm variant goes through Ray Data's LLM processor (`ray.data.llm`) instead, when that and vllm
are importable (`llm_processor: auto`): vLLM engines as Ray actors with continuous batching.

Fault tolerance is Ray's: a dead actor is restarted (`max_restarts`) and the batch it was working
on is retried (`max_task_retries`); the driver appends a batch only when its result arrives, so a
retried batch is stored once. Sandbox jobs of the code scorers run as Ray tasks (`run_sandbox_jobs`).

Connect with `address:` in the suite, or `RAY_ADDRESS`; with neither, a small local Ray starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..backends.base import Backend, Generation, Request
from ..errors import EvalsuiteError, MissingExtraError
from .base import BuildBackend, ExecutorSpec, GenerateBatch, ScoreGenerations, StoredRun

if TYPE_CHECKING:
    from ..cases.caseset import Case
    from ..cases.suite import Variant

log = logging.getLogger("evalsuite")


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("executor: ray", "ray", "ray[data]") from exc
    return ray


def connect(address: str | None = None, *, runtime_env: dict | None = None, num_cpus: int | None = None, object_store_mb: int | None = None):
    """Join the cluster at `address` (else RAY_ADDRESS), or start a small local Ray; reuse a live connection."""
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
    if runtime_env:
        kwargs["runtime_env"] = runtime_env
    if address:
        ray.init(address=address, **kwargs)
    else:
        # a local instance: no dashboard, a small object store (generations are small)
        ray.init(num_cpus=num_cpus, include_dashboard=False, object_store_memory=(object_store_mb or 200) * 2**20, **kwargs)
    return ray


def _llm_row(r: Request) -> dict:
    """One request as a ray.data.llm row: the chat and its sampling settings (greedy as temperature 0)."""
    sampling = {
        "max_tokens": r.max_new_tokens,
        "temperature": 0.0 if r.greedy else r.temperature,
        "top_p": 1.0 if r.greedy else r.top_p,
        "seed": r.sample_seed(),
    }
    return {"case_id": r.case_id, "sample": r.sample, "messages": [{"role": role, "content": text} for role, text in r.messages], "sampling_params": sampling}


def _llm_generation(req: Request, variant: Variant, row: dict) -> Generation:
    """A ray.data.llm output row as the request's Generation."""
    lat = row["latency_s"] if row["latency_s"] and row["latency_s"] > 0 else None
    new = int(row["new_tokens"]) if row["new_tokens"] is not None else None
    return Generation(
        req.case_id,
        variant.name,
        req.sample,
        text=row["text"],
        prompt_tokens=row["prompt_tokens"],
        new_tokens=new,
        latency_s=lat,
        tokens_per_s=(new / lat) if new and lat else None,
        finish_reason="stop",
        batch_size=variant.generation.batch_size,
        extra={"engine": "ray.data.llm"},
    )


def _request_to_json(req: Request) -> dict:
    d = asdict(req)
    d["messages"] = [list(m) for m in req.messages]
    return d


def _request_from_json(d: dict) -> Request:
    return Request(**{**d, "messages": tuple(tuple(m) for m in d["messages"])})


class VariantWorker:
    """A Ray Data UDF: one actor, one backend (one model), many batches."""

    def __init__(self, build: BuildBackend, variant: Variant, generate_batch: GenerateBatch):
        self.backend = build()
        self.variant = variant
        self.generate_batch = generate_batch

    def __call__(self, rows: dict) -> dict:
        out_batches, out_gens = [], []
        for index, payload in zip(rows["batch"], rows["requests"]):
            batch = [_request_from_json(d) for d in json.loads(payload)]
            gens = self.generate_batch(self.backend, batch, self.variant)
            out_batches.append(int(index))
            out_gens.append(json.dumps([g.to_dict() for g in gens], ensure_ascii=False))
        return {"batch": out_batches, "generations": out_gens}

    def __del__(self):
        with contextlib.suppress(Exception):
            self.backend.close()


def _sandbox_task(program: str, tests: str, entry_point: str | None, limits: dict):
    from evalsuite import sandbox  # on the node that runs the task: its own isolation applies

    return sandbox.run_tests(program, tests, entry_point, **limits)


def run_sandbox_jobs(jobs: Sequence[tuple], limits: dict, *, num_cpus: float = 1, max_retries: int = 3) -> list:
    """Run (program, tests, entry_point) jobs as Ray tasks, each through `evalsuite.sandbox.run_tests`.

    Ray spreads them over the cluster's CPUs; a task whose node dies is retried (`max_retries`).
    Results come back in the order of `jobs`.
    """
    ray = _import_ray()
    task = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(_sandbox_task)
    refs = [task.remote(p, t, e, limits) for p, t, e in jobs]
    return ray.get(refs)


class RayExecutor:
    """Generation on Ray Data actors, sandbox jobs as Ray tasks; storage stays with the runner."""

    name = "ray"

    def __init__(self, spec: ExecutorSpec | None = None):
        self.spec = spec or ExecutorSpec("ray")
        self.options = dict(self.spec.options)

    def _connect(self):
        o = self.options
        ray = connect(o.get("address"), runtime_env=o.get("runtime_env"), object_store_mb=o.get("object_store_mb"))
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # the runner shows its own bar, fed as batches return
        ctx.print_on_execution_start = False
        return ray

    def _use_llm_processor(self, variant: Variant) -> bool:
        wanted = self.options.get("llm_processor", "auto")
        if variant.backend != "vllm" or wanted is False:
            return False
        try:
            import ray.data.llm  # noqa: F401
            import vllm  # noqa: F401
        except ImportError as exc:
            if wanted is True:
                raise MissingExtraError("executor llm_processor: true", "vllm", "vllm and ray[llm]") from exc
            return False
        return True

    def generate(
        self, variant: Variant, backend: Backend, build: BuildBackend, batches: Sequence[list[Request]], generate_batch: GenerateBatch
    ) -> Iterator[tuple[list[Request], list[Generation]]]:
        if not batches:
            return
        ray = self._connect()
        if self._use_llm_processor(variant):
            yield from self._generate_llm(ray, variant, backend, batches)
            return
        o = self.options
        rows = [{"batch": i, "requests": json.dumps([_request_to_json(r) for r in b], ensure_ascii=False)} for i, b in enumerate(batches)]
        # one block per batch: a finished batch streams back at once (not with its block's others), and
        # a dead actor's retry redoes only the batch it was on
        ds = ray.data.from_items(rows, override_num_blocks=len(rows))
        # Ray Data already restarts dead actors and retries their batches without limit (-1, -1);
        # pass the suite's own limits only when it sets them
        remote_args = {k: o[k] for k in ("max_restarts", "max_task_retries") if k in o}
        ds = ds.map_batches(
            VariantWorker,
            fn_constructor_kwargs={"build": build, "variant": variant, "generate_batch": generate_batch},
            batch_size=1,  # one row = one evalsuite batch: same composition as a local run
            compute=ray.data.ActorPoolStrategy(size=int(o.get("num_actors", 1))),
            num_cpus=o.get("num_cpus", 1),
            num_gpus=o.get("num_gpus", 0) or None,
            **remote_args,
        )
        seen: set[int] = set()
        for row in ds.iter_rows():
            index = int(row["batch"])
            if index in seen:  # a retried batch must be stored once; Ray Data does not emit twice, this guards it
                log.warning("batch %d of %s came back twice from Ray; kept the first", index, variant.name)
                continue
            seen.add(index)
            yield batches[index], [Generation.from_dict(d) for d in json.loads(row["generations"])]
        if len(seen) != len(batches):
            raise EvalsuiteError(f"Ray returned {len(seen)} of {len(batches)} batches for variant {variant.name}")

    def _generate_llm(self, ray, variant: Variant, backend: Backend, batches: Sequence[list[Request]]) -> Iterator[tuple[list[Request], list[Generation]]]:
        """A vllm variant through `ray.data.llm`: engines as actors, one row per request."""
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig

        engine = dict(backend.engine_args())  # type: ignore[attr-defined]  # the vllm backend's  # the same engine settings (and fingerprint) as the vllm backend
        model = str(engine.pop("model"))
        o = self.options
        # a failing request becomes an error record of its case (as locally), not the end of the run
        config = vLLMEngineProcessorConfig(
            model_source=model,
            engine_kwargs=engine,
            concurrency=int(o.get("num_actors", 1)),
            batch_size=variant.generation.batch_size,
            should_continue_on_error=True,
        )
        requests = {(r.case_id, r.sample): r for b in batches for r in b}
        rows = [_llm_row(r) for r in requests.values()]
        processor = build_processor(
            config,
            postprocess=lambda row: {
                "case_id": row["case_id"],
                "sample": row["sample"],
                "text": row.get("generated_text") or "",
                "prompt_tokens": row.get("num_input_tokens"),
                "new_tokens": row.get("num_generated_tokens"),
                "latency_s": row.get("time_taken_llm"),
                "error": row.get("__inference_error__") or None,
            },
        )
        for row in processor(ray.data.from_items(rows)).iter_rows():
            req = requests[(row["case_id"], int(row["sample"]))]
            error = row.get("error") or row.get("__inference_error__")  # error rows bypass postprocess
            if error:
                yield [req], [Generation(req.case_id, variant.name, req.sample, error=f"vLLM (ray.data.llm): {error}", finish_reason="error")]
                continue
            yield [req], [_llm_generation(req, variant, row)]

    @contextlib.contextmanager
    def scoring(self, cases: Sequence[Case], store: StoredRun, score_generations: ScoreGenerations | None = None):
        """Score with sandbox jobs sent to the cluster (unless `sandbox: false`); `score_generations`
        (evalsuite.scoring.run's) collects the jobs up front."""
        if not self.options.get("sandbox", True) or score_generations is None or not any(c.scenario == "code" for c in cases):
            yield
            return
        from . import sandbox_jobs

        self._connect()
        cpus = self.options.get("sandbox_num_cpus", 1)
        with sandbox_jobs.remote(lambda jobs, limits: run_sandbox_jobs(jobs, limits, num_cpus=cpus)):
            sent = sandbox_jobs.prefetch(cases, store.generations(), store.signature.get("baseline"), score_generations)
            log.info("sent %d sandbox jobs to Ray", sent)
            yield
