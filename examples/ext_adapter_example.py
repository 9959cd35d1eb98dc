#!/usr/bin/env python3
"""terminull reference adapter: "Echo (Python)", agent id `echo-py`.

This is the full, copy-pasteable reference adapter (docs/adapter-protocol.md). It is one
self-contained file that uses only the Python 3 standard library. It runs as is and works as a
drop-in adapter. The comments document the whole adapter protocol, version 1:

  * every method: initialize, detect, start, send, stream, session_id, interrupt,
    permission_response, list_models, get_usage, stop, and the handoff hooks
    scan_external_sessions, is_cwd_externally_owned, mirror, latest_sid_for_cwd,
    terminal_resume_command and release;
  * every field of the declaration (the `initialize` result);
  * every init param: cwd, model, binary, resume_session_id, on_session_id and effort.

The contract is docs/adapter-protocol.md, and the blocks are in docs/block-protocol.md. JSON Schemas
for every message are in docs/schema/. When this file and those documents disagree, the documents
win.

What it does
------------
The "agent" is built in: it answers every message with "You said: <text>". The reply is streamed
word by word as `text` chunks under one id, then a `done: true` chunk, then a `session_end`. A
message that starts with "slow" (any case, after leading spaces) is streamed one character every
half second. That gives you time to try `interrupt`, which ends the turn with a `session_end` of
reason "interrupted".

Trying it by hand
-----------------
    $ ./ext_adapter_example.py
    {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":1,"bridge":{"name":"terminull","version":"0.1.0"},"offered_init_params":["cwd","model","binary","resume_session_id","on_session_id","effort"]}}
    {"jsonrpc":"2.0","id":2,"method":"start","params":{"session_id":"s-1","cwd":"/tmp"}}
    {"jsonrpc":"2.0","id":3,"method":"send","params":{"text":"hello"}}
    {"jsonrpc":"2.0","id":4,"method":"stop"}

Paste each request as one line. Each answer comes back as one line on stdout. Logs go to stderr.

Installing
----------
Make the file executable (`chmod +x`) and register the executable with your bridge as an adapter.
docs/bridge.md names the drop-in folder ~/.terminull/ext_adapters/. The bridge spawns the file
directly, so keep the shebang line. Change `agent_id` and `display_name` before you install a copy
next to this one, because two adapters may not share an agent id.

How the pieces fit
------------------
  Wire           stdout framing: one compact JSON object per line, written whole and flushed.
  DECLARATION    the `initialize` result: who the adapter is and what it can do.
  Session        one terminull session: `start`, the turns, usage totals, `stop`.
  Turn           one running turn on its own thread, so the reader stays free for `interrupt`.
  Adapter        reads stdin, decodes JSON-RPC, validates params and dispatches to one handler
                 per method.
"""

import json
import os
import re
import sys
import threading
import time
import traceback
import uuid

# ─────────────────────────────────────────────────────────────────────────────────────────────────
# Constants
# ─────────────────────────────────────────────────────────────────────────────────────────────────

PROTOCOL_VERSION = 1          # the adapter protocol version this file speaks
ADAPTER_VERSION = "1.0.0"     # this adapter's own version (declared as `adapter_version`)
LINE_CAP = 8 * 1024 * 1024    # §2: a line may be at most 8 MiB, not counting the newline

# JSON-RPC error codes (§8 of adapter-protocol.md; `codes` in protocol/src/jsonrpc.rs).
PARSE_ERROR = -32700          # a line that is not JSON; answered with "id": null
INVALID_REQUEST = -32600      # JSON that is not a valid JSON-RPC message
METHOD_NOT_FOUND = -32601     # an unknown method, or an optional method that was not declared
INVALID_PARAMS = -32602       # params that do not match the method's schema
INTERNAL_ERROR = -32603       # a bug in the adapter
AUTH_REQUIRED = -32000        # the agent needs the user to log in first (start or send)
PROTOCOL_VERSION_MISMATCH = -32001  # data: {"supported": [...], "requested": N}
NOT_FOUND = -32002            # unknown resume_session_id, request_id or agent_session_id
BUSY = -32003                 # e.g. `send` during a turn without cap_input_during_turn
AGENT_ERROR = -32010          # the agent CLI failed: not installed, crashed, refused its arguments
CANCELLED = -32800            # the request was abandoned, e.g. while shutting down


def log(message):
    """Write one line to the adapter's log.

    The log is stderr. The bridge reads the child's stderr line by line into its own log, tagged
    with the adapter, and attaches the last lines to the crash report when the adapter dies. stderr
    is never parsed, so write whatever helps. Never log to stdout: stdout carries protocol only.
    """
    print(f"[echo-py] {message}", file=sys.stderr, flush=True)


# ─────────────────────────────────────────────────────────────────────────────────────────────────
# Framing (§2): NDJSON on stdin and stdout
# ─────────────────────────────────────────────────────────────────────────────────────────────────
#
# * One message per line: one compact JSON object, UTF-8, ended by "\n". json.dumps never writes a
#   raw newline, because it escapes newlines inside strings. Never pretty-print (indent=...): each
#   line of a multi-line object would be a bad line.
# * On input, a trailing "\r" is stripped, blank lines are skipped, and a last line without "\n"
#   still counts.
# * A line longer than 8 MiB is dropped. Keep everything you send well under that: truncate huge
#   tool output before you put it in a block.
# * Writes must not interleave. This adapter writes from two threads, the reader (responses) and
#   the turn (stream notifications), so every write goes through one lock and is flushed at once.
#   A line that sits in a buffer is a line the bridge has not seen.
# * stdout carries protocol only. To make that hard to break, the adapter moves the protocol onto a
#   private copy of file descriptor 1 at startup, then points fd 1 and sys.stdout at stderr. After
#   that, a stray print(), a library's banner or a child process that inherits fd 1 all land in the
#   log instead of corrupting the protocol. If you run the agent CLI as a child process, give it its
#   own pipes as well.


