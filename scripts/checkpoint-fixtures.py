#!/usr/bin/env python3
"""Write small Hugging Face style W4A16 checkpoints with the REAL producer libraries.

Each fixture is a model directory (config.json with the
quantization_config the library writes, safetensors shard(s), index where sharded) whose
quantized linears were packed by the producer library's own code:

  * compressed-tensors (pack-quantized): apply_quantization_config + ModelCompressor
    (PackedQuantizationCompressor) on a tiny torch module tree; ModelCompressor.update_config
    writes the quantization_config into config.json.
  * AutoGPTQ 0.7.1: QuantLinear.pack of nn_modules/qlinear/qlinear_cuda_old.py (loaded by
    file path, so the heavy package __init__ never runs); checkpoint v1 (0.7.1 cannot write
    v2: it has no checkpoint_format at all).
  * AutoAWQ: WQLinear_GEMM.from_linear (awq.modules.linear.gemm, imported under stub parent
    packages so awq/__init__ never runs).

What we choose is only the integers: weights come from a seeded RNG, and per group we compute
q, scale and zero point in torch (min/max for asymmetric, absmax for symmetric, in the
producer's own convention), then hand the producer a weight equal to (q - z) * s in the
activation dtype together with s and z, so that its packer re-derives exactly our q.  The
script checks that it did (the library's own dequantization must equal (q - z) * s bit for
bit), except for the GPTQ v1 fixture whose packer defect is the point.

Beside every model, `w4a16-oracle.safetensors` holds, per quantized linear:
  <module>.dequantized  [N, K]  the library's OWN dequantization of what it packed
                                (compressed-tensors decompress, AutoGPTQ's torch forward path,
                                AutoAWQ's dequantize_gemm), activation dtype
  <module>.x            [M, K]  seeded activations (M = 5), activation dtype
  <module>.y            [M, N]  torch.nn.functional.linear(x, dequantized), activation dtype,
                                on the GPU when there is one (metadata `y_device`)
  <module>.intended_dequantized [N, K]   GPTQ v1 fixture only: (q - z) * s before the packer
                                ran, so the defect's size can be measured.
and `fixtures.json` (beside the fixture dirs) records library versions, shapes, files and the
measured defect size.

Run on a machine with torch (see scripts/checkpoint-fixtures.sh); every fixture is tried on
its own, a failure is reported and the others go on; a summary table ends the output and the
exit status is non-zero when any fixture failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import math
import os
import shutil
import sys
import traceback
import types
import zlib
from pathlib import Path

# compressed-tensors: use its eager torch implementations (CPU tensors use them anyway).
os.environ.setdefault("CT_ENFORCE_EAGER", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

M_ROWS = 5
ORACLE_FILE = "w4a16-oracle.safetensors"
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


class FixtureError(Exception):
    """A fixture could not be written as intended; the message says what and why."""


# ----------------------------------------------------------------------------------------------
# versions


def dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict:
    names = [
        "torch",
        "transformers",
        "safetensors",
        "huggingface_hub",
        "numpy",
        "compressed-tensors",
        "pydantic",
        "auto_gptq",
        "autoawq",
    ]
    return {n: dist_version(n) for n in names}


# ----------------------------------------------------------------------------------------------
# architecture: a tiny llama-like (or qwen3_moe-like) model as a plain torch module tree


@dataclasses.dataclass
class Arch:
    kind: str = "llama"  # "llama" | "qwen3_moe"
    hidden: int = 128
    intermediate: int = 256
    layers: int = 1
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    vocab: int = 64
    max_pos: int = 256
    experts: int = 0
    moe_intermediate: int = 64
    top_k: int = 2

    def linears(self) -> list[tuple[str, int, int, str]]:
        """(module, N, K, role) of every linear layer, in state-dict order."""
        out = []
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        for i in range(self.layers):
            p = f"model.layers.{i}"
            out += [
                (f"{p}.self_attn.q_proj", q, h, "attn"),
                (f"{p}.self_attn.k_proj", kv, h, "attn"),
                (f"{p}.self_attn.v_proj", kv, h, "attn"),
                (f"{p}.self_attn.o_proj", h, q, "attn"),
            ]
            if self.kind == "qwen3_moe":
                out.append((f"{p}.mlp.gate", self.experts, h, "router"))
                mi = self.moe_intermediate
                for e in range(self.experts):
                    out += [
                        (f"{p}.mlp.experts.{e}.gate_proj", mi, h, "expert"),
                        (f"{p}.mlp.experts.{e}.up_proj", mi, h, "expert"),
                        (f"{p}.mlp.experts.{e}.down_proj", h, mi, "expert"),
                    ]
            else:
                it = self.intermediate
                out += [
                    (f"{p}.mlp.gate_proj", it, h, "mlp"),
                    (f"{p}.mlp.up_proj", it, h, "mlp"),
                    (f"{p}.mlp.down_proj", h, it, "mlp"),
                ]
        out.append(("lm_head", self.vocab, h, "lm_head"))
        return out

    def hf_config(self, dtype_name: str):
        """The transformers config object (its own class, so config.json is what it writes)."""
        import transformers

        common = dict(
            vocab_size=self.vocab,
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            max_position_embeddings=self.max_pos,
            tie_word_embeddings=False,
            dtype=dtype_name,
        )
        if self.kind == "qwen3_moe":
            return transformers.Qwen3MoeConfig(
                architectures=["Qwen3MoeForCausalLM"],
                moe_intermediate_size=self.moe_intermediate,
                num_experts=self.experts,
                num_experts_per_tok=self.top_k,
                decoder_sparse_step=1,
                mlp_only_layers=[],
                **common,
            )  # head_dim is no Qwen3MoeConfig field here; it equals hidden / heads
        return transformers.LlamaConfig(architectures=["LlamaForCausalLM"], head_dim=self.head_dim, **common)


class Node(nn.Module):
    """A plain container: its class name must not contain 'attention' (compressed-tensors
    would then treat it as an attention module for KV-cache quantization)."""


class RMSNormW(nn.Module):
    def __init__(self, n: int, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, dtype=dtype), requires_grad=False)


def set_child(root: nn.Module, dotted: str, module: nn.Module) -> None:
    parts = dotted.split(".")
    cur = root
    for p in parts[:-1]:
        if not hasattr(cur, p):
            cur.add_module(p, Node())
        cur = getattr(cur, p)
    cur.add_module(parts[-1], module)


def name_seed(base: int, name: str) -> int:
    return (base * 1_000_003 + zlib.crc32(name.encode())) % (2**62)


def gen(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def build_tree(arch: Arch, dtype, seed: int) -> nn.Module:
    """The model as torch modules with the standard HF names; unquantized parts are seeded."""
    root = Node()
    emb = nn.Embedding(arch.vocab, arch.hidden, dtype=dtype)
    with torch.no_grad():
        emb.weight.copy_(torch.randn(arch.vocab, arch.hidden, generator=gen(name_seed(seed, "embed"))) * 0.02)
    emb.weight.requires_grad_(False)
    set_child(root, "model.embed_tokens", emb)
    for i in range(arch.layers):
        p = f"model.layers.{i}"
        set_child(root, f"{p}.input_layernorm", RMSNormW(arch.hidden, dtype))
        set_child(root, f"{p}.post_attention_layernorm", RMSNormW(arch.hidden, dtype))
        if arch.kind == "qwen3_moe":
            set_child(root, f"{p}.self_attn.q_norm", RMSNormW(arch.head_dim, dtype))
            set_child(root, f"{p}.self_attn.k_norm", RMSNormW(arch.head_dim, dtype))
    for name, n, k, _role in arch.linears():
        lin = nn.Linear(k, n, bias=False, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(n, k, generator=gen(name_seed(seed, name))) * 0.02)
        lin.weight.requires_grad_(False)
        set_child(root, name, lin)
    set_child(root, "model.norm", RMSNormW(arch.hidden, dtype))
    return root


def get_module(root: nn.Module, dotted: str) -> nn.Module:
    cur = root
    for p in dotted.split("."):
        cur = getattr(cur, p)
    return cur


# ----------------------------------------------------------------------------------------------
# our quantization: integers, scales and zero points per group (producer conventions)


@dataclasses.dataclass
class Quant:
    q: torch.Tensor  # int32 [N, K], unsigned 0..15
    z: torch.Tensor  # int32 [N, K/G], unsigned 0..15
    s: torch.Tensor  # activation dtype [N, K/G]
    deq: torch.Tensor  # activation dtype [N, K] = (q - z) * s rounded once


def master_weight(n: int, k: int, seed: int, name: str, positive_cells: float = 0.0, group: int = 0):
    """Seeded float32 weight; `positive_cells` > 0 makes that fraction of (row, group) cells
    all non-negative, so min/max quantization with the range forced through 0 gives z = 0."""
    w = torch.randn(n, k, generator=gen(name_seed(seed, name))) * 0.05
    if positive_cells > 0:
        ng = k // group
        pick = torch.rand(n, ng, generator=gen(name_seed(seed + 7, name))) < positive_cells
        wg = w.view(n, ng, group)
        wg[pick] = wg[pick].abs() + 1e-3
    return w


def quantize(w: torch.Tensor, group: int, scheme: str, dtype) -> Quant:
    """Per-group 4-bit quantization.

    scheme:
      ct_sym     compressed-tensors minmax symmetric: s = absmax / 7.5, q_signed in [-8, 7]
                 (stored unsigned with z = 8)
      minmax0    asymmetric with the range forced through 0 (compressed-tensors minmax, GPTQ):
                 s = (max(hi,0) - min(lo,0)) / 15, z = round(-min(lo,0) / s); z = 0 when a group
                 has no negative weight
      gptq_sym   AutoGPTQ symmetric: s = 2 * absmax / 15, z = 8
      awq        AutoAWQ zero_point: s = (hi - lo) / 15, z = clamp(-round(lo / s), 0, 15)
    """
    n, k = w.shape
    if k % group:
        raise FixtureError(f"K = {k} is not a multiple of the group size {group}")
    ng = k // group
    wg = w.float().reshape(n, ng, group)
    lo, hi = wg.amin(-1), wg.amax(-1)
    if scheme == "ct_sym":
        s = torch.maximum(lo.abs(), hi.abs()) / 7.5
    elif scheme == "gptq_sym":
        s = 2 * torch.maximum(lo.abs(), hi.abs()) / 15
    elif scheme == "minmax0":
        lo, hi = lo.clamp(max=0), hi.clamp(min=0)
        s = (hi - lo) / 15
    elif scheme == "awq":
        s = (hi - lo).clamp(min=1e-5) / 15
    else:
        raise FixtureError(f"unknown quantization scheme {scheme}")
    s = s.clamp(min=1e-4).to(dtype)  # scales are stored in the activation dtype
    sf = s.float()
    if scheme in ("ct_sym", "gptq_sym"):
        z = torch.full((n, ng), 8.0)
    else:
        z = torch.round(-lo / sf).clamp(0, 15)
    q = (torch.round(wg / sf[..., None]) + z[..., None]).clamp(0, 15)
    deq = ((q - z[..., None]) * sf[..., None]).to(dtype).reshape(n, k)
    return Quant(q=q.reshape(n, k).to(torch.int32), z=z.to(torch.int32), s=s, deq=deq)


# ----------------------------------------------------------------------------------------------
# writing helpers


def tensor_desc(t: torch.Tensor) -> dict:
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}


def save_state_dict(sd: dict, out: Path, shards: int = 1, metadata: dict | None = None) -> list[str]:
    """huggingface_hub.save_torch_state_dict (what transformers / AutoAWQ use): model.safetensors,
    or model-0000i-of-0000n.safetensors + model.safetensors.index.json.  `shards` = 2 picks a
    max_shard_size that splits the state dict in two; the result is checked."""
    sd = {k: v.detach().cpu().contiguous() for k, v in sd.items()}
    total = sum(v.numel() * v.element_size() for v in sd.values())
    max_shard = total + 1 if shards == 1 else int(total * 0.55)
    try:
        from huggingface_hub import save_torch_state_dict
    except ImportError as e:
        raise FixtureError(f"huggingface_hub.save_torch_state_dict is not importable: {e}")
    kwargs = dict(max_shard_size=max_shard, safe_serialization=True)
    if metadata:
        kwargs["metadata"] = metadata
    save_torch_state_dict(sd, str(out), **kwargs)
    files = sorted(p.name for p in out.glob("*.safetensors") if p.name != ORACLE_FILE)
    if len(files) != shards:
        raise FixtureError(f"asked for {shards} shard(s), huggingface_hub wrote {files}")
    if shards > 1 and not (out / "model.safetensors.index.json").exists():
        raise FixtureError("sharded save wrote no model.safetensors.index.json")
    return files


def load_dir_tensors(out: Path) -> dict:
    """Every tensor of the model's shards (not the oracle), read back from disk."""
    sd = {}
    for p in sorted(out.glob("*.safetensors")):
        if p.name == ORACLE_FILE:
            continue
        with safe_open(str(p), framework="pt") as f:
            for k in f.keys():
                sd[k] = f.get_tensor(k)
    return sd


