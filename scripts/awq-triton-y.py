"""The oracle's `y` as AutoAWQ's own Triton GEMM computes it, for the awq fixture.

AutoAWQ's WQLinear_GEMM runs `awq_gemm_triton(x, qweight, scales, qzeros, split_k_iters=8)` for
small batches when its CUDA extension is missing: a tl.dot accumulating in fp16 per 32-wide K
tile and fp16 atomic adds of the eight K splits. This script runs that function, unchanged from
the library's wheel (carried in .whl/, imported from its file alone so awq/__init__ never runs),
on the fixture's packed tensors and x, and writes the fixture's oracle with that y and the
recipe it declares (`y_recipe = fp16-accumulate`, `y_block_k = 32`).

    device run, carry [".whl"]:  python3 scripts/awq-triton-y.py \
        cases/checkpoints/awq-gemm-g128-f16 $OUT/w4a16-oracle.safetensors
"""
import importlib.util
import sys
import zipfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

fixture, out = Path(sys.argv[1]), Path(sys.argv[2])
wheel = next(Path(".whl").glob("autoawq-*.whl"))
src = Path("/tmp/awq-triton-gemm.py")
src.write_bytes(zipfile.ZipFile(wheel).read("awq/modules/triton/gemm.py"))
spec = importlib.util.spec_from_file_location("awq_triton_gemm", src)
gemm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gemm)

model = load_file(fixture / "model.safetensors")
oracle_path = fixture / "w4a16-oracle.safetensors"
oracle = load_file(oracle_path)
with safe_open(oracle_path, "pt") as f:
    meta = dict(f.metadata())
modules = sorted(k[: -len(".y")] for k in oracle if k.endswith(".y"))
for module in modules:
    x = oracle[f"{module}.x"].cuda()
    qweight, qzeros, scales = (model[f"{module}.{t}"].cuda() for t in ("qweight", "qzeros", "scales"))
    y = gemm.awq_gemm_triton(x, qweight, scales, qzeros, split_k_iters=8)
    torch.cuda.synchronize()
    before = oracle[f"{module}.y"]
    differ = (y.cpu() != before).sum().item()
    print(f"{module}: {tuple(y.shape)} {y.dtype}; {differ} of {y.numel()} elements differ from the fp32-accumulated y")
    oracle[f"{module}.y"] = y.cpu().contiguous()
meta.update(
    {
        "y": f"awq_gemm_triton(x, qweight, scales, qzeros, split_k_iters=8) of {wheel.name} (Triton {__import__('triton').__version__})",
        "y_device": f"cuda ({torch.cuda.get_device_name()})",
        "y_recipe": "fp16-accumulate",
        "y_block_k": "32",
    }
)
meta.pop("y_reduced_precision_reduction", None)
out.parent.mkdir(parents=True, exist_ok=True)
save_file(oracle, out, metadata=meta)
print("wrote", out)