class Wire:
    """The protocol side of stdout. Serializes writes and flushes after each line."""

    def __init__(self, stream):
        self._stream = stream
        self._lock = threading.Lock()
        self.broken = False  # set once the bridge stops reading (EPIPE)

    def write(self, message):
        # Compact separators, and ASCII escapes (\u00e9) for anything non-ASCII. That is valid
        # UTF-8 JSON on any terminal or locale, and survives lone surrogates from the input.
        line = json.dumps(message, separators=(",", ":"), allow_nan=False)
        data = line.encode("ascii") + b"\n"
        with self._lock:
            if self.broken:
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (BrokenPipeError, OSError) as exc:
                # The bridge has gone away. Nothing more can be delivered, and stdin reaches EOF
                # soon, which ends the process.
                self.broken = True
                log(f"stdout is closed ({exc}); dropping further output")

    # JSON-RPC envelopes (§3). The adapter sends only responses and notifications. It never sends
    # a request, so it never allocates an id: it echoes the bridge's id unchanged.
    def result(self, req_id, result):
        self.write({"jsonrpc": "2.0", "id": req_id, "result": result})

    def error(self, req_id, code, message, data=None):
        err = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self.write({"jsonrpc": "2.0", "id": req_id, "error": err})

    def notify(self, method, params):
        self.write({"jsonrpc": "2.0", "method": method, "params": params})

    def stream(self, block):
        """The `stream` notification (§7.5): one block per notification."""
        self.notify("stream", {"block": block})


def take_protocol_stdout():
    """Claims fd 1 for the protocol and points everything else that writes to "stdout" at stderr."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)             # children that inherit fd 1 now write to stderr
    sys.stdout = sys.stderr   # print() now writes to stderr
    return os.fdopen(protocol_fd, "wb")


def read_lines(stream):
    """Yields (line_number, bytes) for each line of stdin. Ends at EOF.

    Applies §2: strips "\n" and then "\r", skips blank lines and drops lines over the 8 MiB cap
    while they are still arriving, so memory stays bounded. The bridge's own lines are small, but a
    reader should still be robust.
    """
    number = 0
    while True:
        line = stream.readline(LINE_CAP + 2)
        if not line:
            return  # EOF
        number += 1
        if not line.endswith(b"\n") and len(line) > LINE_CAP:
            # Too long: skip the rest of it, then go on with the next line.
            length = len(line)
            while True:
                rest = stream.readline(LINE_CAP)
                length += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            log(f"line {number} is too long ({length} bytes); skipped")
            continue
        line = line.rstrip(b"\n")
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip(b" \t\r\n\f\v"):
            continue  # blank line
        if len(line) > LINE_CAP:
            log(f"line {number} is too long ({len(line)} bytes); skipped")
            continue
        yield number, line


# ─────────────────────────────────────────────────────────────────────────────────────────────────
# The declaration (§5): the result of `initialize`
# ─────────────────────────────────────────────────────────────────────────────────────────────────
#
# The bridge runs a contract check on this object before it registers the adapter (§6). A refused
# adapter is never registered, and the bridge logs every violation at once. Its schema is
# docs/schema/adapter-declaration.schema.json. Explicit opt-out (§5.2): every cap_* flag and both
# provides_* flags must be present as true or false. A missing or null flag is a violation; it is
# never read as false. The declaration is the single source of truth: `start` repeats its flags in
# agent_info, and the bridge calls only the optional methods it declares.

DECLARATION = {
    # protocol_version (required, integer): the protocol this adapter speaks. Must be 1.
    "protocol_version": PROTOCOL_VERSION,

    # agent_id (required): the agent's unique id, 1-64 of a-z 0-9 _ -, starting with a letter or a
    # digit. No capitals, spaces or dots. It must not collide with another adapter's id (`claude`,
    # `codex`, … are built in). Sessions, history and the app's agent list are keyed by it.
    "agent_id": "echo-py",

    # display_name (required): the name shown to people. Must contain a non-whitespace character.
    "display_name": "Echo (Python)",

    # cli_binary (optional string): the agent CLI the adapter runs (`"acme"`). An SDK's default
    # `detect` probes it (`which` + `--version`). This echo agent is built in and runs no CLI, so
    # the field is omitted rather than written as null ("optional fields are omitted when they have
    # no value"). A CLI-wrapping adapter would write for example:
    #     "cli_binary": "acme",

    # adapter_version (optional string): this adapter's own version, for logs.
    "adapter_version": ADAPTER_VERSION,

    # The eight capability flags (all required, true or false). They say what the app may offer
    # and what the adapter will stream.
    #
    # cap_images: the composer offers an image picker, so `send` may carry image attachments.
    "cap_images": False,
    # cap_documents: non-image file attachments are accepted in `send`.
    "cap_documents": False,
    # cap_thinking: the adapter streams `thinking` blocks. Without it, never send them.
    "cap_thinking": False,
    # cap_permissions: the adapter streams `permission_request` blocks and implements
    # `permission_response`. It gates that method: false means the bridge never calls it, and a
    # call that arrives anyway is answered -32601.
    "cap_permissions": False,
    # cap_subagents: tool calls may nest (`parent_id`), and the app renders them as groups.
    "cap_subagents": False,
    # cap_interrupt: `interrupt` stops the running turn, and the app shows a live stop button. It
    # gates `interrupt`. This adapter implements it, so true.
    "cap_interrupt": True,
    # cap_input_during_turn: `send` is accepted while a turn runs and is fed into that turn. When
    # false, the bridge queues the user's messages until the turn's session_end. A `send` that
    # arrives during a turn anyway is answered -32003 (busy).
    "cap_input_during_turn": False,
    # cap_terminal: the agent can open a terminal on the device.
    "cap_terminal": False,

    # The two optional surfaces (required flags, explicit opt-out).
    #
    # provides_models: `list_models` is implemented and feeds the new-session model picker.
    "provides_models": True,
    # provides_usage: `get_usage` is implemented and feeds the `/status` command.
    "provides_usage": True,

    # lease (required): how the adapter holds its agent between turns (§5.5).
    #   "per_turn"   - a fresh agent process for each turn, which exits when the turn ends. The CLI
    #                  is free to resume the conversation between turns, and no `release` is needed.
    #                  (Codex, Cursor, Gemini, Droid, Pi)
    #   "persistent" - the agent (a long-lived subprocess or a server) is held across turns. A
    #                  terminal can take the conversation over only after `release`. (Claude Code,
    #                  OpenCode, Kilo)
    # The echo agent holds nothing between turns.
    "lease": "per_turn",

    # accepted_init_params (optional list, default [], no duplicates): which of the init params
    # the bridge offers (§5.3) `start` receives. The bridge passes only the params listed here, and
    # even a listed one is absent when the bridge has no value for it. The six params:
    #
    #   cwd                - working directory for the agent. Passed to `start` as `cwd`.
    #   model              - model id, one of the `list_models` ids when provides_models. Passed to
    #                        `start` as `model`. Absent when the user picked none, so use the
    #                        default.
    #   binary             - path of the agent CLI to run instead of the one on PATH. Passed to
    #                        `start` as `binary`. Not accepted here: the echo agent has no CLI.
    #   resume_session_id  - the agent's own session id to resume, as reported earlier through the
    #                        `session_id` notification. Passed to `start` as `resume_session_id`
    #                        after a bridge restart. Present, it means "continue that conversation".
    #   on_session_id      - a promise, not a value: nothing arrives in `start`. Listing it commits
    #                        the adapter to send the `session_id` notification whenever the agent's
    #                        own conversation id becomes known or changes. The spec's on_session_id
    #                        callback.
    #   effort             - reasoning effort ("low", "medium", "high", …). Passed to `start` as
    #                        `effort`.
    #
    # To be resumable after a bridge restart, accept both on_session_id and resume_session_id.
    "accepted_init_params": ["cwd", "model", "resume_session_id", "on_session_id", "effort"],

    # handoff_hooks (optional list, default [], no duplicates): the handoff hooks this adapter
    # implements (§5.4). Any of scan_external_sessions, is_cwd_externally_owned, mirror,
    # latest_sid_for_cwd, terminal_resume_command and release. The bridge calls only the hooks
    # listed, and anything else is answered -32601. The echo agent has no on-disk transcripts and
    # no terminal CLI, so it opts out of handoff. The hooks are documented near the end of this
    # file, with sketches.
    "handoff_hooks": [],
}

# The agent's own slash commands, offered in the app's composer as {name, description,
# source: "agent"}. The name has no leading slash. When the user picks one, it arrives as the text
# of an ordinary `send` ("/compact"). List only the agent's own commands: the bridge puts its
# universal ones (help, status, model, stop, new; source "bridge") first and drops adapter entries
# that claim source "bridge" or reuse a universal name. The echo agent has none. A real adapter
# might list:
#     {"name": "compact", "description": "Summarize the conversation to free context",
#      "source": "agent"}
SLASH_COMMANDS = []

# What `list_models` returns. `id` comes back to `start` as `model`, `name` is shown in the picker,
# `description` is optional and `is_default` marks the agent's default (false when absent).
MODELS = [
    {"id": "echo-1", "name": "Echo 1", "description": "Repeats your message", "is_default": True},
    {"id": "echo-1-mini", "name": "Echo 1 Mini", "description": "Repeats your message, "
     "for less", "is_default": False},
]
DEFAULT_MODEL = "echo-1"

# The ten flags that `start` repeats in agent_info, in the declaration's values.
CAPABILITY_FLAGS = (
    "cap_images", "cap_documents", "cap_thinking", "cap_permissions", "cap_subagents",
    "cap_interrupt", "cap_input_during_turn", "cap_terminal", "provides_models", "provides_usage",
)


# ─────────────────────────────────────────────────────────────────────────────────────────────────
# Errors and params checking
# ─────────────────────────────────────────────────────────────────────────────────────────────────


class RpcError(Exception):
    """Raise from a handler to answer the request with a JSON-RPC error."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def describe(value):
    """Names a JSON value the way the bridge's messages do ("integer `7`", "null", …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def invalid_params(method, problem, path=None):
    """-32602, in the bridge's format: "invalid params for <method>: <field>: <problem>"."""
    where = f"{path}: " if path else ""
    return RpcError(INVALID_PARAMS, f"invalid params for {method}: {where}{problem}")


