#!/usr/bin/env python3
"""PyTorch baselines for Ferry's embedding model, on the shapes ferry-model-bench measures.

Modes (--modes, comma-separated), each timed on the same batches:

  eager     the model from the same folder through transformers (AutoModel,
            attn_implementation="sdpa", float16 on cuda), mean pooling over
            the attention mask and L2 normalisation
  compile   the same module under torch.compile(mode="reduce-overhead"):
            Inductor's kernels replayed as CUDA graphs, what anyone serving
            MiniLM with PyTorch would deploy. The ratio that matters is
            Ferry over this one.
  compile-gpu  the compiled module on token ids already on the GPU, its
            vectors left there: the model's own time, no copy either way.
            Stricter than the host-to-host comparison Ferry's numbers make,
            and an upper bound for what torch.compile gives.
  compile-stream  as compile-gpu, but calls are enqueued back to back and
            synchronised once at the end of the timed passes: the CPU runs
            ahead of the GPU, so Python's cost per call hides behind the
            kernels. Its p50/p99 are not measured (a call only enqueues).
            The strongest figure torch.compile gives. Ferry's embed() is
            synchronous per call, so this mode is paired with Ferry's
            calls from --ferry-callers threads at once (ferry-model-bench
            --callers: one lane each), where one call's copies and
            synchronise overlap another's kernels; the other modes are
            paired with Ferry's calls one at a time.
  encode    sentence-transformers' SentenceTransformer.encode of B strings,
            tokenization, forward, pooling and the copy to the host included
  forward   sentence-transformers' model(features) on features already
            tokenized and on the GPU

eager and compile take token ids from host memory and return the vectors to
host memory, synchronised, as ferry-model-bench's embed() does: the copies in
and out are inside the time. Their ids are random ordinary-vocabulary ids
between [CLS] and [SEP], as Ferry's are.

Runs (--runs):

  uniform   each shape B x L of --shapes (by default issue 36's table:
            batches 1, 8, 32, 128 x 32 and 128 tokens, and 32 x 256), or of
            --batches x --lengths where either is given: B sequences of
            exactly L tokens ("hello" is one token for encode)
  mixed     --mixed-batches batches of --mixed-batch-size sequences whose
            lengths are drawn (seeded) from a log-normal with a median of
            --mixed-median tokens, clipped to 3..--mixed-max, or from the
            lengths of the reference sentences (--mixed-source reference).
            PyTorch pads each batch to its longest sequence (rounded up to
            --pad-multiple), with the attention mask; Ferry runs them
            unpadded. The lengths go to a file, one batch a line
            (--mixed-file), which ferry-model-bench --lengths-file reads, so
            both sides run exactly the same batches, in the same order, in
            whole passes. tokens/s counts real tokens, never padding.

Each mode is warmed up before it is timed (every shape, or every batch of the
mixed run, three times over: torch.compile compiles and records a CUDA graph
per shape), then called back to back for --seconds. The tables and JSON hold
sentences/s, tokens/s and the median and 99th-percentile ms per batch. With
--ferry BIN it also runs ferry-model-bench on the same shapes and batches and
prints Ferry beside eager and compiled PyTorch, with Ferry/compile (ratios
measured in one run, on one machine). Ferry's column "Ferry xN" is its N
callers at once, the figure compile-stream's ratio uses.

    st_baseline.py --model DIR [--shapes 1x32,...,32x256 | --batches 1,8,32,128 --lengths 32,128]
                   [--runs uniform,mixed] [--modes eager,compile,encode]
                   [--seconds 2] [--json FILE] [--ferry build/bench/infer/ferry-model-bench]
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

WARMUP_PASSES = 3
LABELS = {"eager": "torch eager", "compile": "torch.compile", "compile-gpu": "compile on GPU",
          "compile-stream": "compile stream", "encode": "st encode",
          "forward": "st forward"}
MODES = ("eager", "compile", "compile-gpu", "compile-stream", "encode", "forward")
TORCH_MODES = ("eager", "compile", "compile-gpu", "compile-stream")
MIN_LENGTH = 3  # [CLS], one word, [SEP]
DEFAULT_SHAPES = "1x32,8x32,32x32,128x32,1x128,8x128,32x128,128x128,32x256"
HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE_DIR = os.path.join(HERE, "..", "..", "tests", "infer", "fixtures", "reference")


def int_list(s):
    return [int(v) for v in s.split(",") if v]


def percentile(ms, q):
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(q * (len(ms) - 1) + 0.5))]


def time_passes(calls, sentences, tokens, seconds, warmup_passes=WARMUP_PASSES, finish=None):
    """Calls every function of calls in order, warmup_passes times, then in
    whole passes until seconds have passed. sentences and tokens are one pass's
    (real tokens, not padding). Returns the rates and the ms per call. finish,
    when given, is what completes the calls' work (they only enqueue it): it
    runs before the clock starts and before it stops, and the ms per call are
    then not reported."""
    for _ in range(warmup_passes):
        for fn in calls:
            fn()
    if finish:
        finish()
    ms = []
    passes = 0
    start = time.perf_counter()
    deadline = start + seconds
    now = start
    while now < deadline:
        for fn in calls:
            t0 = time.perf_counter()
            fn()
            now = time.perf_counter()
            ms.append((now - t0) * 1e3)
        passes += 1
    if finish:
        finish()
        now = time.perf_counter()
    elapsed = now - start
    return {"calls": len(ms), "passes": passes, "sentences_per_s": sentences * passes / elapsed,
            "tokens_per_s": tokens * passes / elapsed, "p50_ms": None if finish else percentile(ms, 0.50),
            "p99_ms": None if finish else percentile(ms, 0.99)}


def mixed_lengths(args):
    """--mixed-batches lists of --mixed-batch-size lengths, the same for a given seed."""
    rng = random.Random(args.seed)
    if args.mixed_source == "reference":
        with open(os.path.join(args.reference, "sentences.json")) as f:
            pool = [len(item["ids"]) for item in json.load(f)["items"]]

        def draw():
            return rng.choice(pool)
    else:
        mu = math.log(args.mixed_median)

        def draw():
            return min(args.mixed_max, max(MIN_LENGTH, round(rng.lognormvariate(mu, args.mixed_sigma))))
    return [[draw() for _ in range(args.mixed_batch_size)] for _ in range(args.mixed_batches)]


def write_lengths_file(path, batches, header):
    with open(path, "w") as f:
        f.write(f"# {header}\n")
        for b in batches:
            f.write(",".join(str(n) for n in b) + "\n")


def random_ids(generator, lengths, vocab, pad_to, torch):
    """ids and attention mask, each len(lengths) x pad_to on the host: [CLS],
    random ids from 1000 up (past [PAD], [UNK], [CLS], [SEP], [MASK] and the
    unused slots), [SEP], then padding ([PAD] is 0, as the mask's zeros)."""
    ids = torch.zeros((len(lengths), pad_to), dtype=torch.long)
    mask = torch.zeros((len(lengths), pad_to), dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(1000, vocab, (n,), generator=generator)
        ids[i, 0] = 101
        ids[i, n - 1] = 102
        mask[i, :n] = 1
    return ids, mask


class PyTorchModels:
    """The transformers model with mean pooling and L2 normalisation, eager
    and under torch.compile(mode="reduce-overhead"), sharing one set of weights."""

    def __init__(self, args, torch):
        import transformers
        from transformers import AutoModel
        self.torch = torch
        self.device = args.device
        self.dtype = torch.float16 if args.device == "cuda" else torch.float32
        # transformers 5 names it dtype; 4.x torch_dtype (it would take dtype as a config field).
        key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
        auto = AutoModel.from_pretrained(args.model, attn_implementation="sdpa", **{key: self.dtype})
        auto = auto.to(device=args.device, dtype=self.dtype).eval()
        self.vocab = auto.config.vocab_size

        class Embedder(torch.nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask):
                hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                m = attention_mask.unsqueeze(-1).to(torch.float32)
                pooled = (hidden.float() * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, p=2, dim=1)

        self.eager = Embedder(auto).eval()
        if args.compile_dynamic == "static":
            # One static graph per shape: as many recompiles as shapes, each specialised.
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(torch._dynamo.config, name):
                    setattr(torch._dynamo.config, name, 4096)
            dynamic = False
        else:
            dynamic = None  # torch's default: static first, then dynamic dims where shapes change
        self.compiled = torch.compile(self.eager, mode="reduce-overhead", dynamic=dynamic)
        self.on_cuda = args.device == "cuda"

    def compile_dynamic(self):
        """torch's default compile (dynamic where shapes change), for the mixed run: there a graph
        compiled per shape would mean one compile per distinct padded length."""
        self.compiled = self.torch.compile(self.eager, mode="reduce-overhead", dynamic=None)

    def call(self, fn, ids, mask):
        """One host-to-host call: ids to the device, the model, the vectors back, synchronised."""
        torch = self.torch
        with torch.inference_mode():
            if fn is self.compiled:
                # A new step for CUDA-graph trees: the previous call's outputs may be overwritten.
                torch.compiler.cudagraph_mark_step_begin()
            out = fn(ids.to(self.device, non_blocking=True), mask.to(self.device, non_blocking=True))
            host = out.to("cpu")
        if self.on_cuda:
            torch.cuda.synchronize()
        return host

    def call_resident(self, ids_d, mask_d, sync=True):
        """The compiled model on ids already on the device, its vectors left there, synchronised
        unless sync is False (compile-stream: the next call's replay may overwrite them)."""
        torch = self.torch
        with torch.inference_mode():
            torch.compiler.cudagraph_mark_step_begin()
            out = self.compiled(ids_d, mask_d)
        if self.on_cuda and sync:
            torch.cuda.synchronize()
        return out

    def finish(self, mode):
        """What completes a mode's calls when they only enqueue (compile-stream), else None."""
        return self.torch.cuda.synchronize if mode == "compile-stream" and self.on_cuda else None

    def calls(self, mode, inputs):
        """One function per (ids, mask) of inputs, ids pinned in host memory for the copy
        (compile-gpu: ids already on the device, no copy either way)."""
        if mode in ("compile-gpu", "compile-stream"):
            resident = [(i.to(self.device), m.to(self.device)) for i, m in inputs]
            sync = mode == "compile-gpu"
            return [lambda i=i, m=m: self.call_resident(i, m, sync) for i, m in resident]
        fn = self.eager if mode == "eager" else self.compiled
        if self.on_cuda:
            inputs = [(i.pin_memory(), m.pin_memory()) for i, m in inputs]
        return [lambda i=i, m=m: self.call(fn, i, m) for i, m in inputs]

    def least_cosine(self, inputs):
        """The least cosine between eager's and compile's vectors over inputs (after warm-up)."""
        torch = self.torch
        least = 1.0
        for i, m in inputs:
            a = self.call(self.eager, i, m)
            b = self.call(self.compiled, i, m).clone()
            least = min(least, float(torch.nn.functional.cosine_similarity(a, b, dim=1).min()))
        return least


class SentenceTransformers:
    """sentence-transformers' encode and forward on texts of given token counts."""

    def __init__(self, args, torch, longest):
        import sentence_transformers
        from sentence_transformers import SentenceTransformer
        self.torch = torch
        self.device = args.device
        self.version = sentence_transformers.__version__
        model = SentenceTransformer(args.model, device=args.device)
        self.model = model.half() if args.device == "cuda" else model
        self.model.max_seq_length = max(self.model.max_seq_length, longest)

    def texts(self, lengths):
        out = []
        for n in lengths:
            text = " ".join(["hello"] * (n - 2))
            got = len(self.model.tokenizer(text)["input_ids"])
            if got != n:
                sys.exit(f"st_baseline: {n - 2} x 'hello' tokenizes to {got} ids, not {n}")
            out.append(text)
        return out

    def calls(self, mode, batches):
        fns = []
        for lengths in batches:
            texts = self.texts(lengths)
            if mode == "encode":
                fns.append(lambda t=texts: self.model.encode(t, batch_size=len(t), convert_to_numpy=True))
                continue
            features = self.model.tokenize(texts)
            # Tensors only: sentence-transformers 6 also returns the text column's name.
            features = {k: v.to(self.device) for k, v in features.items() if hasattr(v, "to")}

            def forward(f=features):
                with self.torch.no_grad():
                    self.model(f)
                if self.device == "cuda":
                    self.torch.cuda.synchronize()
            fns.append(forward)
        return fns


def run_ferry(binary, args, extra):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    precision = "f16" if args.device == "cuda" else "f32"
    cmd = [binary, "--model", args.model, "--device", args.device, "--precision", precision,
           "--seconds", str(args.seconds), "--json", path] + extra
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(path) as f:
        result = json.load(f)
    os.unlink(path)
    return result


def print_row(label, row):
    def ms(v):
        return f"{v:>9.3f}" if v is not None else f"{'-':>9}"
    print(f"{label} {row['sentences_per_s']:>12.0f} {row['tokens_per_s']:>12.0f} {ms(row['p50_ms'])} "
          f"{ms(row['p99_ms'])} {row['calls']:>7}", flush=True)


def measure(modes, pt, st, batches, pad_multiple, generator, torch, seconds, label):
    """Times each mode on batches (lists of lengths); returns {mode: row}."""
    sentences = sum(len(b) for b in batches)
    tokens = sum(sum(b) for b in batches)
    inputs = []
    if pt is not None:
        for b in batches:
            pad_to = -(-max(b) // pad_multiple) * pad_multiple
            inputs.append(random_ids(generator, b, pt.vocab, pad_to, torch))
    rows = {}
    for mode in modes:
        if mode in TORCH_MODES:
            fns = pt.calls(mode, inputs)
        else:
            fns = st.calls(mode, batches)
        t0 = time.perf_counter()
        for fn in fns:  # the first call of each shape compiles (compile) or allocates
            fn()
        first_s = time.perf_counter() - t0
        finish = pt.finish(mode) if mode in TORCH_MODES else None
        row = {"mode": mode, **time_passes(fns, sentences, tokens, seconds, finish=finish)}
        row["first_pass_s"] = first_s
        if mode == "compile":
            row["least_cosine_vs_eager"] = pt.least_cosine(inputs)
        rows[mode] = row
        print_row(f"{mode:>8} {label}", row)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.environ.get("FERRY_MODEL_DIR",
                                                     os.path.expanduser("~/.cache/ferry/all-MiniLM-L6-v2")))
    p.add_argument("--runs", default="uniform,mixed", help="uniform, mixed or both (comma-separated)")
    p.add_argument("--modes", default="eager,compile,encode",
                   help="of eager, compile, encode, forward (comma-separated); see above")
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="uniform: batch x length pairs, lengths in tokens "
                   "with [CLS] and [SEP] (default: %(default)s)")
    p.add_argument("--batches", help="uniform: batch sizes, each with each of --lengths, instead of --shapes")
    p.add_argument("--lengths", help="uniform: sequence lengths, each with each of --batches, instead of --shapes")
    p.add_argument("--mixed-source", default="lognormal", choices=["lognormal", "reference"],
                   help="mixed: lengths from a log-normal, or from the reference sentences (--reference)")
    p.add_argument("--mixed-batches", type=int, default=64, help="mixed: batches in one pass")
    p.add_argument("--mixed-batch-size", type=int, default=32, help="mixed: sequences a batch")
    p.add_argument("--mixed-median", type=float, default=20, help="mixed, lognormal: the median length in tokens")
    p.add_argument("--mixed-sigma", type=float, default=0.9, help="mixed, lognormal: sigma of the log")
    p.add_argument("--mixed-max", type=int, default=256, help="mixed, lognormal: the longest length (the tail's clip)")
    p.add_argument("--seed", type=int, default=36, help="mixed: the lengths' and the ids' seed")
    p.add_argument("--reference", default=REFERENCE_DIR, help="mixed, reference: the folder of sentences.json")
    p.add_argument("--mixed-file", help="mixed: write the lengths here (one batch a line) and keep the file")
    p.add_argument("--pad-multiple", type=int, default=1,
                   help="mixed: PyTorch pads each batch to its longest, rounded up to a multiple of this")
    p.add_argument("--compile-dynamic", default="auto", choices=["auto", "static"],
                   help="compile, uniform run: auto (torch's default: one graph made dynamic where shapes change, "
                   "a CUDA graph per shape) or static (a graph compiled per shape: longer warm-up); the mixed "
                   "run always compiles with torch's default")
    p.add_argument("--seconds", type=float, default=2.0, help="timed seconds per shape and mode (mixed: at least, "
                   "in whole passes)")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--ferry", help="ferry-model-bench to run on the same shapes and batches, for the ratios")
    p.add_argument("--ferry-callers", type=int, default=2,
                   help="uniform, with compile-stream: Ferry's calls at once for that mode's ratio (default: "
                   "%(default)s; 1 pairs it with one call at a time too)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cuda: fp16 on the GPU; cpu: f32 on the CPU (torch's threads, as Ferry's BLAS default)")
    args = p.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    modes = [m for m in args.modes.split(",") if m]
    for r in runs:
        if r not in ("uniform", "mixed"):
            p.error(f"--runs {r}: expected uniform or mixed")
    for m in modes:
        if m not in MODES:
            p.error(f"--modes {m}: expected one of {', '.join(MODES)}")
    if args.batches or args.lengths:
        shapes = [(b, n) for n in int_list(args.lengths or "32,128") for b in int_list(args.batches or "1,8,32,128")]
    else:
        try:
            shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
        except ValueError:
            p.error(f"--shapes {args.shapes}: expected BxL pairs, e.g. 1x32,32x256")
        if any(len(s) != 2 for s in shapes):
            p.error(f"--shapes {args.shapes}: expected BxL pairs, e.g. 1x32,32x256")
    mixed = mixed_lengths(args) if "mixed" in runs else []
    longest = max([n for _, n in shapes] + [n for b in mixed for n in b] + [MIN_LENGTH])

    import torch
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    pt = PyTorchModels(args, torch) if set(TORCH_MODES) & set(modes) else None
    st = SentenceTransformers(args, torch, longest) if {"encode", "forward"} & set(modes) else None
    import transformers
    if args.device == "cuda":
        device = torch.cuda.get_device_name()
    else:
        device = f"cpu ({torch.get_num_threads()} torch threads)"
    precision = "fp16" if args.device == "cuda" else "f32"
    print(f"st_baseline: torch {torch.__version__}, transformers {transformers.__version__}"
          + (f", sentence-transformers {st.version}" if st else "")
          + f", {precision} on {device}, {args.seconds:.1f} s per shape and mode")
    result = {"bench": "st_baseline", "model": os.path.basename(os.path.normpath(args.model)), "device": device,
              "precision": precision, "seconds": args.seconds, "torch": torch.__version__,
              "transformers": transformers.__version__, "sentence_transformers": st.version if st else None,
              "modes": modes, "compile": {"mode": "reduce-overhead", "dynamic": args.compile_dynamic}}
    head = f"{'sentences/s':>12} {'tokens/s':>12} {'p50 ms':>9} {'p99 ms':>9} {'calls':>7}"

    rows = []
    if "uniform" in runs:
        print(f"\n{'mode':>8} {'batch':>6} {'length':>6} {head}")
        for batch, length in shapes:
            got = measure(modes, pt, st, [[length] * batch], 1, generator, torch, args.seconds,
                          f"{batch:>6} {length:>6}")
            rows += [{"length": length, "batch": batch, **r} for r in got.values()]
    result["rows"] = rows

    if mixed:
        real = sum(sum(b) for b in mixed)
        padded = sum(-(-max(b) // args.pad_multiple) * args.pad_multiple * len(b) for b in mixed)
        sorted_lengths = sorted(n for b in mixed for n in b)
        describe = (f"{args.mixed_source}" + (f" median {args.mixed_median:g} sigma {args.mixed_sigma:g} clipped to "
                    f"{MIN_LENGTH}..{args.mixed_max}" if args.mixed_source == "lognormal" else "")
                    + f", seed {args.seed}, {len(mixed)} batches of {args.mixed_batch_size}")
        print(f"\nmixed lengths: {describe}; lengths median {sorted_lengths[len(sorted_lengths) // 2]}, "
              f"longest {sorted_lengths[-1]}; PyTorch pads {padded} tokens a pass for {real} real "
              f"({padded / real:.2f}x)")
        print(f"{'mode':>8} {'':>13} {head}")
        if pt is not None and args.compile_dynamic == "static":
            pt.compile_dynamic()
        mrows = measure(modes, pt, st, mixed, args.pad_multiple, generator, torch, args.seconds, f"{'mixed':>13}")
        result["mixed"] = {"source": args.mixed_source, "seed": args.seed, "batch_size": args.mixed_batch_size,
                           "median": args.mixed_median, "sigma": args.mixed_sigma, "max": args.mixed_max,
                           "pad_multiple": args.pad_multiple, "real_tokens_per_pass": real,
                           "padded_tokens_per_pass": padded, "lengths": mixed, "rows": list(mrows.values())}

    if args.ferry:
        del pt, st
        if args.device == "cuda":
            torch.cuda.empty_cache()
        if rows:
            # ferry-model-bench runs --batches x --lengths: one run per set of lengths that share their batches.
            by_batches = {}
            for n in dict.fromkeys(n for _, n in shapes):
                key = ",".join(str(b) for b, m in shapes if m == n)
                by_batches.setdefault(key, []).append(str(n))
            def ferry_rows(callers):
                got_rows = []
                for key, ns in by_batches.items():
                    got = run_ferry(args.ferry, args, ["--batches", key, "--lengths", ",".join(ns),
                                                       "--callers", str(callers)])
                    got_rows += got["rows"]
                return got, got_rows
            head_run, one_rows = ferry_rows(1)
            result["ferry"] = {**head_run, "rows": one_rows}
            stream_callers = args.ferry_callers if "compile-stream" in modes and args.device == "cuda" else 1
            many = {}
            if stream_callers > 1:
                _, many_rows = ferry_rows(stream_callers)
                result["ferry_concurrent"] = {"callers": stream_callers, "rows": many_rows}
                many = {(r["batch"], r["length"]): r for r in many_rows}
            print(f"\nsentences/s, uniform lengths: Ferry {precision} beside PyTorch {precision} (one run)"
                  + (f"; compile stream is paired with Ferry x{stream_callers}" if many else ""))
            names = [m for m in MODES if m in modes]
            print(f"{'batch':>6} {'length':>6} {'Ferry':>10} " + (f"{'Ferry x' + str(stream_callers):>10} " if many else "")
                  + " ".join(f"{LABELS[m]:>14}" for m in names)
                  + " " + " ".join(f"{'Ferry/' + m:>14}" for m in names))
            ratios = []
            for fr in one_rows:
                if (fr["batch"], fr["length"]) not in shapes:
                    continue
                pt_rows = {r["mode"]: r for r in rows if r["length"] == fr["length"] and r["batch"] == fr["batch"]}
                ratio = {"batch": fr["batch"], "length": fr["length"], "ferry_sentences_per_s": fr["sentences_per_s"]}
                concurrent = many.get((fr["batch"], fr["length"]))
                if concurrent:
                    ratio["ferry_concurrent_sentences_per_s"] = concurrent["sentences_per_s"]
                    ratio["ferry_concurrent_callers"] = stream_callers
                for m in names:
                    ferry_rate = concurrent["sentences_per_s"] if concurrent and m == "compile-stream" \
                        else fr["sentences_per_s"]
                    ratio[f"{m}_sentences_per_s"] = pt_rows[m]["sentences_per_s"]
                    ratio[f"ferry_over_{m}"] = ferry_rate / pt_rows[m]["sentences_per_s"]
                ratios.append(ratio)
                print(f"{fr['batch']:>6} {fr['length']:>6} {fr['sentences_per_s']:>10.0f} "
                      + (f"{concurrent['sentences_per_s']:>10.0f} " if concurrent else "")
                      + " ".join(f"{ratio[m + '_sentences_per_s']:>14.0f}" for m in names) + " "
                      + " ".join(f"{ratio['ferry_over_' + m]:>13.2f}x" for m in names))
            result["ratios"] = ratios
        if mixed:
            path = args.mixed_file or tempfile.NamedTemporaryFile(suffix=".lengths", delete=False).name
            write_lengths_file(path, mixed, f"st_baseline.py --mixed: {describe}")
            ferry = run_ferry(args.ferry, args, ["--lengths-file", path])
            if not args.mixed_file:
                os.unlink(path)
            fm = ferry["mixed"]
            result["mixed"]["ferry"] = ferry
            ratio = {"ferry_sentences_per_s": fm["sentences_per_s"], "ferry_tokens_per_s": fm["tokens_per_s"]}
            print(f"\nmixed lengths ({describe}): Ferry unpadded beside PyTorch padded per batch")
            print(f"{'':>14} {'sentences/s':>12} {'tokens/s':>12} {'p99 ms':>9} {'Ferry/this':>11}")
            print(f"{'Ferry':>14} {fm['sentences_per_s']:>12.0f} {fm['tokens_per_s']:>12.0f} {fm['p99_ms']:>9.3f}")
            for r in result["mixed"]["rows"]:
                ratio[f"ferry_over_{r['mode']}"] = fm["sentences_per_s"] / r["sentences_per_s"]
                p99 = f"{r['p99_ms']:>9.3f}" if r["p99_ms"] is not None else f"{'-':>9}"
                print(f"{LABELS[r['mode']]:>14} {r['sentences_per_s']:>12.0f} {r['tokens_per_s']:>12.0f} "
                      f"{p99} {ratio['ferry_over_' + r['mode']]:>10.2f}x")
            result["mixed"]["ratio"] = ratio
    elif mixed and args.mixed_file:
        write_lengths_file(args.mixed_file, mixed, f"st_baseline.py --mixed: {describe}")

    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
