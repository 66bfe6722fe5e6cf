# services/verifier/static/reward_host.py: the host of one Python reward worker of dapo-verifier (pyreward.h).
# Embedded into the verifier and run as `python3 -c <this file> PATH NAME`; the verifier itself imports no Python.
# It loads NAME from the file PATH (verl's custom_reward_function.path / .name), then answers one request at a time
# on its stdin/stdout pipes. Every frame is a 4-byte little-endian length and that many bytes of UTF-8 JSON.
#   verifier -> host: {"data_source", "solution_str", "ground_truth", "extra_info"}
#   host -> verifier: first {"ready": true} or {"fatal": "why"} (then it exits 2); then per request one of
#     {"score": float, "acc": bool?, "pred": str?, "extra": {name: float}}   the function returned a number or a dict
#     {"error": "what", "kind": "exception" | "memory" | "bad_return"}     no score (after "memory" it exits 3)
# What the function prints goes to stderr (the verifier's log), never into the protocol. The deadline, the memory
# limit (RLIMIT_AS, set before exec) and crashes are the verifier's business: it kills and replaces this process.
import importlib.util
import json
import math
import os
import struct
import sys
import traceback

MAX_FRAME = 256 << 20
FLOAT_MAX = 3.4028234663852886e38       # the wire carries scores as 32-bit floats
PRED_MAX = 4096                         # characters of "pred" kept: an extracted answer is short


def read_exact(f, n):
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def send(out, obj):
    body = json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass")
    out.write(struct.pack("<I", len(body)) + body)
    out.flush()


def number(v):
    """A finite value a 32-bit float can hold, or None."""
    try:
        f = float(v) if isinstance(v, (bool, int, float)) else float(v.item())    # numpy / torch scalars
    except Exception:
        return None
    return f if math.isfinite(f) and abs(f) <= FLOAT_MAX else None


def result_of(r):
    """verl's rule: a number is the score; a dict carries "score", and its other numeric values are metrics."""
    if isinstance(r, dict):
        if "score" not in r:
            return {"error": "the returned dict has no \"score\"", "kind": "bad_return"}
        s = number(r["score"])
        if s is None:
            return {"error": "score %r is not a finite number a float can hold" % (r["score"],), "kind": "bad_return"}
        out = {"score": s, "extra": {}}
        for k, v in r.items():
            if k == "score":
                continue
            if k == "acc" and number(v) is not None:       # True/False/1/0; a string is not an accuracy
                out["acc"] = bool(number(v))
            elif k == "pred":
                out["pred"] = ("" if v is None else str(v))[:PRED_MAX]
            n = number(v) if k != "pred" else None
            if n is not None:
                out["extra"][str(k)] = n
        return out
    s = number(r)
    if s is None and isinstance(r, (int, float)) and not isinstance(r, bool):
        return {"error": "score %r is not a finite number a float can hold" % (r,), "kind": "bad_return"}
    if s is None:
        return {"error": "returned %s, not a number or a dict with \"score\"" % type(r).__name__,
                "kind": "bad_return"}
    return {"score": s}


def main():
    path, name = sys.argv[1], sys.argv[2]
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                                  # the function's prints go to the log
    sys.stdout = sys.stderr
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)        # the function reading stdin gets EOF, not the protocol
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)
    try:
        spec = importlib.util.spec_from_file_location("dapo_custom_reward", path)
        if spec is None or spec.loader is None:
            raise ImportError("not a Python source file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["dapo_custom_reward"] = mod
        spec.loader.exec_module(mod)
        fn = getattr(mod, name, None)
        if not callable(fn):
            raise AttributeError("%s has no function %r" % (path, name))
    except BaseException as e:
        send(out, {"fatal": "%s: %s: %s" % (path, type(e).__name__, e)})
        sys.exit(2)
    send(out, {"ready": True})
    while True:
        head = read_exact(inp, 4)
        if head is None:
            return
        n = struct.unpack("<I", head)[0]
        body = read_exact(inp, n) if n <= MAX_FRAME else None
        if body is None:
            return
        req = json.loads(body.decode("utf-8"))
        try:
            r = fn(req["data_source"], req["solution_str"], req["ground_truth"], req.get("extra_info"))
            reply = result_of(r)
        except MemoryError:
            reply = {"error": "MemoryError", "kind": "memory"}
        except Exception as e:
            reply = {"error": "%s: %s" % (type(e).__name__, e), "kind": "exception"}
            traceback.print_exc()
        try:
            send(out, reply)
        except MemoryError:
            os._exit(3)
        if reply.get("kind") == "memory":
            os._exit(3)


main()