_EXPECTED = {"string": "a string", "uint": "an unsigned integer", "object": "an object",
             "array": "an array", "bool": "a boolean"}


def _is(kind, value):
    if kind == "string":
        return isinstance(value, str)
    if kind == "uint":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "bool":
        return isinstance(value, bool)
    raise ValueError(kind)


def field(method, obj, key, kind, required=False, nullable=True, path=None):
    """Reads one field of a params object and checks its JSON type.

    An optional field that is absent, or null where null is allowed, gives None. Per §3, readers
    accept null for an optional string, number or object, but not for a list or a boolean. Unknown
    fields are never rejected: a newer bridge may send fields this adapter does not know.
    """
    path = path or key
    if key not in obj:
        if required:
            parent = path.rsplit(".", 1)[0] if "." in path else None
            raise invalid_params(method, f"missing field `{key}`", parent)
        return None
    value = obj[key]
    if value is None and not required and nullable:
        return None
    if not _is(kind, value):
        raise invalid_params(method, f"invalid type: {describe(value)}, expected {_EXPECTED[kind]}",
                             path)
    return value


def now():
    """`ts`: Unix seconds as a float. Every block carries it. Never set `seq`: the bridge numbers
    the blocks and overwrites any `seq` an adapter sends."""
    return time.time()


