"""The self-test's benchmarks tier (tools/gpu/bundle/selftest.py mixes it
into SelfTest): ddp_train against its PyTorch peers on the same device, one
row each, with a bar on a GPU and figures only in the rehearsal."""
import selftest_harness as h


class Benchmarks:
    def peer(self, t, name, argv):
        """A PyTorch peer's figures ("key value" lines); {} when it gave none."""
        if self.injected(t):
            argv = argv + ["--no-such-flag"]  # the peer gives no figure: the row must fail
        r = self.run.command(t, [self.py] + argv, 90, name=name)
        return h.key_values(r.out), r.timed_out

    def bench_row(self, t, label, ours, ours_key, theirs, theirs_key, bar):
        """One row: both figures must exist; on a GPU, ours at `bar` x theirs or
        better (none for a row without a bar)."""
        mine, peer = (ours or {}).get(ours_key), (theirs or {}).get(theirs_key)
        row = {"ddp_train": mine, "pytorch": peer}
        if mine and peer:
            row["ratio"] = round(mine / peer, 3)
        self.bench[label] = row
        if not mine or not peer:
            t.check(label, False, f"a figure is missing: ddp_train {mine}, PyTorch {peer}")
        elif bar is None or self.d.cpu:
            t.check(label, True, f"ddp_train {mine:.1f}, PyTorch {peer:.1f}, ratio {mine / peer:.2f} (figures only)")
        else:
            t.check(label, mine >= bar * peer, f"ddp_train {mine:.1f}, PyTorch {peer:.1f}, ratio {mine / peer:.2f} "
                                               f"(bar {bar})")

    def benchmarks(self, t):
        """ResNet-50 images/s against PyTorch eager on the same device (AMP with
        channels-last for 16-bit, as its users run it), then BERT's tokens/s.
        The rehearsal runs the smallest models at toy sizes: it proves the
        plumbing, not the speed."""
        self.bench = {}
        self.run.header["benchmarks"] = self.bench
        model, image, steps = self.d.size(gpu=("resnet50", "224", "20"), cpu=("resnet18", "32", "5"))
        # By what each row tells: fp32 first, then the 16-bit types users train in.
        configs = self.d.size(gpu=[("fp32", 64, ""), ("bf16", 128, ""), ("fp16", 128, ""), ("tf32", 64, ""),
                                   ("bf16", 128, "graphs")],
                              cpu=[("fp32", 4, "")])
        peers = {}
        for precision, batch, graphs in configs:
            label = f"{model} {precision}{' --cuda-graphs' if graphs else ''} batch {batch}"
            if t.left() < self.d.size(gpu=25, cpu=10):
                t.skip(label, "budget: the tier's limit is spent")
                continue
            name = f"bench_{precision}{'_graphs' if graphs else ''}"
            args = ["--model", model, "--precision", precision, "--batch-size", str(batch), "--image-size", image,
                    "--steps", steps] + (["--cuda-graphs"] if graphs else [])
            cut = self.train(t, name, args).timed_out
            s = h.summary(self.run.path(name + ".jsonl"))
            if precision not in peers:
                cl = ["--channels-last"] if precision in ("fp16", "bf16") else []
                peers[precision] = self.peer(t, f"pytorch_{precision}", [
                    self.tool("bench_resnet_pytorch.py"), "--device", self.d.name, "--model", model, "--precision",
                    precision, "--batch-size", str(batch), "--image-size", image, "--steps", steps, "--threads", "1",
                    "--num-classes", "1000"] + cl)
            if cut or peers[precision][1]:
                t.skip(label, "budget: a run was cut by the tier's limit")
                continue
            self.bench_row(t, label, s, "samples_per_s", peers[precision][0], "images_per_s", bar=0.9)
        self.bert_rows(t)

    def bert_rows(self, t):
        """BERT-base's tokens/s: pretraining in fp32 against plain eager PyTorch
        (figures only), then question answering in fp16, eager and under
        --cuda-graphs (dropout 0) and eager with dropout 0.1, against
        Hugging Face's BertForQuestionAnswering under PyTorch AMP with
        PyTorch's scaled_dot_product_attention at the same batch (bar 0.9). The rehearsal runs bert-tiny in fp32; its QA peer needs
        transformers, which a CPU machine may lack (the rows then skip,
        naming why)."""
        model, batch, seq, steps = self.d.size(gpu=("bert-base", "32", "128", "12"), cpu=("bert-tiny", "4", "32", "4"))
        size = ["--model", model, "--batch-size", batch, "--seq-len", seq, "--steps", steps]
        label = f"{model} fp32 batch {batch} seq {seq} tokens/s"
        if t.left() < self.d.size(gpu=30, cpu=10):
            t.skip(label, "budget: the tier's limit is spent")
            return
        cut = self.train(t, "bench_bert", size + ["--optimizer", "adamw"]).timed_out
        theirs, peer_cut = self.peer(t, "pytorch_bert", [
            self.tool("bench_bert_pytorch.py"), "--device", self.d.name, "--threads", "1"] + size)
        if cut or peer_cut:
            t.skip(label, "budget: a run was cut by the tier's limit")
            return
        self.bench_row(t, label, h.summary(self.run.path("bench_bert.jsonl")), "tokens_per_s", theirs, "tokens_per_s",
                       bar=None)
        precision = self.d.size(gpu="fp16", cpu="fp32")
        peers = {}
        # Dropout 0 eager and captured; then dropout 0.1 as SQuAD fine-tuning
        # runs, where the fused attention draws its mask twice (forward and
        # backward) and PyTorch's SDPA once.
        for graphs, dropout in self.d.size(gpu=((False, "0"), (True, "0"), (False, "0.1")), cpu=((False, "0"),)):
            label = (f"{model} question-answering {precision}{' --cuda-graphs' if graphs else ''}"
                     f"{' dropout ' + dropout if dropout != '0' else ''} batch {batch} seq {seq} tokens/s")
            if t.left() < self.d.size(gpu=30, cpu=10):
                t.skip(label, "budget: the tier's limit is spent")
                continue
            name = f"bench_bert_qa{'_graphs' if graphs else ''}{'_dropout' if dropout != '0' else ''}"
            cut = self.train(t, name, size + ["--task", "question-answering", "--precision", precision, "--dropout",
                                              dropout, "--optimizer", "adamw", "--lr", "3e-5"] +
                             (["--cuda-graphs"] if graphs else [])).timed_out
            if dropout not in peers:
                peers[dropout] = self.peer(t, f"pytorch_bert_qa{'_dropout' if dropout != '0' else ''}", [
                    self.tool("bench_bert_qa_pytorch.py"), "--device", self.d.name, "--precision", precision,
                    "--threads", "1", "--dropout", dropout] + size)
            theirs, peer_cut = peers[dropout]
            if theirs.get("transformers_missing"):
                t.skip(label, "the PyTorch peer (BertForQuestionAnswering) needs transformers, not importable here")
                continue
            if cut or peer_cut:
                t.skip(label, "budget: a run was cut by the tier's limit")
                continue
            self.bench_row(t, label, h.summary(self.run.path(name + ".jsonl")), "tokens_per_s", theirs,
                           "tokens_per_s", bar=0.9)
