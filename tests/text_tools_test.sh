#!/usr/bin/env bash
# The data tools as a careless user meets them. No tool writes over one of
# its inputs (by the same name, a ./ path or a symbolic link; ddp_train
# over one shard of a tokens: list): one line, exit 1, the input unchanged.
# Sizes from flags past memory, a directory where a file is meant, a
# classification set of fewer than 2 classes, a vocabulary that is a
# directory: one line naming the flag or file, never std:: text; text from a
# pipe tokenizes. A vocabulary with CRLF line ends reads as its LF twin. A 10 MB
# single-word line tokenizes, as Hugging Face's WordPiece does, to one
# [UNK] (linear time: a quadratic tokenizer never finishes within the
# timeout). SQuAD: an empty answer, one of white space and an answer_start
# past int64 are refused naming the question; features scored against
# another SQuAD file (squad_eval, ddp_train --squad-eval-file), offsets
# shifted past their context, a prediction index past int64 and question
# answering tensors whose answer starts after its end are one line each.
set -u
bin=launch/ddp_train
source tests/lib.sh

# expect_error NAME PATTERN CMD...: CMD exits 1 with one line on stderr
# matching PATTERN (an extended regular expression) and no std:: text.
expect_error() {
  local name=$1 pattern=$2; shift 2
  timeout 60 "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  [ "$rc" -eq 1 ] || { cat "$tmp/$name.err"; fail "$name: exit $rc (want 1)"; return; }
  [ "$(grep -c . "$tmp/$name.err")" -eq 1 ] || { cat "$tmp/$name.err"; fail "$name: not one line on stderr"; }
  grep -Eq -- "$pattern" "$tmp/$name.err" || { cat "$tmp/$name.err"; fail "$name: the line does not match '$pattern'"; }
  ! grep -q "std::\|terminate called\|Aborted\|Check failed" "$tmp/$name.err" || fail "$name: a crash's text"
}
# unchanged NAME FILE SUM: FILE still has checksum SUM.
unchanged() { [ "$(cksum < "$2")" = "$3" ] || fail "$1: $2 was changed"; }

