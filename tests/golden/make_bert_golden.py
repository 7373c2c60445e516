#!/usr/bin/env python3
"""Writes tests/golden/bert_golden.json: an independent PyTorch float64
implementation of BERT pretraining (MLM + NSP), written from the paper and
Hugging Face's BertForPreTraining semantics, trained 3 steps with AdamW and
3 steps with LAMB from a fixed start on one batch, dropout off; and
tests/golden/bert_qa_golden.json: the same encoder with Hugging Face's
BertForQuestionAnswering head (no pooler; qa_outputs on every token; the
mean of the start and end cross-entropies, positions past the sequence
clamped to it and ignored), 3 AdamW steps.

Both sides build the same start without shipping weights: every parameter
and the batch come from the portable generator (make_resnet_golden.py's
SplitMix64 over FNV-1a name streams), which runtime/testing/portable_random
computes bit for bit. Weights: std-0.02 uniform for dense weights and
embeddings, small uniform biases, LayerNorm weights near 1 (so that every
parameter's gradient matters). The batch has padding (attention mask 0,
token id 0), both token types, ignored MLM labels (-100) and both NSP
labels.

Run with Debian's python3 (python3-torch):
  /usr/bin/python3 tests/golden/make_bert_golden.py [pretraining|question-answering]
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_io import write_golden  # noqa: E402
from make_resnet_golden import as_f32_then_f64, bits, uniform  # noqa: E402

CONFIG = dict(vocab=30522, hidden=128, layers=2, heads=2, intermediate=512, positions=512, types=2, eps=1e-12)
BATCH, SEQ, STEPS = 4, 12, 3
LR = {"adamw": 1e-3, "lamb": 1e-2}
WEIGHT_DECAY = 0.01
BETAS = (0.9, 0.999)
EPS = {"adamw": 1e-8, "lamb": 1e-6}
LOWEST_F32 = float(np.finfo(np.float32).min)
CHECKED = ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.1.attention.self.key.weight",
           "bert.encoder.layer.0.output.LayerNorm.bias", "cls.predictions.bias", "cls.seq_relationship.weight"]


# Not qa_outputs.bias: every position shares it and a softmax's gradient
# sums to 0, so its gradient is 0 but for rounding, which AdamW's
# normalization turns into steps of either sign.
QA_CHECKED = ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.1.attention.self.key.weight",
              "bert.encoder.layer.0.output.LayerNorm.bias", "bert.embeddings.token_type_embeddings.weight",
              "qa_outputs.weight"]


def qa_parameter_shapes(c):
    """BertForQuestionAnswering: the encoder without its pooler, then qa_outputs."""
    shapes = [(name, shape) for name, shape in parameter_shapes(c)
              if name.startswith("bert.") and not name.startswith("bert.pooler.")]
    return shapes + [("qa_outputs.weight", (2, c["hidden"])), ("qa_outputs.bias", (2,))]


def parameter_shapes(c):
    h, i, v = c["hidden"], c["intermediate"], c["vocab"]
    shapes = [("bert.embeddings.word_embeddings.weight", (v, h)),
              ("bert.embeddings.position_embeddings.weight", (c["positions"], h)),
              ("bert.embeddings.token_type_embeddings.weight", (c["types"], h)),
              ("bert.embeddings.LayerNorm.weight", (h,)), ("bert.embeddings.LayerNorm.bias", (h,))]
    for layer in range(c["layers"]):
        p = f"bert.encoder.layer.{layer}."
        for name in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"]:
            shapes += [(p + name + ".weight", (h, h)), (p + name + ".bias", (h,))]
        shapes += [(p + "attention.output.LayerNorm.weight", (h,)), (p + "attention.output.LayerNorm.bias", (h,)),
                   (p + "intermediate.dense.weight", (i, h)), (p + "intermediate.dense.bias", (i,)),
                   (p + "output.dense.weight", (h, i)), (p + "output.dense.bias", (h,)),
                   (p + "output.LayerNorm.weight", (h,)), (p + "output.LayerNorm.bias", (h,))]
    shapes += [("bert.pooler.dense.weight", (h, h)), ("bert.pooler.dense.bias", (h,)),
               ("cls.predictions.bias", (v,)),
               ("cls.predictions.transform.dense.weight", (h, h)), ("cls.predictions.transform.dense.bias", (h,)),
               ("cls.predictions.transform.LayerNorm.weight", (h,)),
               ("cls.predictions.transform.LayerNorm.bias", (h,)),
               ("cls.seq_relationship.weight", (2, h)), ("cls.seq_relationship.bias", (2,))]
    return shapes


def is_bias_or_norm(name):
    return name.endswith(".bias") or "LayerNorm" in name


def start_value(name, shape):
    """The documented start: runtime side in tests/bert_golden_test.cc."""
    n = int(np.prod(shape))
    u = uniform(name, n)
    if "LayerNorm.weight" in name:
        values = 1.0 + 0.1 * u
    elif is_bias_or_norm(name):
        values = 0.05 * u
    else:
        values = 0.02 * math.sqrt(3.0) * u
    return as_f32_then_f64(values).reshape(shape).clone().requires_grad_(True)


def make_batch():
    n, t, v = BATCH, SEQ, CONFIG["vocab"]
    ids = (1 + bits("input_ids", n * t) % np.uint64(v - 1)).astype(np.int64).reshape(n, t)
    types = np.zeros((n, t), dtype=np.int64)
    types[:, t // 2:] = 1
    mask = np.ones((n, t), dtype=np.int64)
    mask[3, t - 4:] = 0  # the last sample is padded
    ids[mask == 0] = 0
    types[mask == 0] = 0
    chosen = (bits("mlm_select", n * t) % np.uint64(100)).astype(np.int64).reshape(n, t) < 25
    chosen[mask == 0] = False
    targets = (bits("mlm_target", n * t) % np.uint64(v)).astype(np.int64).reshape(n, t)
    labels = np.where(chosen, targets, -100)
    nsp = (bits("nsp", n) % np.uint64(2)).astype(np.int64)
    return {k: torch.from_numpy(a) for k, a in dict(input_ids=ids, token_type_ids=types, attention_mask=mask,
                                                       labels=labels, next_sentence_label=nsp).items()}


def make_qa_batch():
    """make_batch's tokens; answer spans drawn per sample, the third sample's
    start past the sequence (clamped to it and ignored) and the fourth's end."""
    b = make_batch()
    n, t = BATCH, SEQ
    start = (bits("qa_start", n) % np.uint64(t)).astype(np.int64)
    end = np.minimum(start + (bits("qa_length", n) % np.uint64(4)).astype(np.int64), t - 1)
    start[2] = t + 3
    end[3] = t + 1
    return dict(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"],
                start_positions=torch.from_numpy(start), end_positions=torch.from_numpy(end))


