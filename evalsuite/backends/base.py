"""The backend interface: a batch of requests in, one generation per request out, and the
optional capabilities a backend declares (deadline, identities, load, memory, engine metrics, restart)."""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..cases.options import GenerationSettings
from ..errors import EvalsuiteError
from ..hashing import sha256_json
from ..registry import BACKENDS
from .toolcalls import ToolCall, calls_from_dicts

if TYPE_CHECKING:
    from ..cases.suite import Variant

__all__ = ["BACKENDS", "Backend", "Generation", "GenerationSettings", "Request", "check_options", "make_backend"]


@dataclass(frozen=True)
class Request:
    """One generation to make: the rendered chat for a case, for one sample index."""

    case_id: str
    messages: tuple[tuple[str, str], ...]
    sample: int = 0
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 1234
    #: the tools offered, as OpenAI `tools` JSON, for a backend that passes them itself (a variant's
    #: `tools: native`); None: no tools, or tools rendered into the system turn as text (the default)
    tools: str | None = None
    #: the case's `tool_choice` as JSON, beside `tools` (None: the API's default, "auto")
    tool_choice: str | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def tool_list(self) -> list[dict] | None:
        """`tools` as a list of OpenAI tool objects (None: none passed natively)."""
        return None if self.tools is None else json.loads(self.tools)

    def tool_choice_value(self) -> str | dict | None:
        """`tool_choice` as the API takes it ("auto", "none", "required" or a named function)."""
        return None if self.tool_choice is None else json.loads(self.tool_choice)

    def request_hash(self) -> str:
        """Hash of what is asked (not of the sample index, which is a separate cache-key part)."""
        return sha256_json(
            {
                "messages": [list(m) for m in self.messages],
                "max_new_tokens": self.max_new_tokens,
                "temperature": self.temperature,
                "top_p": self.top_p,
                "seed": self.seed,
                # only when set: every request hash made before native tools existed stays valid
                **({"tools": self.tools, "tool_choice": self.tool_choice} if self.tools is not None else {}),
            }
        )

    def sample_seed(self) -> int:
        """A per-sample seed so samples differ from each other but are reproducible."""
        return (self.seed * 1_000_003 + self.sample) % (2**31 - 1)