def write_config(arch: Arch, dtype_name: str, out: Path, quantization_config: dict | None) -> str:
    """config.json through transformers' own config class; quantization_config set on it the
    way AutoGPTQ / AutoAWQ do (model.config.quantization_config = dict; save_pretrained)."""
    cfg = arch.hf_config(dtype_name)
    how = "transformers config.save_pretrained"
    if quantization_config is not None:
        try:
            cfg.quantization_config = quantization_config
        except Exception as e:  # noqa: BLE001 - strict config classes may refuse; patched below
            how += f" (setting quantization_config refused: {type(e).__name__})"
    cfg.save_pretrained(str(out))
    path = out / "config.json"
    data = json.loads(path.read_text())
    if quantization_config is not None and data.get("quantization_config") != quantization_config:
        # transformers dropped or rewrote it: write exactly what the library hands over.
        data["quantization_config"] = quantization_config
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        how += " (quantization_config patched in: transformers did not keep the dict verbatim)"
    return how


class Oracle:
    """Collects w4a16-oracle.safetensors for one fixture."""

    def __init__(self, dtype, seed: int):
        self.dtype = dtype
        self.seed = seed
        self.tensors: dict[str, torch.Tensor] = {}
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.device == "cuda":
            # a plain fp32-accumulated GEMM, one rounding at the end
            for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
                try:
                    setattr(torch.backends.cuda.matmul, flag, False)
                except Exception as e:  # noqa: BLE001
                    print(f"  note: could not set torch.backends.cuda.matmul.{flag} = False: {e}")

    def add(self, module: str, deq: torch.Tensor, intended: torch.Tensor | None = None) -> None:
        if deq.dtype != self.dtype:
            raise FixtureError(f"{module}: library dequantized to {deq.dtype}, expected {self.dtype}")
        n, k = deq.shape
        x = (torch.randn(M_ROWS, k, generator=gen(name_seed(self.seed + 101, module)))).to(self.dtype)
        y = F.linear(x.to(self.device), deq.to(self.device)).cpu()
        self.tensors[f"{module}.dequantized"] = deq.contiguous()
        self.tensors[f"{module}.x"] = x.contiguous()
        self.tensors[f"{module}.y"] = y.contiguous()
        if intended is not None:
            self.tensors[f"{module}.intended_dequantized"] = intended.contiguous()

    def device_name(self) -> str:
        if self.device == "cuda":
            return f"cuda ({torch.cuda.get_device_name(0)})"
        return "cpu"

    def write(self, out: Path, producer: str) -> None:
        meta = {
            "producer": producer,
            "dequantized": "the producer library's own dequantization of what it packed",
            "y": "torch.nn.functional.linear(x, dequantized) in the activation dtype",
            "y_device": self.device_name(),
            "y_reduced_precision_reduction": "False",
            "activation_dtype": str(self.dtype).replace("torch.", ""),
            "torch": torch.__version__,
            "m": str(M_ROWS),
        }
        save_file(self.tensors, str(out / ORACLE_FILE), metadata=meta)


