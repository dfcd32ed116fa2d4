"""Local causal LLMs through Hugging Face transformers (CPU, bf16 by default).

Scoring (``score``) is the hot path of taking an exam. For one prompt and K
continuations it runs

1. one forward pass over the prompt, keeping its key/value cache and the last hidden
   state (which predicts the first continuation token);
2. one batched forward pass over the K continuations (right-padded), attending to
   the prompt's cache repeated K times;
3. the LM head only at the hidden states that predict a continuation token, so a
   262k-token vocabulary costs sum_k n_k rows, not K * (prompt + n) rows.

log P(cont | prompt) = sum_{j=1}^{n} log softmax(W h_{j-1})[t_j], with h_0 the
prompt's last hidden state.

Tokenisation boundary (same convention as lm-evaluation-harness): trailing
whitespace of the prompt is moved to the front of the continuation; the prompt is
tokenised alone (with the tokenizer's BOS if it adds one) and the continuation tokens
are the tail of ``tokenize(prompt + continuation)`` after the prompt tokens. When the
joint tokenisation merges across the boundary (the prompt's tokens are not a prefix),
the continuation is tokenised alone instead; ``boundary_fallbacks`` counts this. Both
the fast path and :meth:`TransformersLLM.score_naive` use exactly these token ids.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any, Sequence

from .base import ContinuationScore, GenerationParams, ScoreRequest


def split_trailing_whitespace(prompt: str, continuation: str) -> tuple[str, str]:
    """Move the prompt's trailing whitespace to the start of the continuation."""
    stripped = prompt.rstrip()
    return stripped, prompt[len(stripped):] + continuation


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU runs bfloat16 matrix products natively (AVX512-BF16 or AMX, as oneDNN reports).

    Without them (e.g. AVX2-only CPUs) torch emulates bf16 and a forward pass is
    slower than in float32 (1.7x on a 2-core AMD EPYC with AVX2: 480 s vs 278 s for
    8 x 32 generated tokens with Qwen2.5-Coder-0.5B).
    """
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_dtype(dtype: str) -> str:
    """``"auto"`` -> ``"bfloat16"`` on CPUs with native bf16 (see :func:`cpu_has_fast_bf16`), else ``"float32"``."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if cpu_has_fast_bf16() else "float32"


class Heartbeat:
    """Context manager that calls ``beat(elapsed_seconds)`` every ``every`` seconds from a daemon thread.

    Long silent steps (a GGUF tokenizer conversion, the prefill of a batch) use it to
    show they are alive; the default ``beat`` prints ``  ... LABEL: N s`` to stderr.
    """

    def __init__(self, label: str, every: float = 5.0, beat: Any = None) -> None:
        import sys

        self.label, self.every = label, every
        self.beat = beat or (lambda elapsed: print(f"  ... {self.label}: {elapsed:.0f} s", file=sys.stderr,
                                                   flush=True))

    def __enter__(self) -> "Heartbeat":
        import threading
        import time

        self._stop = threading.Event()
        start = time.perf_counter()

        def loop() -> None:
            while not self._stop.wait(self.every):
                self.beat(time.perf_counter() - start)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


class _StopStrings:
    """A ``model.generate`` stopping criterion: a row is finished once its new text contains a stop string.

    The text kept is the same as decoding to the end and cutting at the first stop
    string (:func:`truncate_at_stop` runs afterwards either way); a batch just stops
    when every row has reached a stop string, instead of running to ``max_new_tokens``.
    """

    def __init__(self, tokenizer: Any, stop: Sequence[str], width: int) -> None:
        self.tokenizer, self.stop, self.width = tokenizer, [s for s in stop if s], width
        self.done: list[bool] | None = None

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        if self.done is None:
            self.done = [False] * input_ids.shape[0]
        for row in range(input_ids.shape[0]):
            if not self.done[row]:
                text = self.tokenizer.decode(input_ids[row, self.width:], skip_special_tokens=True)
                self.done[row] = any(s in text for s in self.stop)
        return torch.tensor(self.done, dtype=torch.bool, device=input_ids.device)


