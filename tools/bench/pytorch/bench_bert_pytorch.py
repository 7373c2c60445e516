#!/usr/bin/env python3
"""BERT pretraining throughput of plain eager PyTorch, on the CPU (the peer
of ddp_train in tools/bench/bench_bert.sh) or a GPU (--device cuda, fp32; the
self-test's peer; --precision bf16 runs forward under autocast). Written as a
user would write it:
nn.Embedding, nn.Linear, nn.LayerNorm, F.gelu, matmul-softmax-matmul
attention with an additive padding mask, the MLM decoder tied to the word
embeddings over every position (--masked-only: over the masked positions
only, as NVIDIA's BERT and ddp_train project), cross-entropy with
ignore_index -100, NSP,
torch.optim.AdamW. Prints "sequences_per_s X", "tokens_per_s X" and
"peak_resident_bytes X" (throughput excludes 2 warm-up steps); on a GPU
also "peak_bytes X" (torch.cuda.max_memory_allocated).
"""
import argparse
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {"bert-tiny": (2, 128, 2, 512), "bert-base": (12, 768, 12, 3072), "bert-large": (24, 1024, 16, 4096)}
VOCAB, POSITIONS, TYPES = 30522, 512, 2


class Layer(nn.Module):
    def __init__(self, hidden, heads, intermediate, dropout):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attention_output = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, additive_mask):
        n, t, h = x.shape
        d = h // self.heads

        def split(y):
            return y.view(n, t, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = self.dropout(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + additive_mask, dim=-1))
        context = (probs @ v).transpose(1, 2).reshape(n, t, h)
        a = self.attention_norm(self.dropout(self.attention_output(context)) + x)
        return self.output_norm(self.dropout(self.output(F.gelu(self.intermediate(a)))) + a)


class Bert(nn.Module):
    def __init__(self, layers, hidden, heads, intermediate, dropout, masked_only=False):
        super().__init__()
        self.masked_only = masked_only
        self.words = nn.Embedding(VOCAB, hidden, padding_idx=0)
        self.positions = nn.Embedding(POSITIONS, hidden)
        self.types = nn.Embedding(TYPES, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(Layer(hidden, heads, intermediate, dropout) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.transform = nn.Linear(hidden, hidden)
        self.transform_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(VOCAB))
        self.nsp = nn.Linear(hidden, 2)

    def forward(self, ids, types, mask, labels, nsp_labels):
        t = ids.shape[1]
        x = self.dropout(self.norm(self.words(ids) + self.positions(torch.arange(t, device=ids.device)) + self.types(types)))
        additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, additive)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        rows, targets = x.reshape(-1, x.shape[-1]), labels.view(-1)
        if self.masked_only:
            chosen = targets != -100
            rows, targets = rows[chosen], targets[chosen]
        # .float(): PyTorch 1.13's CPU layer_norm under autocast takes its
        # weight's dtype only (the other norms see f32 residual sums).
        logits = self.transform_norm(F.gelu(self.transform(rows)).float()) @ self.words.weight.T + self.mlm_bias
        mlm = F.cross_entropy(logits, targets, ignore_index=-100)
        return mlm + F.cross_entropy(self.nsp(pooled), nsp_labels)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="bert-base", choices=sorted(CONFIGS))
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--masked-only", action="store_true", help="the MLM head over the masked positions only")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: forward under torch.autocast(device, torch.bfloat16)")
    args = p.parse_args()
    device = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32, as ddp_train's --precision fp32
        torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Bert(*CONFIGS[args.model], args.dropout, args.masked_only).to(device)
    decay = [w for name, w in model.named_parameters() if w.dim() > 1]
    no_decay = [w for name, w in model.named_parameters() if w.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4)
    n, t = args.batch_size, args.seq_len
    ids = torch.randint(1000, 1400, (n, t))
    types = torch.zeros(n, t, dtype=torch.long)
    types[:, t // 2:] = 1
    mask = torch.ones(n, t, dtype=torch.long)
    labels = torch.where(torch.rand(n, t) < 0.15, ids, torch.full_like(ids, -100))
    nsp = torch.randint(0, 2, (n,))
    ids, types, mask, labels, nsp = (x.to(device) for x in (ids, types, mask, labels, nsp))

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    timed = 0.0
    for step in range(args.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(ids, types, mask, labels, nsp)
        loss.backward()
        opt.step()
        sync()
        if step >= 2:
            timed += time.perf_counter() - start
    sequences = (args.steps - 2) * n / timed
    print(f"sequences_per_s {sequences}")
    print(f"tokens_per_s {sequences * t}")
    print(f"peak_resident_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")
    if args.device == "cuda":
        print(f"peak_bytes {torch.cuda.max_memory_allocated()}")


if __name__ == "__main__":
    main()