/usr/bin/python3 - "$tmp" <<'PY' || exit 1
import json, sys
tmp = sys.argv[1]
words = "the tower was built in 1889 by gustave eiffel for paris fair where when who".split()
with open(f"{tmp}/vocab.txt", "w") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "?", "."] + words) + "\n")
with open(f"{tmp}/vocab_crlf.txt", "w", newline="") as f:
    f.write("\r\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "?", "."] + words) + "\r\n")
context = "The tower was built in 1889 by Gustave Eiffel for the Paris fair."
def squad(answers, context=context):
    qas = [{"id": f"q{i}", "question": "When was the tower built?", "answers": [a]} for i, a in enumerate(answers)]
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
good = [{"text": "1889", "answer_start": 23}, {"text": "Gustave Eiffel", "answer_start": 31}]
json.dump(squad(good), open(f"{tmp}/dev.json", "w"))
json.dump(squad(good, context.replace("Paris", "Lyon")), open(f"{tmp}/other.json", "w"))
json.dump(squad(good + [{"text": "", "answer_start": 3}]), open(f"{tmp}/empty.json", "w"))
json.dump(squad(good + [{"text": " \u00a0 ", "answer_start": 3}]), open(f"{tmp}/blank.json", "w"))
with open(f"{tmp}/huge.json", "w") as f:
    f.write(json.dumps(squad(good)).replace('"answer_start": 31', '"answer_start": 18446744073709551615'))
with open(f"{tmp}/word.txt", "w") as f:
    f.write("a" * 10_000_000 + "\n")
PY

# --- no tool writes over one of its inputs ---------------------------------
ln -sf "$tmp/dev.json" "$tmp/dev_link.json"
squad_sum=$(cksum < "$tmp/dev.json") vocab_sum=$(cksum < "$tmp/vocab.txt")
overwrite='is the (--squad|--vocab|text) file .*: writing it would destroy the input; choose another path$'
for out in "$tmp/dev.json" "$tmp/./dev.json" "$tmp/dev_link.json" "$tmp/vocab.txt"; do
  expect_error "squad_over_$(basename "$out")" "^make_squad_tensors: --out $out $overwrite" \
    tools/make_squad_tensors --vocab "$tmp/vocab.txt" --squad "$tmp/dev.json" --seq-len 32 --doc-stride 8 --out "$out"
done
for out in "$tmp/vocab.txt" "$tmp/word.txt"; do
  expect_error "tokenize_over_$(basename "$out")" "^tokenize_text: --out $out $overwrite" \
    tools/tokenize_text --vocab "$tmp/vocab.txt" --out "$out" "$tmp/word.txt"
done
unchanged "make_squad_tensors" "$tmp/dev.json" "$squad_sum"
unchanged "tokenize_text" "$tmp/vocab.txt" "$vocab_sum"
for tool in make_token_dataset make_image_dataset; do
  expect_error "${tool}_dir" "^$tool: --out \. is a directory; give a file's path$" tools/$tool --out . --samples 4
done
expect_error image_folder_on_file "^make_image_folder: --out $tmp/vocab.txt exists and is not a directory$" \
  tools/make_image_folder --out "$tmp/vocab.txt" --classes 2 --per-class 1
unchanged "make_image_folder" "$tmp/vocab.txt" "$vocab_sum"
# A list of token shards: each is an input.
printf 'when was the tower built\n\nthe tower was built in 1889\n' > "$tmp/corpus.txt"
for part in a b; do
  tools/tokenize_text --vocab "$tmp/vocab.txt" --out "$tmp/$part.tokens" "$tmp/corpus.txt" > /dev/null || fail "shard $part"
done
shard_sum=$(cksum < "$tmp/b.tokens")
expect_error train_over_shard "^ddp_train: error: --save-weights $tmp/b.tokens is the --data file $tmp/b.tokens: " \
  "$bin" --model bert-tiny --seq-len 16 --batch-size 2 --steps 1 --threads 1 --data "tokens:$tmp/a.tokens,$tmp/b.tokens" \
  --save-weights "$tmp/b.tokens"
unchanged "ddp_train" "$tmp/b.tokens" "$shard_sum"

# --- sizes, directories, classes -------------------------------------------
for samples in 1000000000000 9000000000000000000; do
  expect_error "token_samples_$samples" "^make_token_dataset: --samples $samples of --seq-len 128 need .*, more than the .* of memory this process may have$" \
    tools/make_token_dataset --out "$tmp/t.safetensors" --samples "$samples"
  expect_error "image_samples_$samples" "^make_image_dataset: --samples $samples of --image-size 32 need .*, more than the .* of memory this process may have$" \
    tools/make_image_dataset --out "$tmp/i.safetensors" --samples "$samples"
done
expect_error image_first_sample "^make_image_dataset: --first-sample 9223372036854775807 must be non-negative, with --first-sample \+ --samples within 2\^63$" \
  tools/make_image_dataset --out "$tmp/i.safetensors" --samples 2 --first-sample 9223372036854775807
expect_error image_size "^make_image_dataset: --image-size must be in \[1, 4096\], got 0$" \
  tools/make_image_dataset --out "$tmp/i.safetensors" --samples 2 --image-size 0
for classes in -1 1; do
  expect_error "classes_$classes" "^make_token_dataset: --classes must be 0 \(pretraining data\) or at least 2 \(a classification set\), got $classes$" \
    tools/make_token_dataset --out "$tmp/t.safetensors" --samples 4 --classes "$classes"
done
expect_error tokenize_dir "^tokenize_text: $tmp is a directory; give text files, one sentence per line$" \
  tools/tokenize_text --vocab "$tmp/vocab.txt" --out "$tmp/x.tokens" "$tmp"
[ ! -e "$tmp/x.tokens" ] || fail "tokenize_text wrote a shard of a directory"
piped=$(tools/tokenize_text --vocab "$tmp/vocab.txt" --print <(echo "the tower")) && [ "$piped" = "7 8" ] ||
  fail "tokenize_text from a pipe: '$piped'"
expect_error vocab_dir "^tokenize_text: --vocab $tmp is a directory, not a file$" \
  tools/tokenize_text --vocab "$tmp" --print "$tmp/vocab.txt"

# --- the tokenizer ------------------------------------------------------------
echo "When was the tower built? Gustave Eiffel built it." > "$tmp/sentence.txt"
lf=$(tools/tokenize_text --vocab "$tmp/vocab.txt" --print "$tmp/sentence.txt") || fail "tokenize with an LF vocabulary"
crlf=$(tools/tokenize_text --vocab "$tmp/vocab_crlf.txt" --print "$tmp/sentence.txt") || fail "tokenize with a CRLF vocabulary"
[ "$lf" = "20 9 7 8 10 5 14 15 10 1 6" ] && [ "$crlf" = "$lf" ] || fail "CRLF vocabulary: '$crlf', LF: '$lf'"
start=$(date +%s.%N)
word=$(timeout 30 tools/tokenize_text --vocab "$tmp/vocab.txt" --print "$tmp/word.txt")
rc=$?
seconds=$(/usr/bin/python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)")
[ "$rc" -eq 0 ] && [ "$word" = "1" ] || fail "a 10 MB word: exit $rc, ids '${word:0:40}' (want one [UNK], 1)"
echo "a 10 MB single-word line: [UNK] in $seconds s"

# --- SQuAD ------------------------------------------------------------------------
squad_flags=(--vocab "$tmp/vocab.txt" --seq-len 32 --doc-stride 8 --max-query-len 8)
expect_error empty_answer "^make_squad_tensors: --squad $tmp/empty.json: question 'q2': answer '' is empty: an answer is some of the context's words$" \
  tools/make_squad_tensors "${squad_flags[@]}" --squad "$tmp/empty.json" --out "$tmp/x.safetensors"
expect_error blank_answer "^make_squad_tensors: --squad $tmp/blank.json: question 'q2': answer ' .* ' holds no word \(only white space, control, format or combining characters\): " \
  tools/make_squad_tensors "${squad_flags[@]}" --squad "$tmp/blank.json" --out "$tmp/x.safetensors"
expect_error huge_start "^make_squad_tensors: --squad $tmp/huge.json: question 'q1': answer 'Gustave Eiffel' at character 18446744073709551615 is not in its context of 65 characters$" \
  tools/make_squad_tensors "${squad_flags[@]}" --squad "$tmp/huge.json" --out "$tmp/x.safetensors"
tools/make_squad_tensors "${squad_flags[@]}" --squad "$tmp/dev.json" --eval --out "$tmp/dev.safetensors" > /dev/null ||
  fail "make_squad_tensors --eval"
/usr/bin/python3 - "$tmp" <<'PY' || fail "the edited features"
import json, struct, sys
tmp = sys.argv[1]
raw = open(f"{tmp}/dev.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
def edit(name, fn, out):
    new = bytearray(data)
    begin, end = header[name]["data_offsets"]
    values = [fn(v) for v in struct.unpack(f"<{(end - begin) // 8}q", new[begin:end])]
    new[begin:end] = struct.pack(f"<{len(values)}q", *values)
    open(f"{tmp}/{out}", "wb").write(raw[:8 + n] + bytes(new))
edit("offset_mapping", lambda v: v + 1000000 if v >= 0 else v, "shifted.safetensors")
edit("start_positions", lambda v: 30, "swapped.safetensors")
for name, long_index in (("predictions", False), ("long_index", True)):
    with open(f"{tmp}/{name}.tsv", "w") as f:
        f.write("feature\tstart\tend\tscore\n")
        for i in range(header["example_index"]["shape"][0]):
            f.write(f"{i}\t{'99999999999999999999' if long_index and i == 1 else -1}\t-1\t-inf\n")
PY
expect_error eval_other_file "^squad_eval: --features $tmp/dev.safetensors was made from another SQuAD file than --squad $tmp/other.json " \
  tools/squad_eval --squad "$tmp/other.json" --features "$tmp/dev.safetensors" --predictions "$tmp/predictions.tsv"
expect_error eval_shifted "^squad_eval: --features $tmp/shifted.safetensors: offset_mapping\[0, [0-9]+\] is \[100[0-9]+, 100[0-9]+\), outside the 65 characters of question 'q0''s context" \
  tools/squad_eval --squad "$tmp/dev.json" --features "$tmp/shifted.safetensors" --predictions "$tmp/predictions.tsv"
expect_error eval_long_index "^squad_eval: --predictions $tmp/long_index.tsv: line 3: the start '99999999999999999999' is not a token index$" \
  tools/squad_eval --squad "$tmp/dev.json" --features "$tmp/dev.safetensors" --predictions "$tmp/long_index.tsv"
tools/squad_eval --squad "$tmp/dev.json" --features "$tmp/dev.safetensors" --predictions "$tmp/predictions.tsv" \
  > "$tmp/scored.txt" 2>&1 || { cat "$tmp/scored.txt"; fail "squad_eval on its own file"; }
qa=(--model bert-tiny --task question-answering --seq-len 32 --batch-size 2 --steps 1 --threads 1)
expect_error train_other_file "^ddp_train: error: --eval-data $tmp/dev.safetensors was made from another SQuAD file than --squad-eval-file $tmp/other.json " \
  "$bin" "${qa[@]}" --data "tensors:$tmp/dev.safetensors" --eval-data "tensors:$tmp/dev.safetensors" --squad-eval-file "$tmp/other.json"
expect_error train_swapped "^ddp_train: error: .*swapped.safetensors: feature 0's answer starts at token 30, after its end [0-9]+ \(start_positions and end_positions swapped\?\)$" \
  "$bin" "${qa[@]}" --data "tensors:$tmp/swapped.safetensors"

finish "text tools test"
