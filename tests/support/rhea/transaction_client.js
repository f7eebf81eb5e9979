// A rhea client posting messages in an AMQP 1.0 transaction (rhea has no transaction API,
// so the coordinator, the control messages and the transactional-state are built from
// rhea's types): node transaction_client.js PORT USER PASSWORD ADDRESS COUNT FAIL
// Attaches a sender to the coordinator (capabilities amqp:local-transactions) and one to
// ADDRESS, declares, sends COUNT messages (data sections "t0", "t1", ...) each with a
// transactional-state naming the txn-id, and once all are settled prints
// {"posted": [outcome descriptors]} and waits for a line on stdin; then discharges with
// fail = FAIL ("true"/"false") and prints {"discharged": descriptor, "error": condition}.
// Prints {"declared": txn-id} after the declare; exits 0 when done, 3 on a timeout or a
// lost connection.
'use strict';
const container = require('rhea');
const frames = require('rhea/lib/frames.js');
const { types } = container;

const [port, username, password, address, count, fail] = process.argv.slice(2);
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const done = (code) => { process.stdout.write('', () => process.exit(code)); };
setTimeout(() => done(3), 20000);

const described = (code, fields) => types.described(types.wrap_ulong(code), types.wrap_list(fields));
// a control message: an amqp-value section holding a described list, encoded here (rhea's
// message encoder would overwrite the list's descriptor with the section's)
const control = (code, fields) => {
  const writer = new types.Writer();
  writer.write(described(code, fields));
  return Buffer.concat([Buffer.from([0x00, 0x53, 0x77]), writer.toBuffer()]);
};
const sendControl = (body) => coordinator.send(body, undefined, 0);
// a raw described value (what rhea leaves of the states it does not know: declared,
// transactional-state) or one of rhea's outcome objects
const descriptorOf = (state) => {
  if (!state) return null;
  if (state.descriptor) return Number(state.descriptor.value);
  return state.constructor.descriptor ? Number(state.constructor.descriptor.numeric) : null;
};

// rhea's transfer frame has no state: add the transactional-state of the deliveries that
// carry one (by delivery id; the links share one session)
const transferStates = new Map();
const transfer = frames.transfer;
frames.transfer = (fields) => {
  const frame = transfer(fields);
  const state = transferStates.get(fields.delivery_id);
  if (state !== undefined) {
    for (let i = 0; i < 7; i++) if (frame.value[i] === undefined) frame.value[i] = types.Null();
    frame.value[7] = state;  // the transfer's 'state' field
  }
  return frame;
};

const connection = container.connect({
  host: '127.0.0.1', port: Number(port), username, password, hostname: 'vhost:/', reconnect: false,
});
connection.on('disconnected', () => done(3));
const coordinator = connection.open_sender({ name: 'txn-ctrl', autosettle: true });
coordinator.local.attach.target = described(0x30, [types.wrap_symbol('amqp:local-transactions')]);
const sender = connection.open_sender({ target: { address }, autosettle: true });

let txnId = null;
let started = false;
const start = () => {
  if (started || !coordinator.sendable() || !sender.sendable()) return;
  started = true;
  const declare = sendControl(control(0x31, []));
  declare.on_settled = (state) => {
    if (descriptorOf(state) !== 0x33) { out({ declareFailed: descriptorOf(state), state: JSON.stringify(state) }); done(0); return; }
    txnId = Buffer.from(types.unwrap(state.value[0]));  // a copy: the frame's buffer is reused
    out({ declared: txnId.toString() });
    post();
  };
};
coordinator.on('sendable', start);
sender.on('sendable', start);

const settledHandler = (context) => {
  const d = context.delivery;
  if (d.on_settled) d.on_settled(d.remote_state);
};
coordinator.on('settled', settledHandler);
sender.on('settled', settledHandler);

function post() {
  const outcomes = [];
  for (let i = 0; i < Number(count); i++) {
    const state = described(0x34, [types.wrap_binary(txnId)]);
    transferStates.set(sender.session.outgoing.next_delivery_id, state);
    const d = sender.send({ body: container.message.data_section(Buffer.from(`t${i}`)), durable: true });
    d.on_settled = (remote) => {
      // transactional-state{txn-id, outcome}: the outcome's descriptor
      const inner = remote && remote.value ? remote.value[1] : null;
      outcomes.push([descriptorOf(remote), descriptorOf(inner)]);
      if (outcomes.length === Number(count)) {
        out({ posted: outcomes });
        process.stdin.once('data', discharge);
      }
    };
  }
}

function discharge() {
  const d = sendControl(control(0x32, [types.wrap_binary(txnId), fail === 'true' ? types.True() : types.False()]));
  d.on_settled = (state) => {
    const error = state && state.error ? [state.error.condition, state.error.description] : null;
    out({ discharged: descriptorOf(state), error });
    connection.close();
    connection.on('connection_close', () => done(0));
  };
}