class _TokenProgress:
    """A ``model.generate`` stopping criterion that never stops but counts decoded steps in a tqdm bar."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.bar.update(1)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading positions where ``a`` and ``b`` agree."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class TransformersLLM:
    """A causal LM from a local transformers directory (see :func:`irtexam.llm.load_llm`).

    ``dtype`` is ``"bfloat16"`` (default; fast on CPUs with AMX/AVX512-bf16) or
    ``"float32"`` (exact to ~1e-4 nats). ``chat`` decides whether ``generate`` wraps the
    prompt in the tokenizer's chat template (default: when it has one). ``batch_size``
    is how many prompts ``generate`` decodes together (see :meth:`generate`).
    ``prefix_sharing`` lets ``score`` reuse the KV cache of a common token prefix
    across prompts (see :meth:`score`). ``dtype="auto"`` picks bfloat16 where the CPU
    has native bf16 and float32 elsewhere (:func:`resolve_dtype`). With ``progress``
    (attribute, default False) ``generate`` shows a per-token bar for each batch.
    """

    def __init__(self, model_dir: str | Path, *, name: str | None = None, dtype: str = "bfloat16",
                 device: str = "cpu", chat: bool | None = None, num_threads: int | None = None,
                 model: Any = None, tokenizer: Any = None, batch_size: int = 8,
                 prefix_sharing: bool = True) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if num_threads:
            torch.set_num_threads(num_threads)
        self.model_dir = str(model_dir)
        self._name = name or Path(self.model_dir).name
        dtype = resolve_dtype(dtype) if device == "cpu" else ("bfloat16" if dtype == "auto" else dtype)
        self.dtype_name = dtype
        self.device = device
        self.progress = False
        torch_dtype = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float32": torch.float32,
                       "fp32": torch.float32, "float16": torch.float16}[dtype]
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(self.model_dir)
        self.model = model or AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch_dtype)
        self.model.to(device)
        self.model.eval()
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        self.chat = has_template if chat is None else (chat and has_template)
        self.boundary_fallbacks = 0
        self.prefix_sharing = prefix_sharing
        self.prefix_stats = {"prompt_tokens": 0, "reused_tokens": 0}
        self.batch_size = max(1, int(batch_size))
        self._decoder = getattr(self.model, self.model.base_model_prefix)
        self._head = self.model.get_output_embeddings()
        self._softcap = getattr(getattr(self.model.config, "get_text_config", lambda: self.model.config)(),
                                "final_logit_softcapping", None)

    @property
    def name(self) -> str:
        """Model identifier used in facets, provenance and cache keys."""
        return self._name

    # ---------------------------------------------------------------- tokenisation
    def _encode(self, text: str, special: bool = True) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def encode_pair(self, prompt: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids of (prompt, continuation) under the documented boundary convention."""
        context, cont = split_trailing_whitespace(prompt, continuation)
        prompt_ids = self._encode(context)
        if not cont:
            return prompt_ids, []
        whole = self._encode(context + cont)
        if whole[:len(prompt_ids)] == prompt_ids and len(whole) > len(prompt_ids):
            return prompt_ids, whole[len(prompt_ids):]
        self.boundary_fallbacks += 1
        return prompt_ids, self._encode(cont, special=False)

    # ---------------------------------------------------------------- scoring
    def _logprobs_at(self, hidden: Any, targets: Any) -> Any:
        """log softmax(W h)[target] for rows of hidden states (N, H) and targets (N,)."""
        import torch

        logits = self._head(hidden).float()
        if self._softcap:
            logits = torch.tanh(logits / self._softcap) * self._softcap
        return torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None])[:, 0]

    def _encode_request(self, request: ScoreRequest) -> tuple[list[int], list[list[int]]]:
        """Prompt token ids and the token ids of each continuation (boundary convention above)."""
        pairs = [self.encode_pair(request.prompt, c) for c in request.continuations]
        prompt_ids = pairs[0][0] if pairs else self._encode(request.prompt.rstrip())
        return prompt_ids, [c for _, c in pairs]

    def _prompt_state(self, prompt_ids: Sequence[int], cache: Any, cached_ids: Sequence[int]) -> tuple[Any, Any, int]:
        """KV cache and last hidden state of ``prompt_ids``, reusing ``cache`` (which holds ``cached_ids``).

        The cache is cropped to the longest common token prefix of the two prompts (at most
        len(prompt_ids) - 1, so at least one token runs and yields the last hidden state) and
        only the remaining tokens are run, at positions lcp .. len - 1. With causal attention
        the keys and values of a prefix depend on the prefix alone, so the result equals a
        full forward pass up to floating-point rounding. Returns (cache, h_last, reused tokens).
        """
        import torch

        dev = self.device
        reuse = 0
        if cache is not None:
            reuse = min(common_prefix_length(cached_ids, prompt_ids), len(prompt_ids) - 1)
        if reuse > 0:
            if reuse < len(cached_ids):
                cache.crop(reuse - len(cached_ids))
            positions = torch.arange(reuse, len(prompt_ids), device=dev)
            out = self._decoder(input_ids=torch.tensor([prompt_ids[reuse:]], device=dev), past_key_values=cache,
                                position_ids=positions[None], cache_position=positions, use_cache=True)
        else:
            out = self._decoder(input_ids=torch.tensor([prompt_ids], device=dev), use_cache=True)
        return out.past_key_values, out.last_hidden_state[0, -1], reuse

    def _continuation_logprobs(self, cache: Any, h_last: Any, plen: int,
                               conts: Sequence[Sequence[int]]) -> list[tuple[float, ...]]:
        """Per-token log-probabilities of each (non-empty) continuation after a prompt of ``plen`` tokens.

        The prompt's cache is repeated once per continuation, the right-padded
        continuations run in one batch, and the cache is restored to the single prompt
        afterwards (so the caller may reuse it for the next prompt).
        """
        import torch

        dev = self.device
        n_k = len(conts)
        lmax = max(len(c) for c in conts)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((n_k, lmax), pad, dtype=torch.long, device=dev)
        for row, c in enumerate(conts):
            ids[row, :len(c)] = torch.tensor(c, device=dev)
        rows, cols, targets = [], [], []
        for row, c in enumerate(conts):
            for j in range(1, len(c)):
                rows.append(row)
                cols.append(j - 1)
                targets.append(c[j])
        first_lp = self._logprobs_at(h_last[None].expand(n_k, -1), torch.tensor([c[0] for c in conts], device=dev))
        per_row: list[list[float]] = [[float(first_lp[r])] for r in range(n_k)]
        if rows and lmax > 1:
            cache.batch_repeat_interleave(n_k)
            # right padding + causal attention: pads only follow real tokens, so
            # no attention mask is needed; positions continue after the prompt.
            positions = torch.arange(plen, plen + lmax - 1, device=dev)[None].expand(n_k, -1)
            hid = self._decoder(input_ids=ids[:, :lmax - 1], past_key_values=cache,
                                position_ids=positions, cache_position=positions[0],
                                use_cache=True).last_hidden_state
            sel = hid[torch.tensor(rows, device=dev), torch.tensor(cols, device=dev)]
            rest_lp = self._logprobs_at(sel, torch.tensor(targets, device=dev))
            for r, value in zip(rows, rest_lp.tolist()):
                per_row[r].append(value)
            cache.crop(-(lmax - 1))
            cache.batch_select_indices(torch.tensor([0], device=dev))
        return [tuple(v) for v in per_row]

    def _cache_is_croppable(self, cache: Any) -> bool:
        """Whether every layer of ``cache`` keeps all past keys (no sliding window), so cropping is exact."""
        from transformers.cache_utils import DynamicLayer

        layers = getattr(cache, "layers", None)
        return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[ContinuationScore]]:
        """Log-likelihood of each continuation given its prompt, sharing KV caches.

        Within a prompt, the K continuations share the prompt's cache. Across prompts
        (``prefix_sharing``, on by default), requests are visited in lexicographic order
        of their prompt token ids, and each prompt reuses the cache of the previous one up
        to their longest common token prefix: the ICL levels of one retriever share the
        retrieved context, and pipelines that retrieve the same first passages share those.
        For sorted sequences the predecessor has the longest common prefix with each
        prompt among all earlier ones, so one cache suffices. Models whose cache cannot be
        cropped exactly (sliding-window layers, e.g. Gemma 3) run every prompt in full.
        ``prefix_stats`` counts prompt tokens run and reused.
        """
        import torch

        encoded = [self._encode_request(r) for r in requests]
        results: list[list[ContinuationScore]] = [[] for _ in requests]
        order = sorted(range(len(requests)), key=lambda i: encoded[i][0]) if self.prefix_sharing else range(len(requests))
        cache, cached_ids = None, []
        with torch.inference_mode():
            for i in order:
                request = requests[i]
                prompt_ids, conts = encoded[i]
                nonempty = [k for k, c in enumerate(conts) if c]
                per_token: dict[int, tuple[float, ...]] = {}
                if nonempty:
                    cache, h_last, reused = self._prompt_state(prompt_ids, cache, cached_ids)
                    cached_ids = prompt_ids
                    self.prefix_stats["prompt_tokens"] += len(prompt_ids)
                    self.prefix_stats["reused_tokens"] += reused
                    lps = self._continuation_logprobs(cache, h_last, len(prompt_ids), [conts[k] for k in nonempty])
                    per_token = dict(zip(nonempty, lps))
                    if not (self.prefix_sharing and self._cache_is_croppable(cache)):
                        cache, cached_ids = None, []
                for k, text in enumerate(request.continuations):
                    lp = per_token.get(k, ())
                    results[i].append(ContinuationScore(math.fsum(lp), len(lp), len(text), lp))
        return results

    def score_naive(self, requests: Sequence[ScoreRequest]) -> list[list[ContinuationScore]]:
        """Reference implementation: one full forward pass per (prompt, continuation)."""
        import torch

        out: list[list[ContinuationScore]] = []
        for request in requests:
            scores = []
            for cont_text in request.continuations:
                prompt_ids, cont = self.encode_pair(request.prompt, cont_text)
                if not cont:
                    scores.append(ContinuationScore(0.0, 0, len(cont_text), ()))
                    continue
                with torch.inference_mode():
                    ids = torch.tensor([prompt_ids + cont], device=self.device)
                    logits = self.model(input_ids=ids).logits[0].float()
                    lp = torch.log_softmax(logits, dim=-1)
                    start = len(prompt_ids)
                    vals = [float(lp[start + j - 1, t]) for j, t in enumerate(cont)]
                scores.append(ContinuationScore(math.fsum(vals), len(vals), len(cont_text), tuple(vals)))
            out.append(scores)
        return out

    def token_logprobs(self, text: str) -> list[tuple[str, int, float | None]]:
        """(token text, character offset, log P(token | previous tokens)) for every token.

        The first token (or BOS) has no conditional probability (None). Used by the
        OpenAI-compatible server for ``/v1/completions`` with ``echo`` and ``logprobs``.
        """
        import torch

        enc = self.tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        offsets = [o[0] for o in enc["offset_mapping"]]
        with torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([ids], device=self.device)).logits[0].float()
            lp = torch.log_softmax(logits, dim=-1)
        tokens = [self.tokenizer.decode([t]) for t in ids]
        special = set(self.tokenizer.all_special_ids)
        result: list[tuple[str, int, float | None]] = []
        for i, t in enumerate(ids):
            value = None if i == 0 else float(lp[i - 1, t])
            offset = offsets[i] if t not in special else 0
            result.append(("" if t in special else tokens[i], int(offset), value))
        return result

    # ---------------------------------------------------------------- generation
    def format_prompt(self, prompt: str) -> str:
        """The text fed to the model: chat-templated user turn if ``chat``, else the prompt."""
        if not self.chat:
            return prompt
        return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                  tokenize=False, add_generation_prompt=True)

    def generate(self, prompts: Sequence[str], params: GenerationParams = GenerationParams()) -> list[str]:
        """Complete each prompt: greedy when temperature is 0, else sampled with ``params.seed``.

        Prompts are decoded ``batch_size`` at a time (constructor argument, default 8):
        they are sorted by token length, left-padded with an attention mask, and run
        through one ``model.generate`` per batch; outputs come back in input order.
        Single-sequence decoding on CPU is memory-bandwidth bound (every step reads all
        the weights for one token), so a batch of 8 costs little more per step than one
        prompt.

        Sampling uses one ``torch.Generator`` per prompt seeded with ``params.seed``, so
        a prompt's sample does not depend on which other prompts share its batch.
        Batched and one-by-one decoding run different kernels (padded shapes), so a
        greedy output can differ from the unbatched one after a near tie between two
        tokens, mostly in bf16; both are valid greedy decodes of the model.
        """
        texts = [self.format_prompt(p) for p in prompts]
        encoded = [self._encode(t, special=not self.chat) for t in texts]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        outputs = [""] * len(encoded)
        n_batches = -(-len(order) // self.batch_size)
        for number, start in enumerate(range(0, len(order), self.batch_size), 1):
            idx = order[start:start + self.batch_size]
            label = f"decoding {len(idx)} prompt(s)" + (f", batch {number}/{n_batches}" if n_batches > 1 else "")
            for i, completion in zip(idx, self._generate_batch([encoded[i] for i in idx], params, label)):
                outputs[i] = truncate_at_stop(completion, params.stop)
        return outputs

    def _generate_batch(self, batch: list[list[int]], params: GenerationParams, label: str = "decoding") -> list[str]:
        """One left-padded ``model.generate`` call over token id lists."""
        import torch
        from transformers import LogitsProcessorList

        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        width = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[row, width - len(ids):] = 1
        kwargs: dict[str, Any] = {"max_new_tokens": params.max_new_tokens, "pad_token_id": pad,
                                  "do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if params.temperature > 0:
            kwargs["logits_processor"] = LogitsProcessorList(
                [_SeededSampler(len(batch), params.seed, params.temperature, params.top_p)])
        from transformers import StoppingCriteriaList

        criteria: list[Any] = []
        if any(params.stop):
            criteria.append(_StopStrings(self.tokenizer, params.stop, width))
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=params.max_new_tokens, desc=label, unit="tok", mininterval=2.0, leave=False)
            criteria.append(_TokenProgress(bar))
        if criteria:
            kwargs["stopping_criteria"] = StoppingCriteriaList(criteria)
        try:
            alive = Heartbeat(label, 5.0, lambda _: bar.refresh()) if bar is not None else contextlib.nullcontext()
            with torch.inference_mode(), alive:  # the bar is redrawn during a long prefill too
                gen = self.model.generate(input_ids.to(self.device), attention_mask=mask.to(self.device), **kwargs)
        finally:
            if bar is not None:
                bar.close()
        return [self.tokenizer.decode(gen[row, width:], skip_special_tokens=True) for row in range(len(batch))]


class _SeededSampler:
    """Logits processor that samples each row with its own seeded generator.

    Applies temperature and nucleus (top-p) filtering, draws one token per row from
    that row's ``torch.Generator`` and returns scores that are -inf except at the drawn
    token, so greedy selection inside ``model.generate`` picks it.
    """

    def __init__(self, rows: int, seed: int, temperature: float, top_p: float) -> None:
        import torch

        self.generators = [torch.Generator().manual_seed(seed) for _ in range(rows)]
        self.temperature = temperature
        self.top_p = top_p

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, sorted_i = probs.sort(dim=-1, descending=True)
            drop = sorted_p.cumsum(-1) - sorted_p > self.top_p  # keep the smallest set reaching top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, sorted_i, sorted_p)
        out = torch.full_like(scores, float("-inf"))
        for row, gen in enumerate(self.generators):
            token = torch.multinomial(probs[row].cpu(), 1, generator=gen)
            out[row, int(token)] = 0.0
        return out


def truncate_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut ``text`` at the first occurrence of any stop string."""
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if i != -1:
                cut = min(cut, i)
    return text[:cut]