def layer_norm(x, p, prefix):
    return F.layer_norm(x, (x.shape[-1],), p[prefix + ".weight"], p[prefix + ".bias"], eps=CONFIG["eps"])


def linear(x, p, prefix):
    return x @ p[prefix + ".weight"].T + p[prefix + ".bias"]


def encode(p, b):
    """The encoder's last hidden states [N, T, H]."""
    c = CONFIG
    n, t = b["input_ids"].shape
    heads, d = c["heads"], c["hidden"] // c["heads"]
    x = (F.embedding(b["input_ids"], p["bert.embeddings.word_embeddings.weight"], padding_idx=0)
         + p["bert.embeddings.position_embeddings.weight"][torch.arange(t)]
         + p["bert.embeddings.token_type_embeddings.weight"][b["token_type_ids"]])
    x = layer_norm(x, p, "bert.embeddings.LayerNorm")
    additive = (1.0 - b["attention_mask"][:, None, None, :].double()) * LOWEST_F32
    for layer in range(c["layers"]):
        pre = f"bert.encoder.layer.{layer}."

        def heads_of(y):
            return y.view(n, t, heads, d).permute(0, 2, 1, 3)

        q = heads_of(linear(x, p, pre + "attention.self.query"))
        k = heads_of(linear(x, p, pre + "attention.self.key"))
        v = heads_of(linear(x, p, pre + "attention.self.value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + additive, dim=-1)
        context = (probs @ v).permute(0, 2, 1, 3).reshape(n, t, c["hidden"])
        a = layer_norm(linear(context, p, pre + "attention.output.dense") + x, p, pre + "attention.output.LayerNorm")
        inter = F.gelu(linear(a, p, pre + "intermediate.dense"))
        x = layer_norm(linear(inter, p, pre + "output.dense") + a, p, pre + "output.LayerNorm")
    return x


def qa_loss_of(p, b):
    """Hugging Face's BertForQuestionAnswering loss."""
    x = encode(p, b)
    t = x.shape[1]
    logits = linear(x, p, "qa_outputs")
    start_logits, end_logits = logits[..., 0], logits[..., 1]
    start = b["start_positions"].clamp(0, t)
    end = b["end_positions"].clamp(0, t)
    return (F.cross_entropy(start_logits, start, ignore_index=t) + F.cross_entropy(end_logits, end, ignore_index=t)) / 2


def loss_of(p, b):
    x = encode(p, b)
    n, t = b["input_ids"].shape
    pooled = torch.tanh(linear(x[:, 0], p, "bert.pooler.dense"))
    transformed = layer_norm(F.gelu(linear(x, p, "cls.predictions.transform.dense")), p,
                             "cls.predictions.transform.LayerNorm")
    logits = transformed @ p["bert.embeddings.word_embeddings.weight"].T + p["cls.predictions.bias"]
    mlm = F.cross_entropy(logits.reshape(n * t, -1), b["labels"].reshape(-1), ignore_index=-100)
    nsp = F.cross_entropy(linear(pooled, p, "cls.seq_relationship"), b["next_sentence_label"])
    return mlm + nsp


def lamb_step(params, state, lr, step):
    """LAMB as runtime/optim/optimizer.h documents it (You et al.)."""
    b1, b2 = BETAS
    with torch.no_grad():
        for name, w in params.items():
            m, v = state.setdefault(name, (torch.zeros_like(w), torch.zeros_like(w)))
            m.mul_(b1).add_(w.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(w.grad, w.grad, value=1 - b2)
            m_hat = m / (1 - b1 ** step)
            v_hat = v / (1 - b2 ** step)
            wd = 0.0 if is_bias_or_norm(name) else WEIGHT_DECAY
            u = m_hat / (v_hat.sqrt() + EPS["lamb"]) + wd * w
            w_norm, u_norm = w.norm().item(), u.norm().item()
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            w.sub_(lr * ratio * u)


def train(shapes, batch, loss_fn, optimizer, checked):
    """STEPS steps of `optimizer` from the documented start: the losses and
    the checked parameters' sums after them."""
    torch.manual_seed(0)
    params = {name: start_value(name, shape) for name, shape in shapes}
    decay = [w for k, w in params.items() if not is_bias_or_norm(k)]
    no_decay = [w for k, w in params.items() if is_bias_or_norm(k)]
    adamw = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=LR["adamw"], betas=BETAS, eps=EPS["adamw"]) if optimizer == "adamw" else None
    lamb_state = {}
    losses = []
    for step in range(1, STEPS + 1):
        for w in params.values():
            w.grad = None
        loss = loss_fn(params, batch)
        loss.backward()
        losses.append(loss.item())
        if adamw is not None:
            adamw.step()
        else:
            lamb_step(params, lamb_state, LR["lamb"], step)
    checks = {k: {"abs_sum": params[k].abs().sum().item(), "square_sum": (params[k] ** 2).sum().item()}
              for k in checked}
    return dict(lr=LR[optimizer], eps=EPS[optimizer], losses=losses, parameters_after=checks)


def run(optimizer):
    return dict(optimizer=optimizer, **train(parameter_shapes(CONFIG), make_batch(), loss_of, optimizer, CHECKED))


def run_qa():
    batch = make_qa_batch()
    return dict(train(qa_parameter_shapes(CONFIG), batch, qa_loss_of, "adamw", QA_CHECKED),
                start_positions=batch["start_positions"].tolist(), end_positions=batch["end_positions"].tolist())


def main():
    torch.set_num_threads(2)
    torch.set_default_dtype(torch.float64)
    which = sys.argv[1:] or ["pretraining", "question-answering"]
    common = {"config": CONFIG, "batch": BATCH, "seq": SEQ, "weight_decay": WEIGHT_DECAY, "betas": list(BETAS)}
    if "pretraining" in which:
        write_golden("bert_golden.json", dict(common, cases={name: run(name) for name in ("adamw", "lamb")}), indent=1)
    if "question-answering" in which:
        write_golden("bert_qa_golden.json", dict(common, question_answering=run_qa()), indent=1)


if __name__ == "__main__":
    main()