@dataclass(frozen=True)
class Generation:
    """The outcome of one request: the text, or the error; with timings and token counts."""

    case_id: str
    variant: str
    sample: int
    text: str = ""
    prompt_tokens: int | None = None
    new_tokens: int | None = None
    latency_s: float | None = None  #: wall time of the request (of its batch, for batched backends)
    ttft_s: float | None = None  #: time to first token, when the backend can measure it
    tokens_per_s: float | None = None
    error: str | None = None  #: error message; the text is then empty
    timeout: bool = False
    finish_reason: str | None = None  #: "stop", "length", "error", "timeout"
    request_hash: str = ""
    fingerprint: str = ""  #: the variant fingerprint that produced it
    cached: bool = False  #: served from the generation cache
    batch_size: int = 1
    extra: dict = field(default_factory=dict)  #: backend-specific facts (token ids, peak memory...)
    #: the tool calls the backend parsed (evalsuite.backends.toolcalls); None when it parsed none
    #: (scorers then read calls from the text), () when it looked and the model made no call
    tool_calls: tuple[ToolCall, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def key(self) -> tuple[str, str, int]:
        return (self.variant, self.case_id, self.sample)

    def to_dict(self) -> dict:
        # every field by name, `extra` copied one level deep: what `asdict` gives for these field
        # types, without its recursive deep copy (the runner encodes every generation it stores)
        d = {name: getattr(self, name) for name in _GENERATION_FIELDS}
        d["extra"] = dict(self.extra)
        if self.tool_calls is None:
            del d["tool_calls"]  # records without calls stay as they were before calls existed
        else:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Generation:
        known = {k: v for k, v in d.items() if k in _GENERATION_FIELDS}
        if known.get("tool_calls") is not None:
            known["tool_calls"] = calls_from_dicts(known["tool_calls"])
        return cls(**known)


_GENERATION_FIELDS = tuple(Generation.__dataclass_fields__)


class Backend(abc.ABC):
    """What every backend does. Constructing one is cheap: models load on first `generate` (or `load`).

    `generate` and `fingerprint` are required. The rest are optional capabilities, each with a
    documented default that says "this backend cannot tell": the runner calls them all, so a
    backend overrides what it knows (httpx's `BaseTransport`, Inspect's `ModelAPI` are built so).
    """

    name: str = "backend"
    #: why the backend's model or server did not come up, or why the library refused the variant's
    #: settings on this machine (None: it did, or it was not tried yet); the variant is then recorded
    #: "cannot judge" (its fault probes too, when served) and the other variants go on
    load_error: str | None = None

    @abc.abstractmethod
    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """Generate for a batch; return one Generation per request, in order.

        A backend may raise for the whole batch; the runner then retries the requests one by one
        and records the error of each that still fails.
        """

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """Hash of everything that can change an output: weights identity, quantization, decoding."""

    def close(self) -> None:
        """Free memory (models, servers). Default: nothing to free."""
        return None

    # -- optional capabilities: each default means "this backend cannot tell" ----------------------
    def deadline_s(self) -> float | None:
        """The longest one request may take inside `generate` by the backend's own bounds (its
        per-attempt timeout, its retries' overall deadline): the runner's backstop waits at least
        that long. Default None: the suite's `timeout_s` alone bounds a request."""
        return None

    def weights_identity(self) -> dict | None:
        """What the loaded weights are (files, hub commit, libraries: evalsuite.models.describe).
        Default None: no weights of its own (a server, the fake)."""
        return None

    def engine_identity(self) -> dict | None:
        """The report's engine column (engine, version, device, settings). Default None: the
        variant is described from its spec alone."""
        return None

    def passes_tools(self) -> bool:
        """Whether the backend takes a request's `tools` itself (`Request.tools`: a chat template's
        `tools`, an API's `tools` field) and returns the calls it parsed (`Generation.tool_calls`).
        A variant asks for that with `options: {tools: native}`; one whose backend cannot is refused
        when it is built. Default False: the tools are rendered into the system turn as text (the
        Hermes `<tool_call>` fragment: evalsuite.backends.toolcalls.render_tools) and the scorers
        parse the calls from the output text."""
        return False

    def environment(self) -> dict:
        """Where this variant's outputs would be computed if it ran now, read without loading its
        model: the versions of the libraries that compute them, the interpreter, the device and its
        driver. A cleared variant whose environment differs from the one it was cleared with is
        *stale* (`evalsuite releases`, `evalsuite recheck`). Default: evalsuite's own process
        (`local_environment()`); a backend that runs elsewhere (a worker in its own environment,
        an engine in `.venv-vllm`) reports that environment instead."""
        return local_environment()

    def load(self) -> object:
        """Load the model (or start the engine) now, before the runner's clock starts; idempotent.
        Default: nothing to load ahead (the first `generate` does what is needed)."""
        return None

    def compile_s(self) -> float | None:
        """Seconds spent so far compiling and warming up the model (torch.compile's graphs, a first
        kernel build, vLLM's own compilation), apart from loading it and from timed generation: the
        runner records it beside `load_s`, so a compile variant's speed figures are steady state.
        Default None: nothing is compiled ahead of generation."""
        return None

    def peak_memory_mb(self) -> float | None:
        """Peak memory of the model while it generated. Default None: not visible (a remote server)."""
        return None

    def model_memory_mb(self) -> float | None:
        """Memory of the loaded weights. Default None: not visible."""
        return None

    def engine_metrics(self) -> dict | None:
        """What the engine's own counters say of this variant so far (vLLM's). Default None: none exposed."""
        return None

    def restart(self) -> str:
        """Start the backend's own server again (after it died, or to replace a wedged one); returns
        its URL. Default: refused, the backend has no server of its own."""
        raise EvalsuiteError(f"backend {self.name!r} has no server of its own to restart")


def local_environment(libraries: Sequence[str] = ("torch", "transformers")) -> dict:
    """evalsuite's own process as an environment (`Backend.environment`'s default): the installed
    versions of `libraries` (read from package metadata, nothing imported), python, the platform,
    and the NVIDIA driver where `nvidia-smi` answers (None elsewhere)."""
    import platform
    import shutil
    import subprocess
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in libraries:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    driver = None
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
            driver = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
        except (OSError, subprocess.SubprocessError):
            driver = None
    return {
        "libraries": versions,
        "python": platform.python_version(),
        "platform": f"{platform.system().lower()}-{platform.machine()}",
        "device": "cuda" if driver else "cpu",
        "driver": driver,
    }


#: how a tool-use case's tools reach the model (a variant's `options.tools`): `text`, rendered into the
#: system turn by evalsuite (the default, any backend); `native`, passed to the backend (`Backend.passes_tools`)
TOOL_MODES = ("text", "native")


def native_tools(variant: Variant) -> bool:
    """Whether the variant's backend is to pass the tools itself (`options: {tools: native}`)."""
    return (variant.options or {}).get("tools") == "native"


def check_options(variant: Variant, backend: str, known: set[str]) -> dict:
    """A variant's backend options, refusing unknown names and `trust_remote_code` (a suite must
    not run code shipped with a model): one check for every backend."""
    options = dict(variant.options or {})
    unknown = set(options) - known - {"tools"}
    if options.get("tools", "text") not in TOOL_MODES:
        raise EvalsuiteError(f"variant {variant.name!r}: options.tools must be one of {', '.join(TOOL_MODES)} (got {options['tools']!r})")
    if unknown:
        raise EvalsuiteError(f"variant {variant.name!r}: unknown {backend} option(s) {sorted(unknown)}; known: {', '.join(sorted(known))}")
    if options.get("trust_remote_code") or (options.get("engine_args") or {}).get("trust_remote_code"):
        raise EvalsuiteError(f"variant {variant.name!r}: trust_remote_code is not supported (a suite must not run code shipped with a model)")
    return options


def make_backend(variant: Variant) -> Backend:
    """Build the backend a variant names (lazy import of its module)."""
    cls = BACKENDS.get(variant.backend)
    backend = cls(variant)
    if native_tools(variant) and not backend.passes_tools():
        raise EvalsuiteError(
            f"variant {variant.name!r}: options.tools is native, but the {variant.backend} backend cannot pass tools itself "
            "(drop the option: the tools are then rendered into the system turn as text)"
        )
    return backend
