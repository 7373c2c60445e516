#!/usr/bin/env python3
"""Hugging Face interop of ddp_train's BERT, where `transformers` imports
(the GPU machine's Python; selftest.sh runs this):

1. ddp_train -> transformers: a bert-tiny file saved by ddp_train loads
   into BertForPreTraining with strict=True and gives ddp_train's MLM + NSP
   loss on the same batch within 1e-4.
2. transformers -> ddp_train: a file saved from a BertForPreTraining loads
   into ddp_train (--load-weights) and gives transformers' loss within 1e-4.
3. Question answering: a bert-tiny file saved by ddp_train --task
   question-answering loads into BertForQuestionAnswering with strict=True
   and gives ddp_train's loss within 1e-4 (one end position past the
   sequence: clamped and ignored on both sides).
4. The state dict manifests (names and shapes) of BertForPreTraining and
   BertForQuestionAnswering are regenerated from transformers and must
   equal the checked-in ones.

ddp_train runs on the CPU with dropout off, one step at a learning rate of
1e-30 (the weights it saves are the ones it started from). Exit 0 when all
hold, 1 otherwise, 3 when transformers does not import.
  check_bert_interop.py --ddp-train BIN --out DIR [--manifest FILE]
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ddp-train", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--manifest", default="")
    args = p.parse_args()
    try:
        import torch
        import transformers
        from safetensors.torch import load_file, save_file
    except ImportError as e:
        print(f"check_bert_interop: skipped, {e}")
        return 3
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    n, t, vocab = 4, 32, 30522
    ids = torch.randint(1000, 1400, (n, t))
    ids[:, 0] = 101
    mask = torch.ones(n, t, dtype=torch.long)
    mask[3, t - 6:] = 0
    ids[mask == 0] = 0
    types = torch.zeros(n, t, dtype=torch.long)
    types[:, t // 2:] = 1
    types[mask == 0] = 0
    labels = torch.where((torch.rand(n, t) < 0.2) & (mask == 1), ids, torch.full_like(ids, -100))
    labels[:, 1] = ids[:, 1]  # at least one per sample
    nsp = torch.tensor([0, 1, 1, 0])
    batch = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    data = os.path.join(args.out, "interop_batch.safetensors")
    save_file({k: v.contiguous() for k, v in batch.items()}, data)
    config = transformers.BertConfig(vocab_size=vocab, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def hf_loss(model):
        model.eval()
        with torch.no_grad():
            return model(**batch).loss.item()

    def ddp_train(name, *extra, data=data):
        metrics = os.path.join(args.out, name + ".jsonl")
        cmd = [args.ddp_train, "--model", "bert-tiny", "--device", "cpu", "--data", "tensors:" + data,
               "--batch-size", str(n), "--steps", "1", "--lr", "1e-30", "--optimizer", "adamw", "--dropout", "0",
               "--noshuffle", "--metrics-file", metrics, *extra]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {run.stdout[-2000:]} {run.stderr[-2000:]}")
        return [json.loads(l)["loss"] for l in open(metrics) if '"loss"' in l][0]

    ok = True

    def check(what, ours, theirs):
        nonlocal ok
        close = abs(ours - theirs) <= 1e-4 * abs(theirs)
        ok = ok and close
        print(f"{what}: ddp_train {ours:.8f}, transformers {theirs:.8f}: {'passed' if close else 'FAILED'}")

    # 1. ddp_train's file into transformers.
    saved = os.path.join(args.out, "from_ddp_train.safetensors")
    ours = ddp_train("save", "--save-weights", saved)
    model = transformers.BertForPreTraining(config)
    missing, unexpected = model.load_state_dict(load_file(saved), strict=True)
    check("ddp_train -> transformers (strict)", ours, hf_loss(model))

    # 2. transformers' file into ddp_train (tied duplicates left out, as
    # transformers' own safetensors files do).
    torch.manual_seed(1)
    model = transformers.BertForPreTraining(config)
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items() if not k.startswith("cls.predictions.decoder.")}
    theirs_file = os.path.join(args.out, "from_transformers.safetensors")
    save_file(state, theirs_file)
    check("transformers -> ddp_train", ddp_train("load", "--load-weights", theirs_file), hf_loss(model))

    # 3. Question answering: ddp_train's file into transformers.
    qa_batch = dict(input_ids=ids, token_type_ids=types, attention_mask=mask,
                    start_positions=torch.tensor([1, 5, 9, 20]), end_positions=torch.tensor([3, 5, 12, t + 2]))
    qa_data = os.path.join(args.out, "interop_qa_batch.safetensors")
    save_file({k: v.contiguous() for k, v in qa_batch.items()}, qa_data)
    qa_saved = os.path.join(args.out, "from_ddp_train_qa.safetensors")
    ours = ddp_train("save_qa", "--task", "question-answering", "--save-weights", qa_saved, data=qa_data)
    qa_model = transformers.BertForQuestionAnswering(config)
    qa_model.load_state_dict(load_file(qa_saved), strict=True)
    qa_model.eval()
    with torch.no_grad():
        theirs = qa_model(**qa_batch).loss.item()
    check("question answering: ddp_train -> transformers (strict)", ours, theirs)

    # 4. The manifests.
    if args.manifest:
        for key, cls in (("bert-tiny", transformers.BertForPreTraining),
                         ("bert-tiny question-answering", transformers.BertForQuestionAnswering)):
            expected = json.load(open(args.manifest))["models"][key]
            actual = [[k, list(v.shape)] for k, v in cls(config).state_dict().items()]
            same = expected == actual
            ok = ok and same
            print(f"manifest ({key}) against transformers {transformers.__version__}: {'passed' if same else 'FAILED'}")
    print("all checks passed" if ok else "some checks failed")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line, not a trace
        print(f"check_bert_interop: FAILED: {type(e).__name__}: {e}")
        sys.exit(1)
