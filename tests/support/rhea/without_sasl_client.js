// rhea connecting without SASL, as rhea's brokered examples do (no user name given):
//   node without_sasl_client.js PORT
// Prints one JSON line once the socket is closed: {opened, error: {condition, description}
// | null, closed}; exits 2 when that did not happen within 10 s.
'use strict';
const container = require('rhea');

const port = Number(process.argv[2]);
const result = { opened: false, error: null, closed: false };
const timer = setTimeout(() => report(2), 10000);
const connection = container.connect({ host: '127.0.0.1', port, hostname: 'vhost:/', reconnect: false });

connection.on('connection_open', () => {
  result.opened = true;
});
connection.on('connection_error', (context) => {
  const error = context.connection.error;
  result.error = error ? { condition: error.condition, description: error.description } : null;
});
connection.on('connection_close', () => {
  result.closed = true;
});
connection.on('disconnected', (context) => {
  result.error = result.error || { condition: null, description: String(context.error) };
});
connection.socket.on('close', () => report(0));

function report(status) {
  clearTimeout(timer);
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(status));
}