# ─────────────────────────────────────────────────────────────────────────────────────────────────
# A turn (§10)
# ─────────────────────────────────────────────────────────────────────────────────────────────────
#
# A turn runs from a `send` to its `session_end`. The bridge enforces these rules whatever the
# adapter does, but an adapter should never rely on that repair:
#
#   1. Exactly one `session_end` per turn. Its reason is "completed", "interrupted" (after
#      `interrupt`, never reported as an error), "error", "max_tokens", "refusal" or "stopped"
#      (after `stop`).
#   2. Every `tool_call` goes running -> done | error, re-sent under the same id, and has one paired
#      `tool_result` (tool_call_id = the call's id). Send the closing tool_call, then the result.
#   3. Every `text` and `thinking` id is closed by exactly one `done: true` chunk. Each chunk
#      carries the full text so far, never a delta, and no chunk of that id follows the done one.
#
# A failure inside a turn (the model errors, the agent CLI dies) is reported in the stream, not as
# a JSON-RPC error, because `send` was answered long ago. Close open tool calls with status
# "error", optionally stream an `error` block {message, recoverable, code?}, and end the turn with
# session_end reason "error".
#
# The blocks an adapter may stream (docs/block-protocol.md): text, thinking (cap_thinking),
# tool_call, tool_result, permission_request (cap_permissions), plan, diff, progress, bg_task,
# error, session_summary and session_end. agent_info and user_message are the bridge's. Each block
# has `type` and `ts`, may carry vendor data under namespaced keys in `_meta`, and never has `seq`.
#
# A turn has no deadline, but the bridge watches a running turn for liveness. An agent that works
# quietly for a long time (a long build) should stream `progress` or `bg_task` updates so the app
# does not flag it as unresponsive.


class Turn:
    """One running turn. Its work runs on its own thread, so that the reader thread stays free to
    take `interrupt`, `get_usage` and `stop` while the turn streams (§9)."""

    def __init__(self, session, text):
        self.session = session
        self.text = text
        self.finished = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._reason = None  # decided once: "completed", or the reason of an early end
        self.thread = threading.Thread(target=self._run, name="turn", daemon=True)

    def request_end(self, reason):
        """Asks the turn to end early with `reason` ("interrupted" or "stopped"). Returns False when
        the turn has already settled on how it ends (for example, it just completed). That way
        exactly one session_end is ever sent."""
        with self._lock:
            if self._reason is not None:
                return False
            self._reason = reason
        self._wake.set()
        return True

    def _settle(self, reason):
        with self._lock:
            if self._reason is None:
                self._reason = reason
            return self._reason

    def _run(self):
        wire = self.session.wire
        reply = f"You said: {self.text}"
        slow = self.text.lstrip().lower().startswith("slow")
        # Normal replies stream word by word. "slow…" replies stream one character every half
        # second, so there is time to interrupt them.
        pieces = list(reply) if slow else re.findall(r"\S+\s*|\s+", reply)
        delay = 0.5 if slow else 0.02
        # A text id must be unique within the session, and a session can outlive this process
        # (bridge restart plus resume_session_id). A per-process counter would reuse "msg-1", so use
        # a random id.
        msg_id = f"msg-{uuid.uuid4().hex}"
        so_far = ""
        try:
            for piece in pieces:
                if self._wake.wait(delay):
                    break  # interrupt or stop
                so_far += piece
                wire.stream({"type": "text", "ts": now(), "id": msg_id, "text": so_far,
                             "done": False})
            reason = self._settle("completed")
            if so_far:
                # Close the id with exactly one done chunk: the full text when completed, or the
                # text so far when interrupted or stopped.
                wire.stream({"type": "text", "ts": now(), "id": msg_id, "text": so_far,
                             "done": True})
            usage = {"input_tokens": len(self.text.split()), "output_tokens": len(so_far.split())}
        except Exception as exc:  # a bug: still end the turn cleanly, with reason "error"
            log(f"turn failed: {exc}\n{traceback.format_exc()}")
            reason, usage = "error", None
            if so_far:
                wire.stream({"type": "text", "ts": now(), "id": msg_id, "text": so_far,
                             "done": True})
            wire.stream({"type": "error", "ts": now(), "message": f"echo-py failed: {exc}",
                         "recoverable": True, "code": "adapter_bug"})
        self.session.end_turn(self, reason, usage)
        self.finished.set()


# ─────────────────────────────────────────────────────────────────────────────────────────────────
# The session (one process serves exactly one session, §4.1)
# ─────────────────────────────────────────────────────────────────────────────────────────────────


class Session:
    def __init__(self, wire):
        self.wire = wire
        self.lock = threading.Lock()  # guards `turn`, and makes "session_end + turn over" atomic
        self.started = False
        self.session_id = None
        self.agent_session_id = None
        self.cwd = None
        self.model = DEFAULT_MODEL
        self.effort = None
        self.turn = None
        self.turns = 0
        self.totals = {"input_tokens": 0, "output_tokens": 0}

    def end_turn(self, turn, reason, usage):
        """Sends the turn's one session_end and marks the session idle, under the session lock. A
        `send` that follows the session_end therefore always finds the session idle."""
        block = {"type": "session_end", "ts": now(), "reason": reason}
        if usage:
            block["usage"] = usage
            for key, value in usage.items():
                self.totals[key] = self.totals.get(key, 0) + value
        with self.lock:
            self.wire.stream(block)
            if self.turn is turn:
                self.turn = None
        log(f"turn ended: {reason}")

    def end_running_turn(self, reason, timeout=10.0):
        """Ends the running turn, if any, with `reason` and waits until its session_end is out."""
        with self.lock:
            turn = self.turn
        if turn is None:
            return
        turn.request_end(reason)
        if not turn.finished.wait(timeout):
            log("the running turn did not end in time")


# ─────────────────────────────────────────────────────────────────────────────────────────────────
# The adapter: reading, decoding and dispatching JSON-RPC (§3)
# ─────────────────────────────────────────────────────────────────────────────────────────────────


