// A rhea receiver with a source filter:
//   node filter_receiver.js PORT USER PASSWORD ADDRESS KIND VALUE COUNT
// KIND: "selector" (rhea's filter.selector helper: a numeric descriptor) or "raw" (VALUE is
// a JSON object {key: [descriptor symbol, value]}, sent as a filter map of described values).
// Prints one JSON line {"echoed": [filter keys of our attach reply]} once attached, then
// {"body": ...} per message (accepted), and exits 0 after COUNT messages; on a refused
// attach prints {"error": {condition, description}} and exits 0; exits 3 on a timeout.
'use strict';
const container = require('rhea');

const [port, username, password, address, kind, value, count] = process.argv.slice(2);
let filter;
if (kind === 'selector') {
  filter = container.filter.selector(value);
} else {
  filter = {};
  for (const [key, [descriptor, v]] of Object.entries(JSON.parse(value))) {
    filter[key] = container.types.wrap_described(v, descriptor);
  }
}
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const done = (code) => { process.stdout.write('', () => process.exit(code)); };
setTimeout(() => done(3), 15000);
const connection = container.connect({
  host: '127.0.0.1', port: Number(port), username, password, hostname: 'vhost:/', reconnect: false,
});
let left = Number(count);
const receiver = connection.open_receiver({ source: { address, filter }, autoaccept: true });
receiver.on('receiver_open', (context) => {
  const source = context.receiver.remote.attach.source || {};
  const echoed = source.filter || {};
  out({ echoed: Object.keys(echoed) });
  if (left === 0) { connection.close(); done(0); }
});
receiver.on('message', (context) => {
  let body = context.message.body;
  if (body && body.content) body = body.content.toString();
  out({ body });
  if (--left === 0) { connection.close(); done(0); }
});
receiver.on('receiver_error', (context) => {
  const error = context.receiver.error || {};
  out({ error: { condition: error.condition, description: error.description } });
  done(0);
});
