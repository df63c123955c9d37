#!/usr/bin/env python3
"""sentence-transformers fp16 on CUDA, on the shapes ferry-model-bench measures.

For each sequence length L and batch size B, two measurements:

  encode    SentenceTransformer.encode of B strings that tokenize to exactly L
            tokens ("hello" is one token: [CLS] + "hello" * (L - 2) + [SEP]),
            with batch_size=B: tokenization, forward, pooling, copy to the host.
  forward   the model alone (model(features) under torch.no_grad, then
            torch.cuda.synchronize) on those B texts' features, already
            tokenized and on the GPU: what ferry-model-bench's embed() does.

Each is warmed up, then called back to back for --seconds; the table and JSON
hold sentences/s and the median and 99th-percentile ms per batch, as
ferry-model-bench's do. With --ferry BIN it also runs ferry-model-bench on the
same shapes and prints Ferry's sentences/s over sentence-transformers' (the
ratio is measured in one run, on one machine).

    st_baseline.py --model DIR [--batches 1,8,32,128] [--lengths 32,128]
                   [--seconds 2] [--json FILE] [--ferry build/bench/infer/ferry-model-bench]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

WARMUP_CALLS = 5


def int_list(s):
    return [int(v) for v in s.split(",") if v]


def time_calls(fn, batch, seconds):
    for _ in range(WARMUP_CALLS):
        fn()
    ms = []
    start = time.perf_counter()
    deadline = start + seconds
    now = start
    while True:
        t0 = time.perf_counter()
        fn()
        now = time.perf_counter()
        ms.append((now - t0) * 1e3)
        if now >= deadline:
            break
    ms.sort()

    def pct(q):
        return ms[min(len(ms) - 1, int(q * (len(ms) - 1) + 0.5))]

    return {
        "batch": batch,
        "calls": len(ms),
        "sentences_per_s": batch * len(ms) / (now - start),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
    }


def texts_of_length(tokenizer, length, batch):
    text = " ".join(["hello"] * (length - 2))
    n = len(tokenizer(text)["input_ids"])
    if n != length:
        sys.exit(f"st_baseline: {length - 2} x 'hello' tokenizes to {n} ids, not {length}")
    return [text] * batch


def run_ferry(binary, args, model_dir):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    precision = "f16" if args.device == "cuda" else "f32"
    cmd = [binary, "--model", model_dir, "--device", args.device, "--precision", precision,
           "--batches", args.batches, "--lengths", args.lengths, "--seconds", str(args.seconds), "--json", path]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(path) as f:
        result = json.load(f)
    os.unlink(path)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.environ.get("FERRY_MODEL_DIR",
                                                     os.path.expanduser("~/.cache/ferry/all-MiniLM-L6-v2")))
    p.add_argument("--batches", default="1,8,32,128")
    p.add_argument("--lengths", default="32,128")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--json", dest="json_path")
    p.add_argument("--ferry", help="ferry-model-bench to run on the same shapes, for the ratio")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cuda: fp16 on the GPU; cpu: f32 on the CPU (torch's threads, as Ferry's BLAS default)")
    args = p.parse_args()

    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    batches = int_list(args.batches)
    lengths = int_list(args.lengths)
    if args.device == "cuda":
        model = SentenceTransformer(args.model, device="cuda").half()
        device = torch.cuda.get_device_name()
    else:
        model = SentenceTransformer(args.model, device="cpu")
        device = f"cpu ({torch.get_num_threads()} torch threads)"
    model.max_seq_length = max(model.max_seq_length, max(lengths))
    precision = "fp16" if args.device == "cuda" else "f32"
    print(f"st_baseline: sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, "
          f"{precision} on {device}, {args.seconds:.1f} s per shape")
    print(f"{'mode':>8} {'length':>8} {'batch':>8} {'sentences/s':>14} {'p50 ms':>10} {'p99 ms':>10} {'calls':>8}")

    rows = []
    for length in lengths:
        for batch in batches:
            texts = texts_of_length(model.tokenizer, length, batch)
            features = model.tokenize(texts)
            # Tensors only: sentence-transformers 6 also returns the text column's name.
            features = {k: v.to(args.device) for k, v in features.items() if hasattr(v, "to")}
            assert features["input_ids"].shape == (batch, length), features["input_ids"].shape

            def encode():
                model.encode(texts, batch_size=batch, convert_to_numpy=True)

            def forward():
                with torch.no_grad():
                    model(features)
                if args.device == "cuda":
                    torch.cuda.synchronize()

            for mode, fn in (("encode", encode), ("forward", forward)):
                row = {"mode": mode, "length": length, **time_calls(fn, batch, args.seconds)}
                rows.append(row)
                print(f"{mode:>8} {length:>8} {batch:>8} {row['sentences_per_s']:>14.0f} {row['p50_ms']:>10.3f} "
                      f"{row['p99_ms']:>10.3f} {row['calls']:>8}", flush=True)

    result = {"bench": "st_baseline", "model": os.path.basename(os.path.normpath(args.model)), "device": device,
              "precision": precision, "seconds": args.seconds, "torch": torch.__version__,
              "sentence_transformers": sentence_transformers.__version__, "rows": rows}

    if args.ferry:
        del model
        if args.device == "cuda":
            torch.cuda.empty_cache()
        ferry = run_ferry(args.ferry, args, args.model)
        result["ferry"] = ferry
        print(f"\nFerry {precision} over sentence-transformers {precision} (sentences/s ratio)")
        print(f"{'length':>8} {'batch':>8} {'ferry':>12} {'vs encode':>10} {'vs forward':>11}")
        ratios = []
        for fr in ferry["rows"]:
            st = {r["mode"]: r for r in rows if r["length"] == fr["length"] and r["batch"] == fr["batch"]}
            ratio = {"length": fr["length"], "batch": fr["batch"], "ferry_sentences_per_s": fr["sentences_per_s"],
                     "vs_encode": fr["sentences_per_s"] / st["encode"]["sentences_per_s"],
                     "vs_forward": fr["sentences_per_s"] / st["forward"]["sentences_per_s"]}
            ratios.append(ratio)
            print(f"{fr['length']:>8} {fr['batch']:>8} {fr['sentences_per_s']:>12.0f} {ratio['vs_encode']:>9.2f}x "
                  f"{ratio['vs_forward']:>10.2f}x")
        result["ratios"] = ratios

    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
