"""Hardware and model presets, from ../shared/reference/PARAMETERS.md (public figures).

Port bandwidth is per direction: PARAMETERS.md quotes NVLink bidirectionally, so an H100's 18 links of
"50 GB/s" are 25 GB/s = 200 Gbit/s per direction each. Prices are assumptions to sweep (marked).
"""
from __future__ import annotations

from typing import Any

HARDWARE: dict[str, dict[str, Any]] = {
    "h100": dict(name="H100 SXM", ports=18, port_bandwidth_gbps=200.0, bf16_pflops=0.989, fp8_pflops=1.979,
                 fp4_pflops=0.0, hbm_gb=80.0, hbm_tb_per_s=3.35, power_w=700.0, price_usd=27500.0),
    "h200": dict(name="H200", ports=18, port_bandwidth_gbps=200.0, bf16_pflops=0.989, fp8_pflops=1.979,
                 fp4_pflops=0.0, hbm_gb=141.0, hbm_tb_per_s=4.8, power_w=700.0, price_usd=32000.0),
    "b200": dict(name="B200 (HGX)", ports=18, port_bandwidth_gbps=400.0, bf16_pflops=2.25, fp8_pflops=4.5,
                 fp4_pflops=9.0, hbm_gb=192.0, hbm_tb_per_s=8.0, power_w=1000.0, price_usd=35000.0),
    # GB200: NVL72 rack ~$3M / 72 GPUs.
    "gb200": dict(name="GB200", ports=18, port_bandwidth_gbps=400.0, bf16_pflops=2.5, fp8_pflops=5.0,
                  fp4_pflops=10.0, hbm_gb=192.0, hbm_tb_per_s=8.0, power_w=1200.0, price_usd=41700.0),
    "gb300": dict(name="GB300", ports=18, port_bandwidth_gbps=400.0, bf16_pflops=2.5, fp8_pflops=5.0,
                  fp4_pflops=15.0, hbm_gb=288.0, hbm_tb_per_s=8.0, power_w=1400.0, price_usd=50000.0),
    # Rubin: preliminary; BF16 assumed half of FP8; 3.6 TB/s NVLink6 bidirectional = 18 x 800 Gbit/s.
    "rubin": dict(name="Rubin (prelim.)", ports=18, port_bandwidth_gbps=800.0, bf16_pflops=8.35,
                  fp8_pflops=16.7, fp4_pflops=50.0, hbm_gb=288.0, hbm_tb_per_s=22.0, power_w=2000.0,
                  price_usd=60000.0),
}

MODELS: dict[str, dict[str, Any]] = {
    # DeepSeek-V3/R1: 671B total, 37B active; MLA kv_lora 512 + rope 64 -> 70,272 B/token in BF16.
    "deepseek-v3": dict(name="DeepSeek-V3", layers=61, dense_layers=3, hidden=7168, dense_ffn=18432,
                        experts=256, shared_experts=1, top_k=8, expert_ffn=2048, attention="mla",
                        heads=128, q_lora=1536, kv_lora=512, rope_dim=64, qk_nope_dim=128, v_head_dim=128,
                        vocab=129280, weight_bytes=1.0, kv_bytes=2.0, max_context_tokens=163840),
    # Kimi K2: 1T total, 32B active; DeepSeek-V3 architecture with 384 experts, 64 heads, 1 dense layer.
    "kimi-k2": dict(name="Kimi K2", layers=61, dense_layers=1, hidden=7168, dense_ffn=18432, experts=384,
                    shared_experts=1, top_k=8, expert_ffn=2048, attention="mla", heads=64, q_lora=1536,
                    kv_lora=512, rope_dim=64, qk_nope_dim=128, v_head_dim=128, vocab=163840,
                    weight_bytes=1.0, kv_bytes=2.0, max_context_tokens=131072),
    # Qwen3-235B-A22B: GQA 64 Q / 4 KV heads of 128 -> 192,512 B/token in BF16.
    "qwen3-235b-a22b": dict(name="Qwen3-235B-A22B", layers=94, dense_layers=0, hidden=4096, dense_ffn=0,
                            experts=128, shared_experts=0, top_k=8, expert_ffn=1536, attention="gqa",
                            heads=64, kv_heads=4, head_dim=128, vocab=151936, weight_bytes=2.0,
                            kv_bytes=2.0, max_context_tokens=131072),
    # Llama-3.1-405B: dense, GQA 128 Q / 8 KV heads of 128.
    "llama-3.1-405b": dict(name="Llama-3.1-405B", layers=126, dense_layers=126, hidden=16384,
                           dense_ffn=53248, experts=0, shared_experts=0, top_k=0, expert_ffn=0,
                           attention="gqa", heads=128, kv_heads=8, head_dim=128, vocab=128256,
                           weight_bytes=2.0, kv_bytes=2.0, max_context_tokens=131072),
    # ~5T DeepSeek-style MoE of ../shared/DESIGN.md (no published config; defined here by scaling
    # DeepSeek-V3: 88 layers, hidden 12,288, 576 + 1 experts of 3,072, MLA 128 heads, kv_lora 768,
    # rope 64 = 832 KV values per token per layer, FP8 weights and KV): ~5.59T parameters.
    "moe5t": dict(name="moe5t (~5.6T DeepSeek-style MoE)", layers=88, dense_layers=3, hidden=12288,
                  dense_ffn=49152, experts=576, shared_experts=1, top_k=8, expert_ffn=3072, attention="mla",
                  heads=128, q_lora=2048, kv_lora=768, rope_dim=64, qk_nope_dim=128, v_head_dim=128,
                  vocab=129280, weight_bytes=1.0, kv_bytes=1.0, max_context_tokens=5242880),
}
