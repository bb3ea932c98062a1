# PyTorch SDPA at kiln bench attention_decode's shapes (B x H x G x T x S x D), same call:
# T new queries against an S-long K/V cache. T = 1: no mask (one query sees every key);
# T > 1: the causal mask of the last T positions is an explicit boolean mask (SDPA's
# is_causal aligns to the top-left). Triton's do_bench median, L2 flushed between calls.
# Bandwidth: Q, K, V and O bytes once over the median (kiln bench's GB/s).
import sys, torch
from triton.testing import do_bench
from torch.nn.attention import sdpa_kernel, SDPBackend
dev = torch.device("cuda"); torch.manual_seed(0)
for spec in sys.argv[1:]:
    dt = torch.float16 if spec.endswith(":f16") else torch.bfloat16
    B, H, G, T, S, D = map(int, spec.removesuffix(":f16").split("x"))
    q = torch.randn(B, H, T, D, device=dev, dtype=dt)
    k = torch.randn(B, G, S, D, device=dev, dtype=dt); v = torch.randn_like(k)
    mask = None
    if T > 1:
        mask = torch.arange(S, device=dev)[None, :] <= (torch.arange(T, device=dev)[:, None] + S - T)
    nbytes = (2 * q.numel() + 2 * k.numel()) * q.element_size()
    for be in [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]:
        try:
            f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=G != H)
            with sdpa_kernel(be):
                ms = do_bench(f, warmup=25, rep=200, return_mode="median")
            print(f"sdpa[{be.name}] {spec} {dt} {ms*1e3:.1f} us {nbytes/ms/1e9:.3f} TB/s")
        except Exception as e:
            print(f"sdpa[{be.name}] {spec} failed: {type(e).__name__}: {str(e)[:100]}")
