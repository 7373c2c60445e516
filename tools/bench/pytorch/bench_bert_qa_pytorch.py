#!/usr/bin/env python3
"""SQuAD-style question-answering throughput of Hugging Face's
BertForQuestionAnswering as its users fine-tune it: a random-initialized
model of the given size, torch.optim.AdamW, eager PyTorch AMP
(torch.autocast with --precision fp16 or bf16, torch.amp.GradScaler for
fp16; fp32 with TF32 off) and PyTorch's scaled_dot_product_attention,
start and end positions drawn in the sequence.
The self-test's peer of `ddp_train --task question-answering`. Dropout is
--dropout (0 to match a --cuda-graphs run). One host read of the loss a
step, as ddp_train's printed loss. Prints "tokens_per_s X",
"sequences_per_s X" and "peak_bytes X" (torch.cuda.max_memory_allocated;
"peak_resident_bytes X" on the CPU); throughput excludes the first 2
steps. Without transformers it prints "transformers_missing 1" and exits
3.
"""
import argparse
import resource
import sys
import time

import torch

SIZES = {"bert-tiny": (2, 128, 2, 512), "bert-base": (12, 768, 12, 3072), "bert-large": (24, 1024, 16, 4096)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bert-base", choices=sorted(SIZES))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--precision", default="fp16", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    try:
        from transformers import BertConfig, BertForQuestionAnswering
    except ImportError:
        print("transformers_missing 1")
        sys.exit(3)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    layers, hidden, heads, intermediate = SIZES[a.model]
    sizes = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                 intermediate_size=intermediate, hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout)
    # PyTorch's fused scaled_dot_product_attention; a transformers or
    # PyTorch too old for it runs the eager attention ("attention" says which).
    try:
        model = BertForQuestionAnswering(BertConfig(**sizes, attn_implementation="sdpa"))
    except (ValueError, ImportError):
        model = BertForQuestionAnswering(BertConfig(**sizes))
    model = model.to(a.device).train()
    print(f"attention {getattr(model.config, '_attn_implementation', 'eager')}")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
    amp = a.precision in ("fp16", "bf16")
    autocast = torch.autocast(a.device, dtype=torch.float16 if a.precision == "fp16" else torch.bfloat16,
                              enabled=amp)
    scaler = torch.amp.GradScaler(a.device, enabled=a.precision == "fp16")
    n, t = a.batch_size, a.seq_len
    ids = torch.randint(1000, 29000, (n, t), device=a.device)
    types = torch.zeros(n, t, dtype=torch.long, device=a.device)
    types[:, t // 4:] = 1
    mask = torch.ones(n, t, dtype=torch.long, device=a.device)
    starts = torch.randint(t // 4, t - 8, (n,), device=a.device)
    ends = starts + torch.randint(0, 8, (n,), device=a.device)
    start = None
    for step in range(a.steps):
        if step == 2:
            if a.device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=starts,
                         end_positions=ends).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        loss.item()
    if a.device == "cuda":
        torch.cuda.synchronize()
    sequences = (a.steps - 2) * n / (time.perf_counter() - start)
    print(f"sequences_per_s {sequences}")
    print(f"tokens_per_s {sequences * t}")
    if a.device == "cuda":
        print(f"peak_bytes {torch.cuda.max_memory_allocated()}")
    else:
        print(f"peak_resident_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")


if __name__ == "__main__":
    main()