class Adapter:
    def __init__(self, wire):
        self.wire = wire
        self.session = Session(wire)
        self.exiting = False
        # The methods this adapter answers. Requests always come from the bridge.
        #
        # Optional methods are registered only when the declaration enables them (cap_interrupt,
        # cap_permissions, provides_models, provides_usage and handoff_hooks). Anything not here,
        # including `stream` and `session_id` (adapter-to-bridge notifications) and vendor methods
        # such as "_acme/compact", is answered -32601 "method not found: <method>".
        self.handlers = {
            "initialize": self.initialize,
            "detect": self.detect,
            "start": self.start,
            "send": self.send,
            "stop": self.stop,
        }
        optional = {
            "interrupt": ("cap_interrupt", self.interrupt),
            "permission_response": ("cap_permissions", None),  # not implemented, see below
            "list_models": ("provides_models", self.list_models),
            "get_usage": ("provides_usage", self.get_usage),
        }
        for method, (flag, handler) in optional.items():
            if DECLARATION[flag]:
                assert handler is not None, f"{flag} is declared but {method} is not implemented"
                self.handlers[method] = handler
        for hook in DECLARATION.get("handoff_hooks", []):
            self.handlers[hook] = getattr(self, hook)

    # ── the read loop ────────────────────────────────────────────────────────────────────────────

    def run(self, stdin):
        for number, raw in read_lines(stdin):
            self.handle_line(number, raw)
            if self.exiting:
                return  # `stop` was answered: exit on our own (§4.4, step 1)
        # stdin reached EOF (§4.4, step 2). The adapter must exit whether or not `stop` came first.
        # A short-lived process (detect, list_models, hooks) always ends this way. If a turn is
        # still running, close it as "stopped" in case the bridge is still reading.
        log("stdin closed; exiting")
        self.session.end_running_turn("stopped", timeout=2.0)

    def handle_line(self, number, raw):
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            # -32700 parse error, with "id": null, because the id could not be read.
            snippet = raw[:120].decode("utf-8", "replace")
            log(f"line {number} is not JSON: {snippet!r}")
            self.wire.error(None, PARSE_ERROR,
                            f"line {number} is not JSON ({exc}): {json.dumps(snippet)}")
            return
        if not isinstance(message, dict):
            # Batches (arrays) are not part of the protocol.
            self.wire.error(None, INVALID_REQUEST,
                            f"a JSON-RPC message must be an object, found {describe(message)}")
            return

        # Requests carry an integer or a string id. 92 and "92" are different ids. A whole-number
        # float (4.0) counts as the integer 4. A fractional number, null or anything else is
        # refused.
        has_id = "id" in message
        req_id, id_ok = None, False
        if has_id:
            value = message["id"]
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
                req_id, id_ok = value, True
            elif isinstance(value, float) and value.is_integer():
                req_id, id_ok = int(value), True

        if message.get("jsonrpc") != "2.0":
            self.wire.error(req_id if id_ok else None, INVALID_REQUEST,
                            'invalid request: "jsonrpc" must be "2.0"')
            return
        if "method" not in message:
            if "result" in message or "error" in message:
                # A response. The adapter never sends requests, so none is expected: log it.
                log(f"ignoring an unexpected response (id {message.get('id')!r})")
            else:
                self.wire.error(req_id if id_ok else None, INVALID_REQUEST,
                                "invalid request: neither a method nor a result or error")
            return
        method = message["method"]
        if has_id and not id_ok:
            self.wire.error(None, INVALID_REQUEST,
                            f"invalid request: bad id {describe(message['id'])}")
            return
        if not isinstance(method, str):
            self.wire.error(req_id, INVALID_REQUEST,
                            f"invalid request: method must be a string, found "
                            f"{describe(method)}")
            return
        if not has_id:
            # A notification. The bridge sends none in protocol 1, and notifications get no answer.
            log(f"ignoring notification {method!r}")
            return

        # Absent params and "params": null both stand for {}.
        params = message.get("params")
        if params is None:
            params = {}

        handler = self.handlers.get(method)
        if handler is None:
            self.wire.error(req_id, METHOD_NOT_FOUND, f"method not found: {method}")
            return
        if not isinstance(params, dict):
            self.wire.error(req_id, INVALID_PARAMS,
                            f"invalid params for {method}: invalid type: {describe(params)}, "
                            f"expected an object")
            return

        answered = []

        def respond(result):
            answered.append(True)
            self.wire.result(req_id, result)

        try:
            handler(params, respond)
        except RpcError as err:
            if answered:
                log(f"{method}: error after the response was sent: {err.message}")
            else:
                self.wire.error(req_id, err.code, err.message, err.data)
        except Exception as exc:
            log(f"{method} failed: {exc}\n{traceback.format_exc()}")
            if not answered:
                self.wire.error(req_id, INTERNAL_ERROR, f"internal error in {method}: {exc}")
        else:
            if not answered:
                self.wire.error(req_id, INTERNAL_ERROR, f"internal error: {method} sent no answer")

    # Each handler below takes (params, respond). It calls respond(result) exactly once, or raises
    # RpcError before responding. Handlers run on the reader thread, in the order the requests
    # arrive. They must answer promptly (§9: deadlines apply to responses), so long work goes to a
    # thread, like the turn.

    # ── initialize ───────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request. Always required. Deadline 120 s. The first message on every
    # process, both session and short-lived processes. The bridge sends nothing before it.
    #
    # Params:
    #   protocol_version     integer   the bridge's protocol version, 1
    #   bridge               object    {name, version} of the bridge ("terminull"), for logs
    #   offered_init_params  [string]  the init params the bridge can pass to `start`
    # Result: the declaration (above). Nothing else may be written to stdout before this response:
    # no `stream`, no `session_id`.
    # Errors: -32001 when the adapter cannot speak the bridge's protocol_version, with data
    # {"supported": [...], "requested": N}. An error, or no answer within 120 s, means the adapter
    # is not registered.
    def initialize(self, params, respond):
        version = field("initialize", params, "protocol_version", "uint", required=True)
        bridge = field("initialize", params, "bridge", "object", required=True)
        field("initialize", bridge, "name", "string", required=True, path="bridge.name")
        field("initialize", bridge, "version", "string", required=True, path="bridge.version")
        offered = field("initialize", params, "offered_init_params", "array", required=True)
        for i, item in enumerate(offered):
            if not isinstance(item, str):
                raise invalid_params("initialize", f"invalid type: {describe(item)}, expected a "
                                     "string", f"offered_init_params[{i}]")
        if version != PROTOCOL_VERSION:
            raise RpcError(PROTOCOL_VERSION_MISMATCH,
                           f"this adapter speaks adapter protocol {PROTOCOL_VERSION} only",
                           {"supported": [PROTOCOL_VERSION], "requested": version})
        log(f"initialize from {bridge['name']} {bridge['version']}, offered {offered}")
        # Init params the bridge cannot offer are simply never passed. The declaration stays the
        # same, and the bridge passes the intersection.
        respond(DECLARATION)

    # ── detect ───────────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request, on a short-lived process. Always required. Deadline 30 s.
    # Is the agent installed on this machine? The usual implementation finds `cli_binary` on PATH
    # (shutil.which) and runs it with --version. Adapters for HTTP- or config-based agents probe
    # whatever fits. detect must not start a session or change anything.
    # Params: none. Result: {installed: bool, version?: str, path?: str, reason?: str}. `reason`
    # says why it is not installed, or why detection is unsure, for a person.
    # The echo agent is built into this file, so it is always installed.
    def detect(self, params, respond):
        respond({"installed": True, "version": ADAPTER_VERSION})

    # ── start ────────────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request. Always required. Deadline 120 s. The first call after `initialize`
    # on a session process (a process that receives `start` is a session process) and the only
    # `start` it gets.
    # Start or connect to the agent for this session, and resume `resume_session_id` when given.
    #
    # Params: the session id plus only the init params listed in accepted_init_params:
    #   session_id         string        the terminull session this process serves. Minted by the
    #                                    bridge, and distinct from the agent's own session id.
    #   cwd                string, opt.  working directory for the agent
    #   model              string, opt.  model to use
    #   binary             string, opt.  agent CLI path (only if `binary` is accepted; not here)
    #   resume_session_id  string, opt.  the agent's own session to resume
    #   effort             string, opt.  reasoning effort
    # Result: {"agent_info": {...}}, the body of the session's agent_info block without type, ts
    # and seq (the bridge stamps those and sends it as the session's first block):
    #   agent_id, name, version?, model?, the ten flags (repeated from the declaration, which is
    #   the source of truth) and slash_commands (the agent's own; may be []).
    # Errors: -32000 when the agent needs the user to log in, -32010 when the agent CLI fails to
    # start (including refusing its arguments, e.g. an unknown model), and -32002 when
    # resume_session_id names a session the agent does not know.
    def start(self, params, respond):
        s = self.session
        session_id = field("start", params, "session_id", "string", required=True)
        cwd = field("start", params, "cwd", "string")
        model = field("start", params, "model", "string")
        resume = field("start", params, "resume_session_id", "string")
        effort = field("start", params, "effort", "string")
        if s.started:
            raise RpcError(BUSY, "this process already serves a session; one process serves "
                           "exactly one session")
        if model is not None and model not in {m["id"] for m in MODELS}:
            raise RpcError(AGENT_ERROR, f"echo-py refused its arguments: unknown model {model}")
        if resume is not None and not resume.startswith("echo-py-"):
            raise RpcError(NOT_FOUND, f"no echo-py session {resume}")
        s.started = True
        s.session_id = session_id
        s.cwd = cwd              # a real adapter runs its agent CLI in this directory
        s.model = model or DEFAULT_MODEL
        s.effort = effort        # a real adapter passes it to the agent (e.g. --effort high)
        # The agent's own conversation id. A resumed session continues under the id it had. A new
        # one gets an id derived from the terminull session id, so it is stable: the same session
        # always reports the same id.
        derived = uuid.uuid5(uuid.NAMESPACE_URL, "terminull:" + session_id)
        s.agent_session_id = resume or f"echo-py-{derived}"
        log(f"start session {session_id} cwd={cwd!r} model={s.model} effort={effort!r} "
            f"resume={resume!r}")
        info = {"agent_id": DECLARATION["agent_id"], "name": DECLARATION["display_name"],
                "version": ADAPTER_VERSION, "model": s.model}
        for flag in CAPABILITY_FLAGS:
            info[flag] = DECLARATION[flag]
        info["slash_commands"] = SLASH_COMMANDS
        respond({"agent_info": info})
        # on_session_id is accepted, so report the agent's id as soon as it is known. For the
        # echo agent, that is now. A CLI usually prints its id early in the first turn. Send the
        # notification again whenever the id changes (some CLIs mint a new id on resume).
        if "on_session_id" in DECLARATION["accepted_init_params"]:
            self.wire.notify("session_id", {"agent_session_id": s.agent_session_id})

    # ── send ─────────────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request, on a session process. Always required. The acknowledgement's
    # deadline is 20 s. The turn itself has no deadline.
    # One user message, the body of a user_message block:
    #   text         string      the message text. Agent slash commands arrive as text
    #                            ("/compact").
    #   attachments  array, opt. files {name, mime_type, data (standard base64 with padding)};
    #                            images only with cap_images, other files only with cap_documents.
    # Result: {}. Answer at once, as soon as the message is accepted, then stream the turn with
    # `stream` notifications that end with exactly one session_end. Never hold the response until
    # the turn ends.
    # Without cap_input_during_turn, the bridge does not send `send` during a turn. If one arrives
    # anyway, answer -32003 (busy). With cap_input_during_turn, it is fed into the running turn,
    # which still ends with a single session_end.
    def send(self, params, respond):
        s = self.session
        text = field("send", params, "text", "string", required=True)
        attachments = field("send", params, "attachments", "array", nullable=False)
        for i, att in enumerate(attachments or []):
            if not isinstance(att, dict):
                raise invalid_params("send", f"invalid type: {describe(att)}, expected an object",
                                     f"attachments[{i}]")
            for key in ("name", "mime_type", "data"):
                field("send", att, key, "string", required=True, path=f"attachments[{i}].{key}")
        if attachments:
            raise invalid_params("send", "this adapter takes no attachments (cap_images and "
                                 "cap_documents are false)", "attachments")
        with s.lock:
            if not s.started:
                raise RpcError(BUSY, "no session yet: `start` comes before `send`")
            if s.turn is not None:
                raise RpcError(BUSY, "a turn is running and this adapter does not take input "
                               "during a turn")
            s.turns += 1
            s.turn = Turn(s, text)
            respond({})          # the acknowledgement goes out before any block of the turn
            s.turn.thread.start()

    # ── stream (notification, adapter -> bridge) ─────────────────────────────────────────────────
    # Always required: every turn is delivered this way. Params: {"block": {...}}, one block. The
    # adapter sets `type`, `ts` (a float) and the type's fields, and may add `_meta`. It never sets
    # `seq`. The bridge validates every block (docs/block-protocol.md) and refuses and logs one with
    # an unknown type, a missing field or a field of the wrong type. Unknown extra fields are
    # dropped. See Wire.stream and Turn._run. Only thinking blocks with cap_thinking, only
    # permission_request with cap_permissions, only parent_id with cap_subagents.

    # ── session_id (notification, adapter -> bridge) ─────────────────────────────────────────────
    # Required when accepted_init_params lists on_session_id. Params: {"agent_session_id": str},
    # the agent's own conversation id (Claude's session uuid, Codex's thread id, …). Send it
    # whenever the id becomes known or changes. The bridge persists it and passes it back as
    # resume_session_id in `start` after a bridge restart. An adapter whose agent has no resumable
    # id never sends it. See the end of `start`.

    # ── interrupt ────────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request, on a session process, only when cap_interrupt is true. Deadline
    # 20 s. Stop the running turn: answer {} at once, then end the turn. Every open tool call goes
    # to status "error" with its paired tool_result (is_error: true), open text and thinking get
    # their done: true chunk, and the turn's one session_end has reason "interrupted". That is
    # never an error. Pending permission requests count as refused. With no turn running,
    # interrupt does nothing and is answered {}.
    # Params: none. Result: {}.
    def interrupt(self, params, respond):
        s = self.session
        respond({})
        with s.lock:
            turn = s.turn
        if turn is not None and turn.request_end("interrupted"):
            log("interrupting the running turn")

    # ── permission_response (not declared: cap_permissions is false) ─────────────────────────────
    # Bridge -> adapter request, on a session process, only when cap_permissions is true. Deadline
    # 20 s. The user's answer to a permission_request block the adapter streamed:
    #   request_id  string  the permission_request answered
    #   option_id   string  the id of the chosen option (a PermissionOption of the request, whose
    #                       kind is allow_once, allow_always, reject_once or reject_always)
    # Result: {}. Answer at once and let the turn go on. There is no permission timeout: the
    # request waits until it is answered, the turn is interrupted or the session stops. An unknown
    # or already answered request_id gets -32002. To implement it: set cap_permissions to true,
    # stream {"type": "permission_request", "request_id": …, "tool": …, "input": …, "options":
    # [...], "tool_call_id": …}, and handle it like this:
    #
    #     def permission_response(self, params, respond):
    #         rid = field("permission_response", params, "request_id", "string", required=True)
    #         opt = field("permission_response", params, "option_id", "string", required=True)
    #         waiter = self.pending_permissions.pop(rid, None)
    #         if waiter is None:
    #             raise RpcError(NOT_FOUND, f"no pending permission request {rid}")
    #         respond({})
    #         waiter.set_answer(opt)   # wakes the turn, which runs or refuses the tool
    #
    # Because the flag is false, this adapter never registers it, and a call is answered -32601.

    # ── list_models ──────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request, to fill the new-session model picker (no session exists yet, so
    # it usually comes on a short-lived process). Only when provides_models is true. Deadline 30 s.
    # Params: none. Result: {"models": [{id, name, description?, is_default}]}. The chosen id comes
    # back to `start` as `model`, if `model` is in accepted_init_params.
    def list_models(self, params, respond):
        respond({"models": MODELS})

    # ── get_usage ────────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request, on a session process, during or between turns. Only when
    # provides_usage is true. Deadline 20 s. Cost and token totals of the session so far, for
    # /status.
    # Params: none. Result: a usage object, every field optional: input_tokens, output_tokens,
    # cache_read_tokens, cache_write_tokens (integers) and cost_usd (a number). Report what the
    # agent knows, and {} when it knows nothing. The echo agent counts words as "tokens" and costs
    # nothing.
    def get_usage(self, params, respond):
        s = self.session
        respond({"input_tokens": s.totals["input_tokens"],
                 "output_tokens": s.totals["output_tokens"], "cost_usd": 0.0})

    # ── stop ─────────────────────────────────────────────────────────────────────────────────────
    # Bridge -> adapter request, on a session process. Always required. Deadline 15 s.
    # End the session. If a turn is running, end it with a session_end of reason "stopped" (open
    # tool calls closed as for interrupt). Then stop or release the agent, answer {} and exit. The
    # turn's last blocks must come before the response.
    # Params: none. Result: {}.
    #
    # Shutdown ladder (§4.4). The bridge moves to the next step only while the process is alive:
    #   1. `stop`, waiting up to 15 s for the answer. The adapter exits on its own after answering.
    #   2. It closes stdin. An adapter must exit at EOF, whether or not `stop` came first.
    #   3. SIGTERM: end the agent's processes and exit. Python's default SIGTERM action ends this
    #      process. An adapter with agent children would terminate them first.
    #   4. SIGKILL to the process group. The bridge starts each adapter as the leader of a new
    #      process group, so agent CLIs you spawn die with it. Never move your children to another
    #      process group or session (no setsid, no start_new_session=True).
    def stop(self, params, respond):
        self.session.end_running_turn("stopped")
        respond({})
        self.exiting = True

    # ─────────────────────────────────────────────────────────────────────────────────────────────
    # Handoff hooks (§5.4): not declared by this adapter
    # ─────────────────────────────────────────────────────────────────────────────────────────────
    #
    # A session can be driven from two surfaces over its life: the agent's CLI in a terminal, and
    # terminull. The rule is one writer, many observers: terminull never becomes a second,
    # concurrent writer to a conversation that a terminal drives. Each hook is optional, and an
    # adapter that lists none opts out of handoff. To implement one: write the method, list its
    # name in DECLARATION["handoff_hooks"], and the constructor registers it.
    #
    # The flow: scan_external_sessions lists CLI sessions in the app, and tapping one binds a
    # terminull session to it. If is_cwd_externally_owned says a terminal owns the directory, the
    # bridge parks the session: it queues the user's messages and polls a read-only `mirror`
    # instead of writing. When the terminal goes idle, the bridge re-resolves the head with
    # latest_sid_for_cwd and drains the queue. The other way, "Continue in Terminal" calls
    # `release` on an idle live session, shows terminal_resume_command, and re-parks the session
    # as a mirror.
    #
    # Every hook except `release` runs on a short-lived process: one or more calls after
    # initialize, then stdin closes. Keep nothing in memory that a later call relies on, because the
    # next call may come on a fresh process.
    #
    # scan_external_sessions. Deadline 30 s. Lists the sessions the agent's CLI started outside the
    #   bridge, read from its own on-disk store, newest first, for the app's sidebar.
    #   Params: {cwd?: str (only this directory), limit?: int (at most this many)}.
    #   Result: {"sessions": [{agent_session_id, cwd?, title?, updated_at (float Unix seconds),
    #   message_count?}]}.
    #
    #     def scan_external_sessions(self, params, respond):
    #         cwd = field("scan_external_sessions", params, "cwd", "string")
    #         limit = field("scan_external_sessions", params, "limit", "uint")
    #         sessions = read_my_cli_transcript_index(cwd)   # newest first
    #         respond({"sessions": sessions[:limit] if limit is not None else sessions})
    #
    # is_cwd_externally_owned. Deadline 20 s. Is a native agent process, not one of the bridge's,
    #   driving this directory (and session) right now? While the answer is true, the bridge parks
    #   the session instead of writing to it.
    #   Params: {cwd: str, agent_session_id?: str}. Result: {owned: bool, pid?: int}.
    #
    #     def is_cwd_externally_owned(self, params, respond):
    #         cwd = field("is_cwd_externally_owned", params, "cwd", "string", required=True)
    #         pid = find_native_cli_process(cwd)   # e.g. scan /proc/*/cwd for the CLI
    #         respond({"owned": True, "pid": pid} if pid else {"owned": False})
    #
    # mirror. Deadline 20 s. The spec's make_transcript_mirror. Reads a terminal-owned session's
    #   transcript from a cursor and returns it as blocks (without seq), which the bridge streams to
    #   the app as a read-only mirror. Read-only: never write to the session, start the agent or
    #   take a lock the CLI would notice. The bridge polls and passes back each result's cursor. The
    #   cursor is opaque to the bridge, and must let a fresh process continue (a byte offset or a
    #   line number, say).
    #   Params: {cwd: str, agent_session_id: str, cursor?: str (absent: from the start)}.
    #   Result: {"blocks": [...] (may be empty), "cursor": str}.
    #
    #     def mirror(self, params, respond):
    #         cwd = field("mirror", params, "cwd", "string", required=True)
    #         sid = field("mirror", params, "agent_session_id", "string", required=True)
    #         cursor = field("mirror", params, "cursor", "string")
    #         path = transcript_path(cwd, sid)
    #         if path is None:
    #             raise RpcError(NOT_FOUND, f"no transcript for session {sid}")
    #         offset = int(cursor.split(":")[1]) if cursor else 0
    #         blocks, offset = transcript_to_blocks(path, offset)
    #         respond({"blocks": blocks, "cursor": f"offset:{offset}"})
    #
    # latest_sid_for_cwd. Deadline 20 s. The newest session of a directory: the lineage head after
    #   a terminal hand-back. Resuming in a terminal can mint a new id, so the bridge re-resolves
    #   the head before it attaches.
    #   Params: {cwd: str}. Result: {agent_session_id?: str}, which is {} when there is none.
    #
    #     def latest_sid_for_cwd(self, params, respond):
    #         cwd = field("latest_sid_for_cwd", params, "cwd", "string", required=True)
    #         sid = newest_session_in(cwd)
    #         respond({"agent_session_id": sid} if sid else {})
    #
    # terminal_resume_command. Deadline 20 s. The command that continues the session in a
    #   terminal (the app's "Continue in Terminal"), as an argument vector, not a shell string, so
    #   that nothing needs quoting.
    #   Params: {agent_session_id: str, cwd?: str}. Result: {argv: [str], cwd?: str}.
    #
    #     def terminal_resume_command(self, params, respond):
    #         sid = field("terminal_resume_command", params, "agent_session_id", "string",
    #                     required=True)
    #         cwd = field("terminal_resume_command", params, "cwd", "string")
    #         result = {"argv": ["acme", "--resume", sid]}
    #         if cwd is not None:
    #             result["cwd"] = cwd
    #         respond(result)
    #
    # release. Deadline 15 s. On a session process, between turns only. A persistent adapter lets
    #   go of its agent (ends the long-lived subprocess, or detaches from the server) so that a
    #   terminal can take the conversation over without two writers. Answer {} once the agent no
    #   longer holds the conversation. The process stays up: the bridge then stops it, or sends
    #   turns again when the terminal hands back. Before such a turn, the adapter resumes the
    #   conversation by its agent session id. It has nothing to do on a per_turn adapter like this
    #   one.
    #   Params: none. Result: {}.
    #
    #     def release(self, params, respond):
    #         self.agent_process.terminate(); self.agent_process.wait()
    #         self.agent_process = None        # the next send resumes agent_session_id first
    #         respond({})


def main():
    wire = Wire(take_protocol_stdout())
    adapter = Adapter(wire)
    log(f"echo-py {ADAPTER_VERSION} ready (pid {os.getpid()})")
    try:
        adapter.run(sys.stdin.buffer)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
