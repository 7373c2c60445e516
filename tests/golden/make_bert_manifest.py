#!/usr/bin/env python3
"""Writes tests/golden/bert_state_dict_manifest.json: the names and shapes,
in order, of Hugging Face BertForPreTraining.state_dict() for bert-tiny and
bert-base ("bert-tiny", ...) and of BertForQuestionAnswering's
("bert-tiny question-answering", ...), which models/bert_test.cc pins
ddp_train's state dicts to.

Where `transformers` imports (the GPU machine's Python; the self-test runs
this there), the manifest comes from the library itself; elsewhere from its
module structure as written out in make_bert_golden.py (embeddings, encoder
layers, pooler, cls.predictions with the decoder tied to the word
embeddings and to cls.predictions.bias, cls.seq_relationship). The file
records which.
  python3 tests/golden/make_bert_manifest.py [--out FILE]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODELS = {"bert-tiny": (2, 128, 2, 512), "bert-base": (12, 768, 12, 3072)}


def from_structure(layers, hidden, heads, intermediate, task):
    from make_bert_golden import parameter_shapes, qa_parameter_shapes
    config = dict(vocab=30522, hidden=hidden, layers=layers, heads=heads, intermediate=intermediate, positions=512,
                  types=2)
    if task == "question-answering":
        return [[name, list(shape)] for name, shape in qa_parameter_shapes(config)]
    entries = [[name, list(shape)] for name, shape in parameter_shapes(config)]
    at = [name for name, _ in entries].index("cls.predictions.transform.LayerNorm.bias") + 1
    entries[at:at] = [["cls.predictions.decoder.weight", [30522, hidden]], ["cls.predictions.decoder.bias", [30522]]]
    return entries


def from_transformers(layers, hidden, heads, intermediate, task):
    import transformers
    config = transformers.BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                                     num_attention_heads=heads, intermediate_size=intermediate)
    model = (transformers.BertForQuestionAnswering if task == "question-answering"
             else transformers.BertForPreTraining)(config)
    return [[name, list(t.shape)] for name, t in model.state_dict().items()]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "bert_state_dict_manifest.json"))
    args = p.parse_args()
    try:
        import transformers
        source, build = "transformers " + transformers.__version__, from_transformers
    except ImportError:
        source, build = "module structure (make_bert_golden.py)", from_structure
    models = {}
    for task in ("pretraining", "question-answering"):
        for name, dims in MODELS.items():
            models[name if task == "pretraining" else f"{name} {task}"] = build(*dims, task)
    manifest = {"source": source, "models": models}
    with open(args.out, "w") as f:  # one tensor a line
        f.write('{"source": %s, "models": {\n' % json.dumps(source))
        models = []
        for name, entries in manifest["models"].items():
            models.append(' %s: [\n%s\n ]' % (json.dumps(name), ",\n".join("  " + json.dumps(e) for e in entries)))
        f.write(",\n".join(models) + "\n}}\n")
    print(f"wrote {os.path.normpath(args.out)} from {source}")


if __name__ == "__main__":
    main()