def compare(module: str, got: torch.Tensor, intended: torch.Tensor) -> dict:
    if got.dtype != intended.dtype or got.shape != intended.shape:
        raise FixtureError(
            f"{module}: library dequantized to {got.dtype} {tuple(got.shape)}, "
            f"expected {intended.dtype} {tuple(intended.shape)}"
        )
    differ = (got.view(torch.int16) != intended.view(torch.int16))
    return {
        "module": module,
        "weights": got.numel(),
        "differ": int(differ.sum()),
        "fraction": float(differ.float().mean()),
    }


# ----------------------------------------------------------------------------------------------
# compressed-tensors


def ct_fixture(fx: dict, out: Path, manifest: dict) -> None:
    import compressed_tensors
    from compressed_tensors.compressors import ModelCompressor, PackedQuantizationCompressor
    from compressed_tensors.quantization import (
        QuantizationArgs,
        QuantizationConfig,
        QuantizationScheme,
        apply_quantization_config,
    )

    arch: Arch = fx["arch"]
    dtype_name, group, sym = fx["dtype"], fx["group"], fx["sym"]
    dtype = DTYPES[dtype_name]
    seed = fx["seed"]
    model = build_tree(arch, dtype, seed)

    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(num_bits=4, type="int", symmetric=sym, strategy="group", group_size=group),
    )
    qcfg = QuantizationConfig(config_groups={"group_0": scheme}, ignore=list(fx["ignore"]))
    apply_quantization_config(model, qcfg)

    quantized = [(name, n, k) for name, n, k, _r in arch.linears() if hasattr(get_module(model, name), "quantization_scheme")]
    if not quantized:
        raise FixtureError("compressed-tensors matched no Linear module")
    intended = {}
    with torch.no_grad():
        for name, n, k in quantized:
            mod = get_module(model, name)
            w = master_weight(n, k, seed, name)
            qt = quantize(w, group, "ct_sym" if sym else "minmax0", dtype)
            mod.weight.data = qt.deq.clone()
            if tuple(mod.weight_scale.shape) != tuple(qt.s.shape):
                raise FixtureError(
                    f"{name}: compressed-tensors initialised weight_scale {tuple(mod.weight_scale.shape)}, "
                    f"expected {tuple(qt.s.shape)}"
                )
            mod.weight_scale.data = qt.s.clone().to(mod.weight_scale.dtype)
            if hasattr(mod, "weight_zero_point"):
                zp = (qt.z - 8) if not sym else torch.zeros_like(qt.z)
                mod.weight_zero_point.data = zp.to(mod.weight_zero_point.dtype)
            intended[name] = qt.deq

    compressor = ModelCompressor.from_pretrained_model(model, quantization_format="pack-quantized")
    compressor.compress_model(model)
    sd = model.state_dict()
    for name, n, k in quantized:
        if f"{name}.weight_packed" not in sd:
            raise FixtureError(f"{name}: compressed-tensors wrote no weight_packed (keys {sorted(x for x in sd if x.startswith(name))})")
    files = save_state_dict(sd, out, shards=fx.get("shards", 1))
    how = write_config(arch, dtype_name, out, None)
    compressor.update_config(str(out))
    cfg = json.loads((out / "config.json").read_text())
    if "quantization_config" not in cfg:
        raise FixtureError("ModelCompressor.update_config wrote no quantization_config")

    # Oracle: the library's own decompression of what is on disk.
    disk = load_dir_tensors(out)
    qcfg_disk = cfg["quantization_config"]
    try:
        disk_scheme = QuantizationScheme.model_validate(qcfg_disk["config_groups"]["group_0"])
    except Exception as e:  # noqa: BLE001 - fall back to the scheme the library attached
        print(f"  note: config.json's group_0 does not validate as a QuantizationScheme ({e}); using the module's")
        disk_scheme = get_module(model, quantized[0][0]).quantization_scheme
    oracle = Oracle(dtype, seed)
    modules = []
    for name, n, k in quantized:
        local = {
            suffix: disk[f"{name}.{suffix}"]
            for suffix in ("weight_packed", "weight_scale", "weight_zero_point", "weight_shape")
            if f"{name}.{suffix}" in disk
        }
        dec = PackedQuantizationCompressor.decompress(local, disk_scheme)["weight"]
        if tuple(dec.shape) != (n, k):
            raise FixtureError(f"{name}: decompress gave {tuple(dec.shape)}, expected {(n, k)}")
        cmp = compare(name, dec, intended[name])
        if cmp["differ"]:
            raise FixtureError(
                f"{name}: compressed-tensors decompress differs from (q - z) * s in {cmp['differ']} of "
                f"{cmp['weights']} weights: the packer did not re-derive our integers"
            )
        oracle.add(name, dec)
        modules.append({"module": name, "n": n, "k": k, "tensors": {s: tensor_desc(t) for s, t in local.items()}})
    oracle.write(out, f"compressed-tensors {compressed_tensors.__version__}")
    manifest.update(
        library=f"compressed-tensors {dist_version('compressed-tensors')}",
        packer="compressed_tensors.compressors.ModelCompressor.compress_model (PackedQuantizationCompressor, pack_to_int32)",
        oracle_dequant="PackedQuantizationCompressor.decompress (unpack_from_int32 + dequantize)",
        config_writer=how + "; ModelCompressor.update_config",
        files=files,
        modules=modules,
        y_device=oracle.device_name(),
    )


