"""The engine: turns /generate bodies into requests, runs them, and shapes the outputs like SGLang."""

from __future__ import annotations

import threading
import time
import uuid

from .config import ModelConfig, ServerArgs
from .kernels import ORDERS, choose_order
from .mamba_cache import MambaPrefixCache
from .model import TinyMamba
from .scheduler import Req, SamplingParams, Scheduler
from .tokenizer import CharTokenizer
from .utils import as_list, get_logger

logger = get_logger(__name__)


class RequestError(ValueError):
    status_code = 400


class Engine:
    def __init__(self, server_args: ServerArgs) -> None:
        self.server_args = server_args
        self.model_config = ModelConfig()
        self.kernel_order = choose_order(server_args.kernel_autotune)
        self.model = TinyMamba(self.model_config, kernel_order=self.kernel_order)
        logger.info(f"decode kernels: bf16 split-K, {ORDERS[self.kernel_order]} reduction")
        self.tokenizer = CharTokenizer()
        self.cache = MambaPrefixCache(page_size=server_args.page_size, disable=server_args.disable_radix_cache)
        self.scheduler = Scheduler(
            self.model,
            self.cache,
            track_interval=server_args.mamba_track_interval,
            enable_overlap=not server_args.disable_overlap_schedule,
            restore_fault_rate=server_args.state_restore_fault_rate,
        )
        self.lock = threading.Lock()
        self.startup_time = time.time()
        self.num_requests = 0

    # -- /generate --

    def generate(self, body: dict):
        reqs, single = self._parse(body)
        with self.lock:
            tic = time.perf_counter()
            self.scheduler.run(reqs)
            self.num_requests += len(reqs)
            new_tokens = sum(len(r.origin_input_ids) - r.cached_tokens for r in reqs)
            logger.info(
                f"Batch done. #seq: {len(reqs)}, #new-token: {new_tokens}, "
                f"#cached-token: {sum(r.cached_tokens for r in reqs)}, "
                f"#gen-token: {sum(len(r.output_ids) for r in reqs)}, {time.perf_counter() - tic:.3f}s"
            )
        outputs = [self._output(r) for r in reqs]
        return outputs[0] if single else outputs

    def flush_cache(self) -> None:
        with self.lock:
            self.cache.reset()
        logger.info("Cache flushed successfully!")

    def _parse(self, body: dict) -> tuple[list[Req], bool]:
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object")
        if body.get("stream"):
            raise RequestError("stream is not supported by this server")
        input_ids, text = body.get("input_ids"), body.get("text")
        if (input_ids is None) == (text is None):
            raise RequestError("Either text or input_ids should be provided.")
        if text is not None:
            single = isinstance(text, str)
            texts = [text] if single else text
            try:
                batch = [self.tokenizer.encode(t) for t in texts]
            except (TypeError, ValueError) as exc:
                raise RequestError(str(exc)) from None
        else:
            single = isinstance(input_ids, list) and (not input_ids or not isinstance(input_ids[0], list))
            batch = [input_ids] if single else input_ids
        if not isinstance(batch, list) or not batch:
            raise RequestError("input_ids must be a non-empty list")
        n = len(batch)
        try:
            sampling = as_list(body.get("sampling_params") or {}, n, "sampling_params")
            return_logprob = as_list(body.get("return_logprob", False), n, "return_logprob")
            logprob_start_len = as_list(body.get("logprob_start_len", -1), n, "logprob_start_len")
            rids = as_list(body.get("rid"), n, "rid")
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        reqs = []
        vocab = self.model_config.vocab_size
        for i, ids in enumerate(batch):
            if not isinstance(ids, list) or not ids:
                raise RequestError("The input_ids is empty." if isinstance(ids, list) else "input_ids must be lists of ints")
            if any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab for t in ids):
                raise RequestError(f"input_ids must be token ids in [0, {vocab})")
            params = sampling[i] if isinstance(sampling[i], dict) else {}
            sp = SamplingParams(
                temperature=float(params.get("temperature", 1.0)),
                max_new_tokens=int(params.get("max_new_tokens", 128)),
                ignore_eos=bool(params.get("ignore_eos", False)),
            )
            if sp.max_new_tokens < 0:
                raise RequestError("max_new_tokens must be at least 0")
            if len(ids) + sp.max_new_tokens > self.server_args.context_length:
                raise RequestError(
                    f"Requested token count exceeds the model's maximum context length of "
                    f"{self.server_args.context_length} tokens."
                )
            start = int(logprob_start_len[i]) if logprob_start_len[i] is not None else -1
            if bool(return_logprob[i]) and start > len(ids):
                raise RequestError(
                    f"logprob_start_len={start} is higher than the number of input tokens "
                    f"len(origin_input_ids)={len(ids)}. Please use a smaller logprob_start_len."
                )
            reqs.append(Req(
                rid=rids[i] or uuid.uuid4().hex,
                origin_input_ids=list(ids),
                sampling_params=sp,
                return_logprob=bool(return_logprob[i]),
                logprob_start_len=start if bool(return_logprob[i]) else -1,
            ))
        return reqs, single

    def _output(self, req: Req) -> dict:
        meta_info = {
            "id": req.rid,
            "finish_reason": req.finished_reason,
            "prompt_tokens": len(req.origin_input_ids),
            "weight_version": "default",
            "num_retractions": 0,
        }
        if req.return_logprob:
            meta_info["input_token_logprobs"] = req.input_token_logprobs
            meta_info["output_token_logprobs"] = req.output_token_logprobs
            meta_info["output_token_logprobs_length"] = len(req.output_token_logprobs)
        meta_info["reasoning_tokens"] = 0
        meta_info["completion_tokens"] = len(req.output_ids)
        meta_info["cached_tokens"] = req.cached_tokens
        meta_info["e2e_latency"] = (req.finished_at or time.perf_counter()) - req.created_at
        return {
            "text": self.tokenizer.decode(req.output_ids),
            "output_ids": list(req.output_ids),
            "meta_info": meta_info,
        }

    # -- /server_info, /model_info --

    def server_info(self) -> dict:
        args = self.server_args
        return {
            "model_path": args.model_path,
            "tokenizer_path": args.model_path,
            "host": args.host,
            "port": args.port,
            "page_size": args.page_size,
            "disable_radix_cache": args.disable_radix_cache,
            "disable_overlap_schedule": args.disable_overlap_schedule,
            "mamba_scheduler_strategy": "extra_buffer",
            "mamba_track_interval": args.mamba_track_interval,
            "decode_dtype": "bfloat16",
            "decode_reduction_order": ORDERS[self.kernel_order],
            "max_running_requests": args.max_running_requests,
            "context_length": args.context_length,
            "vocab_size": self.model_config.vocab_size,
            "startup_time": self.startup_time,
            "internal_states": [{"num_requests": self.num_requests, "prefix_cache": self.cache.stats()}],
            "version": _version(),
            "frontend": "python",
        }

    def model_info(self) -> dict:
        return {
            "model_path": self.server_args.model_path,
            "served_model_name": self.server_args.model_path,
            "tokenizer_path": self.server_args.model_path,
            "is_generation": True,
            "weight_version": "default",
            "model_type": "tiny_mamba",
            "architectures": ["TinyMambaForCausalLM"],
        }


def _version() -> str:
    from .version import __version__

    return __version__
