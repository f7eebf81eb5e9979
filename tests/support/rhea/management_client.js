// AMQP Management requests with rhea: node management_client.js PORT USER PASSWORD NODE
// reads a JSON list of requests ({properties, body}) on stdin and prints one JSON line
// per reply ({properties, body}) in request order, then exits (status 2 on an error).
'use strict';
const container = require('rhea');

const [port, username, password, node] = process.argv.slice(2);
let input = '';
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => run(JSON.parse(input)));

function run(requests) {
  const connection = container.connect({
    host: '127.0.0.1', port: Number(port), username, password, hostname: 'vhost:/',
    reconnect: false,
  });
  const timer = setTimeout(() => fail('timed out'), 10000);
  const replies = [];
  let sender;
  const receiver = connection.open_receiver({ source: { dynamic: true } });
  receiver.on('receiver_open', () => {
    sender = connection.open_sender(node);
    sender.on('sendable', function send() {
      sender.removeListener('sendable', send);
      requests.forEach((request, i) => {
        sender.send({
          message_id: `req-${i}`,
          reply_to: receiver.source.address,
          application_properties: request.properties,
          body: request.body === undefined ? null : request.body,
        });
      });
    });
  });
  receiver.on('message', (context) => {
    const message = context.message;
    replies.push({ correlation_id: message.correlation_id,
                   properties: message.application_properties, body: message.body });
    if (replies.length === requests.length) {
      clearTimeout(timer);
      replies.forEach((r) => process.stdout.write(JSON.stringify(r) + '\n'));
      connection.close();
    }
  });
  connection.on('connection_close', () => process.exit(0));
  connection.on('error', (e) => fail(String(e)));
  connection.on('receiver_error', (c) => fail(String(c.receiver.error)));
  connection.on('sender_error', (c) => fail(String(c.sender.error)));
  function fail(text) {
    process.stderr.write(text + '\n');
    process.exit(2);
  }
}