# ----------------------------------------------------------------------------------------------
# AutoGPTQ 0.7.1


def _stub_package(name: str, path: str) -> None:
    """Register `name` as a package whose modules come from `path`, without running its
    __init__ (AutoGPTQ's and AutoAWQ's pull in optional heavy dependencies)."""
    if name in sys.modules:
        return
    mod = types.ModuleType(name)
    mod.__path__ = [path]
    mod.__package__ = name
    sys.modules[name] = mod


def _package_dir(name: str) -> str:
    mod = sys.modules.get(name)
    if mod is not None and getattr(mod, "__path__", None):
        return list(mod.__path__)[0]
    spec = importlib.util.find_spec(name)  # does not execute the package
    if spec is None or not spec.submodule_search_locations:
        raise FixtureError(f"python package {name!r} is not installed (is PYTHONPATH=/tmp/site set?)")
    return list(spec.submodule_search_locations)[0]


def load_autogptq_quantlinear():
    root = _package_dir("auto_gptq")
    path = os.path.join(root, "nn_modules", "qlinear", "qlinear_cuda_old.py")
    if not os.path.exists(path):
        raise FixtureError(f"AutoGPTQ packer not found at {path}")
    spec = importlib.util.spec_from_file_location("auto_gptq_qlinear_cuda_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.QuantLinear, path


def autogptq_quantize_config(group: int, sym: bool) -> tuple[dict, str]:
    """BaseQuantizeConfig(...).to_dict() from the library when its module imports under stub
    parents, else the same dict as written in auto_gptq/modeling/_base.py (0.7.1)."""
    kw = dict(bits=4, group_size=group, desc_act=False, sym=sym)
    try:
        root = _package_dir("auto_gptq")
        for sub in ("", ".modeling", ".utils"):
            _stub_package("auto_gptq" + sub, os.path.join(root, *(sub.strip(".").split(".") if sub else [])))
        base = importlib.import_module("auto_gptq.modeling._base")
        return base.BaseQuantizeConfig(**kw).to_dict(), "auto_gptq.modeling._base.BaseQuantizeConfig.to_dict"
    except Exception as e:  # noqa: BLE001 - any import failure falls back to the literal
        d = {
            "bits": 4,
            "group_size": group,
            "damp_percent": 0.01,
            "desc_act": False,
            "static_groups": False,
            "sym": sym,
            "true_sequential": True,
            "model_name_or_path": None,
            "model_file_base_name": None,
            "is_marlin_format": False,
            "quant_method": "gptq",
        }
        return d, f"literal copy of BaseQuantizeConfig.to_dict (0.7.1); importing it failed: {type(e).__name__}: {e}"


def autogptq_dequant(ql, k: int, dtype) -> torch.Tensor:
    """AutoGPTQ's own torch path (QuantLinear.forward without its CUDA extension) applied to
    the identity: out = I @ (scales * (w - (z_stored + 1 & 15))) = the dequantized [K, N]."""
    ql.autogptq_cuda_available = False
    errors = []
    for dev in ("cpu", "cuda"):
        if dev == "cuda" and not torch.cuda.is_available():
            continue
        try:
            m = ql.to(dev)
            eye = torch.eye(k, dtype=dtype, device=dev)
            with torch.no_grad():
                out = m(eye)
            return out.t().contiguous().cpu()
        except Exception as e:  # noqa: BLE001
            errors.append(f"{dev}: {type(e).__name__}: {e}")
    raise FixtureError("AutoGPTQ torch forward failed: " + "; ".join(errors))


def v1_overflow_signature(qzeros: torch.Tensor) -> int:
    """Count qzeros words with the v1 overflow signature: nibble j = 15 and every nibble above."""
    w = qzeros.to(torch.int64) & 0xFFFFFFFF
    hit = torch.zeros_like(w, dtype=torch.bool)
    for j in range(7):
        hit |= (w >> (4 * j)) == (0xFFFFFFFF >> (4 * j))
    return int(hit.sum())


def gptq_fixture(fx: dict, out: Path, manifest: dict) -> None:
    QuantLinear, packer_path = load_autogptq_quantlinear()
    arch: Arch = fx["arch"]
    dtype_name, group, sym = fx["dtype"], fx["group"], fx["sym"]
    dtype = DTYPES[dtype_name]
    seed = fx["seed"]
    model = build_tree(arch, dtype, seed)
    sd = {k: v for k, v in model.state_dict().items()}
    quantized = [(name, n, k) for name, n, k, role in arch.linears() if role not in ("lm_head", "router")]
    oracle = Oracle(dtype, seed)
    modules, defects = [], []
    for name, n, k in quantized:
        w = master_weight(n, k, seed, name, positive_cells=fx.get("positive_cells", 0.0), group=group)
        qt = quantize(w, group, "gptq_sym" if sym else "minmax0", dtype)
        lin = nn.Linear(k, n, bias=False, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(qt.deq)
        ql = QuantLinear(bits=4, group_size=group, infeatures=k, outfeatures=n, bias=False, weight_dtype=dtype)
        g_idx = torch.tensor([i // group for i in range(k)], dtype=torch.int32)
        # AutoGPTQ hands pack() float scales and zeros of shape [N, K/G] (its quantizer's layout).
        ql.pack(lin, qt.s.float().clone(), qt.z.float().clone(), g_idx)
        del sd[f"{name}.weight"]
        for t in ("qweight", "qzeros", "scales", "g_idx"):
            sd[f"{name}.{t}"] = getattr(ql, t).detach().cpu().contiguous()
        deq = autogptq_dequant(ql, k, dtype)
        cmp = compare(name, deq, qt.deq)
        cmp["zero_point_zero_cells"] = int((qt.z == 0).sum())
        cmp["signature_words"] = v1_overflow_signature(sd[f"{name}.qzeros"])
        defects.append(cmp)
        if fx.get("expect_defect"):
            oracle.add(name, deq, intended=qt.deq)
        else:
            if cmp["differ"]:
                raise FixtureError(
                    f"{name}: AutoGPTQ's dequantization differs from (q - z) * s in {cmp['differ']} of "
                    f"{cmp['weights']} weights on a fixture meant to be clean"
                )
            oracle.add(name, deq)
        modules.append(
            {
                "module": name,
                "n": n,
                "k": k,
                "tensors": {t: tensor_desc(sd[f"{name}.{t}"]) for t in ("qweight", "qzeros", "scales", "g_idx")},
            }
        )
    qconf, qconf_src = autogptq_quantize_config(group, sym)
    # AutoGPTQ 0.7.1 save_quantized: one file named gptq_model-4bit-<G>g.safetensors with this
    # metadata, config.json with quantization_config = to_dict(), and quantize_config.json.
    fname = f"gptq_model-4bit-{group}g.safetensors"
    meta = {
        "format": "pt",
        "auto_gptq_version": dist_version("auto_gptq"),
        "gptq_bits": "4",
        "gptq_group_size": str(group),
        "gptq_desc_act": "False",
        "gptq_damp_percent": "0.01",
        "gptq_is_marlin_format": "False",
    }
    save_file({k: v.contiguous() for k, v in sd.items()}, str(out / fname), metadata=meta)
    how = write_config(arch, dtype_name, out, qconf)
    (out / "quantize_config.json").write_text(json.dumps(qconf, indent=2))
    oracle.write(out, f"AutoGPTQ {dist_version('auto_gptq')} (qlinear_cuda_old torch path)")
    total = sum(d["weights"] for d in defects)
    differ = sum(d["differ"] for d in defects)
    manifest.update(
        library=f"AutoGPTQ {dist_version('auto_gptq')}",
        packer=f"QuantLinear.pack from {packer_path.split('site-packages/')[-1].split('/tmp/site/')[-1]}",
        oracle_dequant="QuantLinear.forward torch path (no CUDA extension) on the identity",
        config_writer=how + "; quantize_config.json from " + qconf_src,
        checkpoint_format="gptq (v1: AutoGPTQ 0.7.1 writes no checkpoint_format key; v1 is the default)",
        files=[fname, "quantize_config.json"],
        modules=modules,
        y_device=oracle.device_name(),
        defect={
            "weights": total,
            "differ": differ,
            "fraction": differ / total if total else 0.0,
            "zero_point_zero_cells": sum(d["zero_point_zero_cells"] for d in defects),
            "signature_words": sum(d["signature_words"] for d in defects),
            "per_module": defects,
        },
    )
    if fx.get("expect_defect") and differ == 0:
        raise FixtureError(
            "the GPTQ v1 fixture was meant to show the z = 0 overflow but AutoGPTQ's dequantization "
            f"matches the intended weights ({manifest['defect']['zero_point_zero_cells']} z = 0 cells)"
        )


# ----------------------------------------------------------------------------------------------
# AutoAWQ


def load_awq():
    root = _package_dir("awq")
    for sub in ("awq", "awq.modules", "awq.modules.linear", "awq.models"):
        _stub_package(sub, os.path.join(os.path.dirname(root), *sub.split(".")))
    gemm = importlib.import_module("awq.modules.linear.gemm")
    packing = importlib.import_module("awq.utils.packing_utils")
    try:
        cfgmod = importlib.import_module("awq.models._config")
    except Exception as e:  # noqa: BLE001
        cfgmod = e
    return gemm, packing, cfgmod


def awq_fixture(fx: dict, out: Path, manifest: dict) -> None:
    gemm, packing, cfgmod = load_awq()
    arch: Arch = fx["arch"]
    dtype_name, group = fx["dtype"], fx["group"]
    if dtype_name != "float16":
        raise FixtureError("AutoAWQ GEMM stores float16 scales only")
    dtype = DTYPES[dtype_name]
    seed = fx["seed"]
    model = build_tree(arch, dtype, seed)
    sd = {k: v for k, v in model.state_dict().items()}
    quantized = [(name, n, k) for name, n, k, role in arch.linears() if role not in ("lm_head", "router")]
    oracle = Oracle(dtype, seed)
    modules = []
    for name, n, k in quantized:
        w = master_weight(n, k, seed, name)
        qt = quantize(w, group, "awq", dtype)
        lin = nn.Linear(k, n, bias=False, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(qt.deq)
        # AutoAWQ's quantizer hands from_linear scales and zeros transposed to [K/G, N].
        wq = gemm.WQLinear_GEMM.from_linear(
            lin, 4, group, scales=qt.s.float().t().contiguous(), zeros=qt.z.float().t().contiguous()
        )
        del sd[f"{name}.weight"]
        for t in ("qweight", "qzeros", "scales"):
            sd[f"{name}.{t}"] = getattr(wq, t).detach().cpu().contiguous()
        deq = packing.dequantize_gemm(sd[f"{name}.qweight"], sd[f"{name}.qzeros"], sd[f"{name}.scales"], 4, group)
        deq = deq.t().contiguous()
        cmp = compare(name, deq, qt.deq)
        if cmp["differ"]:
            raise FixtureError(
                f"{name}: AutoAWQ dequantize_gemm differs from (q - z) * s in {cmp['differ']} of {cmp['weights']} weights"
            )
        oracle.add(name, deq)
        modules.append(
            {"module": name, "n": n, "k": k, "tensors": {t: tensor_desc(sd[f"{name}.{t}"]) for t in ("qweight", "qzeros", "scales")}}
        )
    if isinstance(cfgmod, Exception):
        qconf = {
            "quant_method": "awq",
            "zero_point": True,
            "group_size": group,
            "bits": 4,
            "version": "gemm",
            "modules_to_not_convert": None,
        }
        qsrc = f"literal copy of AwqConfig.to_transformers_dict; importing it failed: {type(cfgmod).__name__}: {cfgmod}"
    else:
        qconf = cfgmod.AwqConfig(zero_point=True, q_group_size=group, w_bit=4, version="gemm").to_transformers_dict()
        qsrc = "awq.models._config.AwqConfig.to_transformers_dict"
    files = save_state_dict(sd, out, shards=1)
    how = write_config(arch, dtype_name, out, qconf)
    oracle.write(out, f"AutoAWQ {dist_version('autoawq')} (dequantize_gemm)")
    manifest.update(
        library=f"AutoAWQ {dist_version('autoawq')}",
        packer="awq.modules.linear.gemm.WQLinear_GEMM.from_linear",
        oracle_dequant="awq.utils.packing_utils.dequantize_gemm",
        config_writer=how + "; quantization_config from " + qsrc,
        files=files,
        modules=modules,
        y_device=oracle.device_name(),
    )


# ----------------------------------------------------------------------------------------------
# the fixture list

LLAMA = Arch()


def fixtures() -> list[dict]:
    return [
        dict(
            name="ct-sym-g128-f16",
            kind="ct",
            arch=LLAMA,
            dtype="float16",
            group=128,
            sym=True,
            ignore=["lm_head"],
            seed=1301,
            what="compressed-tensors pack-quantized, symmetric, group 128, float16",
        ),
        dict(
            name="ct-asym-g32-bf16-oddn",
            kind="ct",
            arch=dataclasses.replace(LLAMA, vocab=100),
            dtype="bfloat16",
            group=32,
            sym=False,
            ignore=[],
            seed=1302,
            what=(
                "compressed-tensors pack-quantized, asymmetric, group 32, bfloat16; lm_head is quantized "
                "with N = vocab = 100 (not a multiple of 8): zero points [ceil(100/8), K/G] = [13, 4]"
            ),
        ),
        dict(
            name="ct-asym-g128-f16-sharded",
            kind="ct",
            arch=dataclasses.replace(LLAMA, layers=2),
            dtype="float16",
            group=128,
            sym=False,
            ignore=["lm_head"],
            shards=2,
            seed=1303,
            what="compressed-tensors pack-quantized, asymmetric, group 128, float16, 2 layers in 2 shards + index",
        ),
        dict(
            name="ct-moe-sym-g32-bf16",
            kind="ct",
            arch=Arch(kind="qwen3_moe", experts=4, moe_intermediate=64, top_k=2),
            dtype="bfloat16",
            group=32,
            sym=True,
            ignore=["lm_head", "re:.*mlp.gate$"],
            seed=1304,
            what=(
                "compressed-tensors pack-quantized, symmetric, group 32, bfloat16; Qwen3-MoE style, 4 experts "
                "(model.layers.0.mlp.experts.<e>.{gate,up,down}_proj, moe_intermediate 64), router mlp.gate unquantized"
            ),
        ),
        dict(
            name="gptq-v1-asym-g32-f16-zero-overflow",
            kind="gptq",
            arch=LLAMA,
            dtype="float16",
            group=32,
            sym=False,
            positive_cells=0.05,
            expect_defect=True,
            seed=1305,
            what=(
                "AutoGPTQ 0.7.1 v1, asymmetric, group 32, float16, desc_act false; about 5% of (row, group) cells "
                "have only non-negative weights, so z = 0 and the packer's z - 1 = -1 overflow corrupts the "
                "higher nibbles of that qzeros word"
            ),
        ),
        dict(
            name="gptq-v1-sym-g128-f16",
            kind="gptq",
            arch=LLAMA,
            dtype="float16",
            group=128,
            sym=True,
            seed=1306,
            what="AutoGPTQ 0.7.1 v1, symmetric (z = 8, stored 7), group 128, float16, desc_act false; clean",
        ),
        dict(
            name="awq-gemm-g128-f16",
            kind="awq",
            arch=LLAMA,
            dtype="float16",
            group=128,
            seed=1307,
            what="AutoAWQ GEMM, zero_point true, group 128, float16",
        ),
    ]


WRITERS = {"ct": ct_fixture, "gptq": gptq_fixture, "awq": awq_fixture}


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder to write the fixture dirs and fixtures.json into")
    ap.add_argument("--only", default="", help="comma-separated fixture names (default: all)")
    args = ap.parse_args()
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    vers = versions()
    print("library versions:")
    for k, v in vers.items():
        print(f"  {k:20s} {v}")
    print(f"cuda available: {torch.cuda.is_available()}")
    only = {s for s in args.only.split(",") if s}
    results, manifests = [], []
    for fx in fixtures():
        if only and fx["name"] not in only:
            continue
        out = root / fx["name"]
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        man = {
            "name": fx["name"],
            "what": fx["what"],
            "activation_dtype": fx["dtype"],
            "group_size": fx["group"],
            "symmetric": fx.get("sym", False) if fx["kind"] != "awq" else False,
            "arch": dataclasses.asdict(fx["arch"]),
            "seed": fx["seed"],
        }
        print(f"\n=== {fx['name']}: {fx['what']}")
        try:
            torch.manual_seed(fx["seed"])
            WRITERS[fx["kind"]](fx, out, man)
            man["bytes"] = dir_size(out)
            man["status"] = "ok"
            note = f"{man['bytes'] / 1024:.0f} KiB"
            if "defect" in man:
                d = man["defect"]
                note += f"; defect: {d['differ']}/{d['weights']} weights differ ({100 * d['fraction']:.2f}%)"
            results.append((fx["name"], "ok", note))
        except Exception as e:  # noqa: BLE001 - report and go on with the other fixtures
            traceback.print_exc()
            man["status"] = "failed"
            man["error"] = f"{type(e).__name__}: {e}"
            if isinstance(e, ImportError):
                man["error"] += " (are the .whl wheels installed into /tmp/site and PYTHONPATH set? see scripts/checkpoint-fixtures.sh)"
            results.append((fx["name"], "FAILED", man["error"]))
            shutil.rmtree(out, ignore_errors=True)
        manifests.append(man)
    (root / "fixtures.json").write_text(
        json.dumps({"versions": vers, "m": M_ROWS, "fixtures": manifests}, indent=2, default=str) + "\n"
    )
    print("\nsummary")
    w = max(len(r[0]) for r in results) if results else 10
    for name, status, note in results:
        print(f"  {name:{w}s}  {status:6s}  {note}")
    total = dir_size(root)
    print(f"  total {total / 1024:.0f} KiB in {root}")
    return 0 if all(r[1] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
