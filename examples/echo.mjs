#!/usr/bin/env node
// terminull example adapter "Echo (Node)", agent id `echo-node`. Node 20 or newer, no dependencies.
//
// A compact but complete adapter for protocol version 1. It answers every message with
// "You said: <text>", streamed word by word as `text` chunks under one id, then one `done: true`
// chunk and a `session_end` of reason "completed". Its declaration is minimal: every capability
// flag is false, there are no models, no usage and no handoff hooks, the lease is per_turn and only
// `cwd` is accepted. The calls it answers are initialize, detect, start, send and stop. Anything
// else is -32601. For every method, flag and init param explained at length, see
// ext_adapter_example.py beside this file. The contract is docs/adapter-protocol.md.
//
// Rules this file follows: stdout carries protocol only, one compact JSON object per line. Logs go
// to stderr. Responses echo the request id. Absent or null params mean {}. `send` is answered {}
// before the turn streams. `stop` closes a running turn with reason "stopped", answers {} and
// exits. EOF on stdin exits too.

import { createInterface } from "node:readline";

const DECLARATION = {
  protocol_version: 1,
  agent_id: "echo-node",
  display_name: "Echo (Node)",
  adapter_version: "1.0.0",
  cap_images: false,
  cap_documents: false,
  cap_thinking: false,
  cap_permissions: false,
  cap_subagents: false,
  cap_interrupt: false,
  cap_input_during_turn: false,
  cap_terminal: false,
  provides_models: false,
  provides_usage: false,
  lease: "per_turn",
  accepted_init_params: ["cwd"],
  handoff_hooks: [],
};
const FLAGS = [
  "cap_images", "cap_documents", "cap_thinking", "cap_permissions", "cap_subagents",
  "cap_interrupt", "cap_input_during_turn", "cap_terminal", "provides_models", "provides_usage",
];

// stdout is the protocol channel, and a stray console.log would corrupt it, so send it to stderr.
console.log = console.error;
const log = (msg) => process.stderr.write(`[echo-node] ${msg}\n`);

// One message per line. Each write is one whole line, and Node keeps writes in order.
const write = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const result = (id, res) => write({ jsonrpc: "2.0", id, result: res });
const error = (id, code, message) => write({ jsonrpc: "2.0", id, error: { code, message } });
const stream = (block) => write({ jsonrpc: "2.0", method: "stream", params: { block } });
// `ts`: Unix seconds as a float. The sub-millisecond clock keeps it fractional, because JSON has no
// "1.0" and a whole Date.now() / 1000 would be written as an integer. Never set `seq`.
const now = () => (performance.timeOrigin + performance.now()) / 1000;
// Exit once everything written so far has reached the pipe.
const exitAfterFlush = (code) => process.stdout.write("", () => process.exit(code));

class RpcError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}
const describe = (v) =>
  v === null ? "null"
  : typeof v === "boolean" ? `boolean \`${v}\``
  : typeof v === "number" ? (Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``)
  : typeof v === "string" ? `string ${JSON.stringify(v)}`
  : Array.isArray(v) ? "sequence" : "map";
// Reads one field: a type check, `null` allowed for optional strings, unknown fields ignored.
function field(method, obj, key, type, required = false) {
  if (!(key in obj) || (obj[key] === null && !required)) {
    if (required) throw new RpcError(-32602, `invalid params for ${method}: missing field \`${key}\``);
    return undefined;
  }
  const v = obj[key];
  const ok = type === "array" ? Array.isArray(v)
    : type === "object" ? v !== null && typeof v === "object" && !Array.isArray(v)
    : type === "uint" ? Number.isInteger(v) && v >= 0
    : typeof v === type;
  if (!ok) {
    const want = { string: "a string", uint: "an unsigned integer", object: "an object", array: "an array" }[type];
    throw new RpcError(-32602, `invalid params for ${method}: ${key}: invalid type: ${describe(v)}, expected ${want}`);
  }
  return v;
}

// ── session state: one process serves one session ────────────────────────────────────────────
let started = false;
let stopping = false; // set by `stop`: the process is exiting, later input is ignored
let turn = null; // { id, text, pieces, timer } while a turn runs

function finishTurn(reason) {
  clearTimeout(turn.timer);
  if (turn.text) stream({ type: "text", ts: now(), id: turn.id, text: turn.text, done: true });
  stream({ type: "session_end", ts: now(), reason });
  turn = null;
}

function step() {
  if (turn.pieces.length === 0) return finishTurn("completed");
  turn.text += turn.pieces.shift();
  stream({ type: "text", ts: now(), id: turn.id, text: turn.text, done: false });
  turn.timer = setTimeout(step, 20);
}

