#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/): small valid
messages of each parser, a few broken ones, encoded here by hand from the
formats (include/ferry/core/wire.h, src/xfer/protocol.h and messages.cpp, RESP,
src/route/run.h).
Run it again after a format changes: `python3 fuzz/make_corpus.py`."""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def be32(*v):
    return struct.pack(">" + "I" * len(v), *v)


# --- DOCA wire (wire_fuzz): two bytes of --max-message-length, then the stream.
def request(payload, msg_id=4, wire_size=None, length=None):
    ws = 12 + len(payload) if wire_size is None else wire_size
    return be32(ws, msg_id, len(payload) if length is None else length) + payload


def wire():
    limit = struct.pack(">H", 256)
    return {
        "one_request": limit + request(b"hello"),
        "empty_payload": limit + request(b""),
        "pipelined": limit + request(b"a" * 10) + request(b"b" * 256) + request(b"c"),
        "at_the_limit": limit + request(b"x" * 248),
        "too_large": limit + request(b"x" * 249),
        "wrong_msg_id": limit + request(b"hi", msg_id=5),
        "wire_size_too_small": limit + be32(11, 4),
        "length_mismatch": limit + request(b"abcd", length=3),
        "cut_short": limit + request(b"hello world")[:15],
        "ferry_error": limit + be32(12 + 6, 64, 2) + b"reason",
    }


# --- control link (control_link_fuzz): the stream.
def control(msg_id, value=None):
    return be32(8, msg_id) if value is None else be32(12, msg_id, value)


def control_error(code, text):
    return be32(12 + len(text), 64, code) + text


def control_link():
    return {
        "start_shutdown": control(0),
        "exchange": control(2, 7) + control(3, 8),
        "ferry_error": control_error(9, b"--max-message-length differs"),
        "session": control(2, 1) + control(3, 2) + control(0) + control(1),
        "unknown_id": be32(8, 99),
        "huge": be32(0x7F000000, 0),
        "shutdown_with_payload": be32(12, 0, 0),
        "truncated_error": be32(10, 64) + b"\0\0",
    }


# --- agent protocol (xfer_protocol_fuzz): frames, bodies little-endian.
class Enc:
    def __init__(self):
        self.b = b""

    def u8(self, v):
        self.b += struct.pack("<B", v)
        return self

    def u32(self, v):
        self.b += struct.pack("<I", v & 0xFFFFFFFF)
        return self

    def u64(self, v):
        self.b += struct.pack("<Q", v)
        return self

    def str(self, s):
        s = s.encode() if isinstance(s, str) else s
        return self.u32(len(s)).raw(s)

    def raw(self, s):
        self.b += s
        return self

    def frame(self, t):
        return be32(8 + len(self.b), t) + self.b


HELLO, HELLO_OK, REGISTER, REGISTER_OK, DEREGISTER, TRANSFER, TRANSFER_DONE = range(1, 8)
LIST, LIST_REPLY, REMOVE, REMOVE_REPLY, STATS, STATS_REPLY, CALL_ERROR = range(8, 15)


def call_msg(t, call, prefix="", after="", limit=0, keys=(), region=0):
    e = Enc().u64(call).str(prefix).str(after).u32(limit).u32(len(keys))
    for k in keys:
        e.str(k)
    return e.u64(region).frame(t)


def call_reply(t, call, status=0, text="", count=0, objects=()):
    e = Enc().u64(call).u32(status).str(text).u64(count).u32(len(objects))
    for key, size, tier in objects:
        e.str(key).u64(size).str(tier)
    return e.frame(t)


def xfer_protocol():
    hello = Enc().u32(2).u32(0x01020304).str("app").frame(HELLO)
    hello_ok = (Enc().u64(1).u32(4242).u32(2)
                .str("memfd").u32(2).u8(0).u8(1).u8(1).u8(0).u8(1)
                .str("dram").u32(1).u8(0).u8(1).u8(0).u8(1)
                .u32(2).str("dram:1GiB").str("file:/tmp/x:4GiB").frame(HELLO_OK))
    register = (Enc().u64(3).u8(0).u32(0).u64(1 << 20).u8(0).u64(0).u32(0).u32(0xFFFFFFFF)
                .str(bytes(range(64))).u64(0).frame(REGISTER))
    # Reach 3: a shared file at offset 4096, and the application's address for pulls.
    register_shared_file = (Enc().u64(4).u8(0).u32(0).u64(1 << 20).u8(3).u64(4096).u32(0).u32(0xFFFFFFFF)
                            .str(bytes(64)).u64(0x7F0000001000).frame(REGISTER))
    register_ok = Enc().u64(3).u64(1).frame(REGISTER_OK)
    transfer = (Enc().u64(77).u8(0).u32(2)
                .u64(1).u64(0).u64(4096).str("model@1@0@deadbeef@bf16")
                .u64(1).u64(4096).u64(1).str(b"\0binary\xff key").frame(TRANSFER))
    transfer_done = (Enc().u64(77).u32(0xFFFFFFFF).u32(2)
                     .u32(0xFFFFFFFF).u64(0).str("").str("'k': not found")
                     .u32(0).u64(4096).str("dram:1GiB").str("").frame(TRANSFER_DONE))
    return {
        "hello": hello,
        "hello_ok": hello_ok,
        "register": register,
        "register_shared_file": register_shared_file,
        "register_ok": register_ok,
        "deregister": call_msg(DEREGISTER, 0, region=1),
        "transfer": transfer,
        "transfer_done": transfer_done,
        "list": call_msg(LIST, 5, prefix="model@", after="model@1", limit=100),
        "list_reply": call_reply(LIST_REPLY, 5, text="model@2", objects=[("model@1", 4096, "dram"),
                                                                          ("model@2", 10, "file")]),
        "remove": call_msg(REMOVE, 6, keys=["a", "b"]),
        "remove_reply": call_reply(REMOVE_REPLY, 6, count=1),
        "stats": call_msg(STATS, 7),
        "stats_reply": call_reply(STATS_REPLY, 7, text='{"tiers": []}'),
        "call_error": call_reply(CALL_ERROR, 8, status=0xFFFFFFF7, text="malformed register"),
        "session": hello + register + transfer + call_msg(LIST, 5, prefix="m") + call_msg(DEREGISTER, 0, region=1),
        "replies": hello_ok + register_ok + transfer_done + call_reply(STATS_REPLY, 7, text="{}"),
        "unknown_type": be32(8, 15),
        "oversized": be32(0x10000000, TRANSFER),
        "hostile_count": Enc().u64(1).u8(0).u32(0xFFFFFFFF).frame(TRANSFER),
    }


# --- RESP (resp_fuzz): one byte of options (bit 0: discard payloads), then replies.
def resp():
    big = b"x" * 70000  # past the reader's 64 KiB buffer: the direct and refill paths
    replies = b"+OK\r\n:42\r\n$5\r\nhello\r\n$-1\r\n-ERR wrong type\r\n:-7\r\n$0\r\n\r\n"
    return {
        "status": b"\0+OK\r\n",
        "pipeline": b"\0" + replies,
        "pipeline_discarding": b"\1" + replies,
        "bulk_large": b"\0$70000\r\n" + big + b"\r\n+OK\r\n",
        "long_line": b"\0+" + big + b"\r\n:1\r\n",
        "bulk_cut_short": b"\0$100\r\nshort",
        "no_crlf_after_bulk": b"\0$3\r\nabcXY",
        "bad_length": b"\0$12a\r\n",
        "array": b"\0*1\r\n$3\r\nfoo\r\n*-1\r\n",
        "bad_type": b"\0%1\r\n$3\r\nfoo\r\n",
        "bare_newline": b"\0+OK\n",
    }


# --- Redis Cluster replies (cluster_slots_fuzz): one byte of options (bit 0:
# CLUSTER SLOTS, else SHARDS; bit 1: TLS ports), then replies, as Redis 7 writes them.
def cluster_slots():
    def bulk(b):
        return b"$%d\r\n%s\r\n" % (len(b), b)

    def arr(*items):
        return b"*%d\r\n" % len(items) + b"".join(items)

    def num(n):
        return b":%d\r\n" % n

    def node(port, role, health=b"online", ip=b"127.0.0.1", tls_port=None):
        fields = [bulk(b"id"), bulk(b"e" * 40), bulk(b"port"), num(port)]
        if tls_port is not None:
            fields += [bulk(b"tls-port"), num(tls_port)]
        fields += [bulk(b"ip"), bulk(ip), bulk(b"endpoint"), bulk(ip), bulk(b"role"), bulk(role),
                   bulk(b"replication-offset"), num(1234), bulk(b"health"), bulk(health)]
        return arr(*fields)

    def shard(first, last, *nodes):
        return arr(bulk(b"slots"), arr(num(first), num(last)), bulk(b"nodes"), arr(*nodes))

    shards = arr(shard(0, 5460, node(7000, b"master"), node(7003, b"replica")),
                 shard(5461, 10922, node(7001, b"master", b"fail"), node(7004, b"master")),
                 shard(10923, 16383, node(7002, b"master", ip=b"?"), node(7005, b"replica")))
    tls_shards = arr(shard(0, 16383, node(0, b"master", tls_port=7100)))
    slots = arr(arr(num(0), num(5460), arr(bulk(b"127.0.0.1"), num(7000), bulk(b"e" * 40), arr()),
                    arr(bulk(b"127.0.0.1"), num(7003), bulk(b"f" * 40), arr())),
                arr(num(5461), num(16383), arr(bulk(b""), num(7001))))
    return {
        "shards": b"\0" + shards,
        "shards_tls": b"\2" + tls_shards,
        "slots": b"\1" + slots,
        "moved": b"\0-MOVED 3999 127.0.0.1:6381\r\n-ASK 3999 :6382\r\n-MOVED 1 [::1]:7000\r\n",
        "bad_slot": b"\0" + arr(shard(0, 16384, node(7000, b"master"))) + b"-MOVED 16384 h:1\r\n",
        "not_a_map": b"\0" + arr(arr(bulk(b"slots"))),
        "too_deep": b"\0" + b"*1\r\n" * 12 + b":1\r\n",
    }


# --- INFO memory (redis_info_fuzz): the reply's text, as Redis 7 writes it.
def redis_info():
    real = (b"# Memory\r\nused_memory:1046560\r\nused_memory_human:1022.03K\r\n"
            b"used_memory_rss:13606912\r\nused_memory_peak:1046560\r\nmaxmemory:67108864\r\n"
            b"maxmemory_human:64.00M\r\nmaxmemory_policy:noeviction\r\n")
    return {
        "redis7": real,
        "no_maxmemory": real.replace(b"maxmemory:67108864", b"maxmemory:0"),
        "lf_only": b"used_memory:5\nmaxmemory:7\n",
        "missing_max": b"# Memory\r\nused_memory:10\r\n",
        "twice": b"used_memory:1\r\nmaxmemory:0\r\nused_memory:2\r\n",
        "overflow": b"used_memory:18446744073709551616\r\nmaxmemory:0\r\n",
        "signed": b"used_memory:10\r\nmaxmemory:-1\r\n",
        "leading_zero": b"used_memory:0046560\r\nmaxmemory:0\r\n",
        "cr_at_end": b"used_memory:10\r\nmaxmemory:0\r",
    }


# --- JSON flags (json_flags_fuzz): the file's text, for the target's options
# -p/--port (int), -n/--name (string, on the command line), --text, -s (string),
# --list (repeatable), --flag, --ratio (double).
def json_flags():
    def j(v):
        return json.dumps(v).encode()
    return {
        "flat": j({"port": 5000, "text": "hello", "flag": True}),
        "doca_form": j({"doca_general_flags": {"p": 7}, "doca_program_flags": {"ratio": 0.25, "list": ["a", "b"]}}),
        "command_line_wins": j({"name": "from-file", "text": "t"}),
        "short_only": j({"s": "short"}),
        "repeated": j({"port": [1, 2, 3], "list": "one"}),
        "negative_and_small": j({"port": -5, "ratio": 1e-7}),
        "dash_value": j({"text": "-x", "s": "--y"}),
        "unknown_flag": j({"no-such-flag": 1}),
        "bad_type": j({"port": {"a": 1}}),
        "not_an_object": j([1, 2]),
        "false_flag": j({"flag": False, "json": "other.json"}),
    }


# --- HTTP (http_fuzz): one byte (odd: small limits), then the stream.
def http():
    big, small = b"\x00", b"\x01"
    get = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"
    return {
        "get": big + get,
        "pipelined": big + get + b"HEAD /contacts.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "browser": big + b"GET /a/b/../c.html?q=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0\r\n"
                         b"Accept: text/html,*/*;q=0.8\r\nAccept-Encoding: gzip\r\nCookie: a=b; c=d\r\n\r\n",
        "http10": big + b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "leading_crlf_lf_only": big + b"\r\n\nGET /health HTTP/1.1\nHost: x\n\n",
        "content_length": big + b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        "chunked": big + b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5;e=1\r\nhello\r\n0\r\nTrailer: v\r\n\r\n",
        "smuggle": big + b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "encoded": big + b"GET /%2e%2e/%00/%zz/%41 HTTP/1.1\r\nHost: x\r\n\r\n",
        "absolute": big + b"GET http://example.com/metrics HTTP/1.1\r\nHost: example.com\r\n\r\n",
        "obs_fold": big + b"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n  b\r\n\r\n",
        "small_limits": small + b"GET /" + b"a" * 80 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    }


# --- the metrics endpoint's request heads (metrics_request_fuzz).
def metrics_request():
    return {
        "metrics": b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nAccept: text/plain\r\n\r\n",
        "health_head": b"HEAD /health?probe=1 HTTP/1.0\r\n\r\n",
        "post": b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "other_path": b"GET /metricsx HTTP/1.1\r\n\r\n",
        "no_blank_line": b"GET /metrics HTTP/1.1\r\nHost: x\r\n",
        "bad_header": b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
    }


# --- route runs (route_run_fuzz): one byte for the writer's capacity, then runs.
def run(dest, src, handler, payloads, length=None, count=None, magic=0xF7):
    n = len(payloads[0]) if payloads else 0
    body = b"".join(payloads)
    head = struct.pack("<IIIHH", dest, src, (length if length is not None else n) | (magic << 24), handler,
                       count if count is not None else len(payloads))
    return head + body + b"\0" * (-len(body) % 8)


def route_run():
    eight = [struct.pack("<Q", v) for v in range(40)]
    twelve = [struct.pack("<IQ", v, v * 3) for v in range(7)]
    return {
        "one_run_of_eight": b"\x00" + run(1, 0, 2, eight[:5]),
        "two_runs_split_small": b"\x01" + run(1, 0, 2, eight) + run(3, 2, 0, twelve),
        "unaligned_payloads": b"\x10" + run(0, 1, 7, twelve) + run(0, 1, 7, [b"abcde"]),
        "empty_payloads": b"\x05" + run(2, 2, 1, [b""] * 9),
        "bad_magic": b"\x00" + run(1, 0, 2, eight[:3], magic=0x12),
        "count_zero": b"\x00" + run(1, 0, 2, [], length=8, count=0),
        "truncated": b"\x00" + run(1, 0, 2, eight[:4])[:40],
    }


def main():
    corpora = {
        "wire_fuzz": wire(),
        "control_link_fuzz": control_link(),
        "xfer_protocol_fuzz": xfer_protocol(),
        "resp_fuzz": resp(),
        "redis_info_fuzz": redis_info(),
        "cluster_slots_fuzz": cluster_slots(),
        "json_flags_fuzz": json_flags(),
        "http_fuzz": http(),
        "metrics_request_fuzz": metrics_request(),
        "route_run_fuzz": route_run(),
    }
    for target, seeds in corpora.items():
        d = os.path.join(HERE, "corpus", target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print(f"{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
