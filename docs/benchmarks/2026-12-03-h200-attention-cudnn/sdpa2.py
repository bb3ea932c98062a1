# PyTorch SDPA (cuDNN and FlashAttention-2 backends) at kiln bench attention's shapes, same call.
# Attention part of ../shared/anchors/peer_bench.py, plus GQA; do_bench median (L2 flushed by triton).
import sys, torch
from triton.testing import do_bench
from torch.nn.attention import sdpa_kernel, SDPBackend
dev = torch.device("cuda"); torch.manual_seed(0)
for spec in sys.argv[1:]:
    causal = spec.startswith("c:"); dt = torch.float16 if spec.endswith(":f16") else torch.bfloat16
    B, H, G, S, D = map(int, spec.removeprefix("c:").removesuffix(":f16").split("x"))
    q = torch.randn(B, H, S, D, device=dev, dtype=dt)
    k = torch.randn(B, G, S, D, device=dev, dtype=dt); v = torch.randn_like(k)
    flop = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
    for be in [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]:
        try:
            f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=G != H)
            with sdpa_kernel(be):
                ms = do_bench(f, warmup=25, rep=200, return_mode="median")
            print(f"sdpa[{be.name}] causal={causal} {B}x{H}x{G}x{S}x{D} {dt} {ms*1e3:.1f} us {flop/ms/1e9:.1f} TFLOP/s")
        except Exception as e:
            print(f"sdpa[{be.name}] causal={causal} {B}x{H}x{G}x{S}x{D} failed: {type(e).__name__}: {str(e)[:120]}")