const handlers = {
  // Bridge's first call on every process. The answer is the declaration.
  initialize(p) {
    const version = field("initialize", p, "protocol_version", "uint", true);
    const bridge = field("initialize", p, "bridge", "object", true);
    field("initialize", p, "offered_init_params", "array", true);
    if (typeof bridge.name !== "string" || typeof bridge.version !== "string") {
      throw new RpcError(-32602, "invalid params for initialize: bridge: expected {name, version} strings");
    }
    if (version !== 1) {
      const err = new RpcError(-32001, "this adapter speaks adapter protocol 1 only");
      err.data = { supported: [1], requested: version };
      throw err;
    }
    return DECLARATION;
  },
  // Is the agent installed? The echo agent is built in, so always.
  detect: () => ({ installed: true, version: DECLARATION.adapter_version }),
  // Start the session. Only `cwd` is accepted, so `cwd` is the only init param that arrives.
  start(p) {
    const sessionId = field("start", p, "session_id", "string", true);
    const cwd = field("start", p, "cwd", "string");
    if (started) throw new RpcError(-32003, "this process already serves a session");
    started = true;
    log(`start ${sessionId} cwd=${cwd ?? "(none)"}`);
    const info = { agent_id: DECLARATION.agent_id, name: DECLARATION.display_name, version: DECLARATION.adapter_version };
    for (const f of FLAGS) info[f] = DECLARATION[f];
    info.slash_commands = []; // the agent's own commands; the bridge adds its universal ones
    return { agent_info: info };
  },
  // One user message: acknowledge with {}, then stream the turn.
  send(p, respond) {
    const text = field("send", p, "text", "string", true);
    const attachments = p.attachments;
    if (attachments !== undefined && !Array.isArray(attachments)) {
      throw new RpcError(-32602, `invalid params for send: attachments: invalid type: ${describe(attachments)}, expected an array`);
    }
    if (attachments?.length) throw new RpcError(-32602, "invalid params for send: attachments: this adapter takes no attachments");
    if (!started) throw new RpcError(-32003, "no session yet: `start` comes before `send`");
    if (turn) throw new RpcError(-32003, "a turn is running and this adapter does not take input during a turn");
    respond({});
    const pieces = `You said: ${text}`.match(/\S+\s*|\s+/g);
    turn = { id: `msg-${crypto.randomUUID()}`, text: "", pieces, timer: null };
    turn.timer = setTimeout(step, 20);
  },
  // End the session: close a running turn as "stopped", answer {}, then exit on our own.
  stop(p, respond) {
    if (turn) finishTurn("stopped");
    respond({});
    stopping = true;
    exitAfterFlush(0);
  },
};

function handleLine(line, n) {
  if (stopping || !line.trim()) return; // blank lines are skipped
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (e) {
    return error(null, -32700, `line ${n} is not JSON (${e.message}): ${JSON.stringify(line.slice(0, 120))}`);
  }
  if (msg === null || typeof msg !== "object" || Array.isArray(msg)) {
    return error(null, -32600, `a JSON-RPC message must be an object, found ${describe(msg)}`);
  }
  const hasId = "id" in msg;
  const idOk = hasId && (typeof msg.id === "string" || Number.isInteger(msg.id));
  const id = idOk ? msg.id : null;
  if (msg.jsonrpc !== "2.0") return error(id, -32600, 'invalid request: "jsonrpc" must be "2.0"');
  if (!("method" in msg)) {
    if ("result" in msg || "error" in msg) return log(`ignoring an unexpected response (id ${msg.id})`);
    return error(id, -32600, "invalid request: neither a method nor a result or error");
  }
  if (hasId && !idOk) return error(null, -32600, `invalid request: bad id ${describe(msg.id)}`);
  if (typeof msg.method !== "string") return error(id, -32600, "invalid request: method must be a string");
  if (!hasId) return log(`ignoring notification ${msg.method}`);
  const handler = Object.hasOwn(handlers, msg.method) ? handlers[msg.method] : null;
  if (!handler) return error(id, -32601, `method not found: ${msg.method}`);
  const params = msg.params ?? {}; // absent or null params mean {}
  if (typeof params !== "object" || Array.isArray(params)) {
    return error(id, -32602, `invalid params for ${msg.method}: invalid type: ${describe(params)}, expected an object`);
  }
  let answered = false;
  const respond = (res) => { answered = true; result(id, res); };
  try {
    const res = handler(params, respond);
    if (!answered) respond(res);
  } catch (e) {
    if (answered) return log(`${msg.method}: ${e.message}`);
    if (e instanceof RpcError) {
      write({ jsonrpc: "2.0", id, error: { code: e.code, message: e.message, ...(e.data ? { data: e.data } : {}) } });
    } else {
      log(`${msg.method} failed: ${e.stack}`);
      error(id, -32603, `internal error in ${msg.method}: ${e.message}`);
    }
  }
}

let lineNo = 0;
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity }); // accepts \n and \r\n
rl.on("line", (line) => handleLine(line, ++lineNo));
// EOF on stdin: the bridge is done with this process. Close a running turn and exit.
rl.on("close", () => {
  if (turn) finishTurn("stopped");
  exitAfterFlush(0);
});
process.stdout.on("error", () => process.exit(0)); // the bridge stopped reading (EPIPE)
log(`echo-node ready (pid ${process.pid})`);
