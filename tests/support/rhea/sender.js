// An unsettled rhea sender: node sender.js PORT USER PASSWORD HOSTNAME ADDRESS
// reads message ids (one JSON list) on stdin, sends each with its id as the body and
// message-id, and prints "sent ID" when it goes and "accepted ID" or "refused ID STATE"
// per settlement; exits 0 when
// every one is settled, 3 when the connection ends first (no reconnect: the caller
// starts it again for what was not accepted).
'use strict';
const container = require('rhea');

const [port, username, password, hostname, address] = process.argv.slice(2);
let input = '';
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => run(JSON.parse(input)));

function run(ids) {
  let pending = ids.length;
  if (!pending) process.exit(0);
  const connection = container.connect({
    host: '127.0.0.1', port: Number(port), username, password, hostname, reconnect: false,
  });
  const done = (code) => { process.stdout.write('', () => process.exit(code)); };
  setTimeout(() => done(3), 20000);  // a stalled connection counts as lost
  connection.on('disconnected', () => done(3));
  connection.on('connection_close', () => done(3));
  connection.on('connection_error', () => done(3));
  const sender = connection.open_sender({ target: { address }, autosettle: true });
  let next = 0;
  const settle = (id, line) => {
    process.stdout.write(line + '\n');
    if (--pending === 0) { connection.close(); done(0); }
  };
  sender.on('accepted', (context) => settle(0, `accepted ${context.delivery.tag_id}`));
  sender.on('rejected', (context) => settle(0, `refused ${context.delivery.tag_id} rejected`));
  sender.on('released', (context) => settle(0, `refused ${context.delivery.tag_id} released`));
  sender.on('modified', (context) => settle(0, `refused ${context.delivery.tag_id} modified`));
  sender.on('sendable', () => {
    while (sender.sendable() && next < ids.length) {
      const id = ids[next++];
      const delivery = sender.send({ message_id: String(id), body: String(id), durable: true });
      delivery.tag_id = id;
      process.stdout.write(`sent ${id}\n`);
    }
  });
}
