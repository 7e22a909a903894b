"""A libzmq peer (pyzmq) for the interop tests, driven over stdin and stdout by JSON lines.

argv[1] is a JSON object:

    {"socket": "PUSH", "bind": "tcp://127.0.0.1:*"}     or  "connect": address
    "options":  {"HEARTBEAT_IVL": 100, "SUBSCRIBE": "orders", ...}   zmq.<NAME> socket options
                (a string is latin-1 bytes, as a frame is)
    "serve":    "echo"     a ROUTER that answers every request by itself (see below)
    "allow_curve": [z85, ...]   a CURVE server that admits these client keys only (pyzmq's
                               ThreadAuthenticator, libzmq's ZAP)
    "lifetime_s": 60       the process ends by itself after this, whatever happens

The first line on stdout is {"ready": <the endpoint, port resolved>}. Then one line answers
each command read from stdin:

    {"op": "send", "frames": [...]}          -> {"sent": <frames>}  or {"error": ...}
                                                a frame is a string, or {"repeat": s, "times": n};
                                                "times": n sends the message n times
    {"op": "send_json", "value": <any>}      -> {"sent": 1}          (pyzmq's send_json)
    {"op": "recv", "timeout_ms": <n>}        -> {"frames": [...], "wire": {...}}  or {"timeout": true}
    {"op": "events"}                         -> {"events": ["CONNECTED", ...]}   (socket monitor)
    {"op": "count", "expect": n, "quiet_ms": q, "pause_every": k, "pause_ms": p}
                                             -> {"counted": <messages read>}  reads until n came,
                                                or none for q ms; sleeps p ms after every k
    {"op": "exit"}

Frames travel as latin-1 strings: each byte is the character of the same code point, so any
bytes survive JSON. "wire" is the message read as the README's wire format by this peer:
{"name", "headers": {lower-cased name: value}, "payload"} for [name][headers][payload].

"wire" is a reading aid (names lower-cased, white space trimmed); to check what a sender wrote,
compare "frames" byte for byte.

With "serve": "echo" the ROUTER answers each request [identity][(empty)][name][headers][payload]
with [identity][(empty)]["reply"]["correlation-id: <the request's>"][payload] and prints
{"answered": {"correlation_id", "name", "headers_frame", "payload", "delimited"}}, where
"headers_frame" is the request's headers frame exactly as read (latin-1), or null for a request
of fewer than three frames.

End of stdin ends the process: a test that dies takes its peers with it.
"""

import json
import os
import signal
import sys
import time

import zmq
import zmq.utils.monitor


def out(line):
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def to_bytes(frame):
    if isinstance(frame, dict):
        return to_bytes(frame["repeat"]) * int(frame["times"])
    return frame.encode("latin-1")


def to_text(frame):
    return frame.decode("latin-1")


def read_wire(frames):
    """The wire format as a peer in another language reads it."""
    if len(frames) == 3:
        name, headers, payload = frames
    elif len(frames) == 2:
        (name, payload), headers = frames, b""
    else:
        return {"shape": len(frames)}
    parsed = {}
    for line in headers.decode("utf-8").split("\n"):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        key, _, value = line.partition(":")
        parsed[key.strip().lower()] = value.strip()
    return {
        "shape": len(frames),
        "name": name.decode("utf-8"),
        "headers": parsed,
        "payload": payload.decode("utf-8", "replace"),
    }


def answer_request(sock, frames):
    identity, rest = frames[0], frames[1:]
    delimited = len(rest) > 1 and rest[0] == b""
    if delimited:
        rest = rest[1:]
    wire = read_wire(rest)
    correlation = wire.get("headers", {}).get("correlation-id", "")
    payload = rest[-1]
    reply = [identity] + ([b""] if delimited else [])
    reply += [b"reply", ("correlation-id: " + correlation).encode(), payload]
    sock.send_multipart(reply)
    out({"answered": {
        "correlation_id": correlation,
        "name": wire.get("name"),
        "headers_frame": to_text(rest[1]) if len(rest) == 3 else None,
        "payload": payload.decode("utf-8", "replace"),
        "delimited": delimited,
    }})


def allow_curve(context, keys):
    """Admits the CURVE clients of these Z85 public keys only, in this context."""
    from zmq.auth.thread import ThreadAuthenticator

    allowed = {key.encode() for key in keys}

    class Allowed:
        def callback(self, domain, key):
            return key in allowed

    auth = ThreadAuthenticator(context)
    auth.start()
    auth.configure_curve_callback("*", credentials_provider=Allowed())
    return auth


def main():
    spec = json.loads(sys.argv[1])
    signal.alarm(int(spec.get("lifetime_s", 60)))
    context = zmq.Context()
    if "allow_curve" in spec:
        allow_curve(context, spec["allow_curve"])
    sock = context.socket(getattr(zmq, spec["socket"]))
    sock.setsockopt(zmq.LINGER, 0)
    for name, value in spec.get("options", {}).items():
        if isinstance(value, str):
            value = to_bytes(value)
        sock.setsockopt(getattr(zmq, name), value)
    monitor = sock.get_monitor_socket()
    if "bind" in spec:
        sock.bind(spec["bind"])
        endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
    else:
        sock.connect(spec["connect"])
        endpoint = spec["connect"]
    events = []
    serve_echo = spec.get("serve") == "echo"

    poller = zmq.Poller()
    poller.register(sys.stdin, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    if serve_echo:
        poller.register(sock, zmq.POLLIN)
    out({"ready": endpoint, "pid": os.getpid()})

    def drain_monitor():
        while True:
            try:
                event = zmq.utils.monitor.recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            events.append(zmq.Event(event["event"]).name)

    pending = b""
    while True:
        ready = dict(poller.poll())
        if monitor in ready:
            drain_monitor()
        if serve_echo and sock in ready:
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                answer_request(sock, frames)
        if sys.stdin not in ready and sys.stdin.fileno() not in ready:
            continue
        chunk = os.read(sys.stdin.fileno(), 1 << 16)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if run(json.loads(line), sock, events, drain_monitor) == "exit":
                return


def run(command, sock, events, drain_monitor):
    op = command["op"]
    if op == "exit":
        out({"bye": True})
        return "exit"
    if op == "send":
        frames = [to_bytes(frame) for frame in command["frames"]]
        sock.setsockopt(zmq.SNDTIMEO, int(command.get("timeout_ms", 5000)))
        try:
            for _ in range(int(command.get("times", 1))):
                sock.send_multipart(frames)
            out({"sent": len(frames)})
        except zmq.ZMQError as err:
            out({"error": str(err)})
    elif op == "send_json":
        sock.setsockopt(zmq.SNDTIMEO, int(command.get("timeout_ms", 5000)))
        try:
            sock.send_json(command["value"])
            out({"sent": 1})
        except zmq.ZMQError as err:
            out({"error": str(err)})
    elif op == "recv":
        if sock.poll(int(command.get("timeout_ms", 5000)), zmq.POLLIN):
            frames = sock.recv_multipart()
            out({"frames": [to_text(f) for f in frames], "wire": read_wire(frames)})
        else:
            out({"timeout": True})
    elif op == "count":
        counted = 0
        every = int(command.get("pause_every", 0))
        while counted < int(command["expect"]) and sock.poll(int(command["quiet_ms"]), zmq.POLLIN):
            sock.recv_multipart()
            counted += 1
            if every and counted % every == 0:
                time.sleep(command.get("pause_ms", 0) / 1000)
        out({"counted": counted})
    elif op == "events":
        drain_monitor()
        out({"events": events})
    else:
        out({"error": "unknown op " + op})
    return None


if __name__ == "__main__":
    main()
