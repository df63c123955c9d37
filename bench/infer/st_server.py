#!/usr/bin/env python3
"""The baseline embedding server a user would write without Ferry: Python's
threaded HTTP server answering GET /inference?d=TEXT with sentence-transformers'
encode, one request at a time per thread (GAZSI's JSON fields, the embedding's
first 8 floats). Used by embed_bench.py --st-server.

    st_server.py --model DIR --port-file FILE [--device cuda|cpu]
"""
import argparse
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(args.model, device=args.device)
    if args.device == "cuda":
        model = model.half()
    lock = threading.Lock()  # one model call at a time, as a plain server does

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            text = urllib.parse.parse_qs(url.query).get("d", [""])[0]
            if url.path != "/inference" or not text:
                self.send_error(400)
                return
            with lock:
                v = model.encode([text], convert_to_numpy=True)[0]
            body = json.dumps({"input": text, "embedding_sample": [float(x) for x in v[:8]],
                               "batch_size": 1}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
