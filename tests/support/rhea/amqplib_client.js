// amqplib (the Node.js AMQP 0-9-1 client) against a gateway, through its callback API:
//   node amqplib_client.js update-secret PORT USER PASSWORD NEW_SECRET
//   node amqplib_client.js fill-and-close PORT USER PASSWORD
// Prints one JSON line of what happened and exits 0; exits 2 on a timeout.
//
// update-secret: connection.update-secret with NEW_SECRET, then a publish and a get on a
// fresh channel: {updated, delivered} or, when the gateway closes the connection,
// {error: {code, message}}.
// fill-and-close: publishes to an exclusive queue until the channel's send buffer is full
// (sendToQueue returns false, as amqplib's own test suite does), then closes the
// connection at once: {sent, closed} once the close callback fired, or {error}.
'use strict';
const amqp = require('amqplib/callback_api');

const [command, port, user, password, newSecret] = process.argv.slice(2);
const url = `amqp://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/%2F`;
const timer = setTimeout(() => finish({ error: { message: 'timed out' } }, 2), 20000);
let done = false;

function finish(result, status = 0) {
  if (done) return;
  done = true;
  clearTimeout(timer);
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(status));
}

function failure(err) {
  return { error: { code: err && err.code, message: String(err && err.message) } };
}

amqp.connect(url, { heartbeat: 0 }, (err, connection) => {
  if (err) return finish(failure(err));
  connection.on('error', (e) => finish(failure(e)));
  if (command === 'update-secret') updateSecret(connection);
  else if (command === 'fill-and-close') fillAndClose(connection);
  else finish({ error: { message: `unknown command ${command}` } }, 2);
});

function updateSecret(connection) {
  connection.updateSecret(Buffer.from(newSecret), 'rotated', (err) => {
    if (err) return finish(failure(err));
    connection.createChannel((err, channel) => {
      if (err) return finish(failure(err));
      channel.assertQueue('', { exclusive: true }, (err, ok) => {
        if (err) return finish(failure(err));
        channel.sendToQueue(ok.queue, Buffer.from('after update-secret'));
        channel.get(ok.queue, { noAck: true }, (err, message) => {
          if (err) return finish(failure(err));
          const delivered = message ? message.content.toString() : null;
          connection.close(() => finish({ updated: true, delivered }));
        });
      });
    });
  });
}

function fillAndClose(connection) {
  connection.createChannel((err, channel) => {
    if (err) return finish(failure(err));
    channel.assertQueue('', { exclusive: true }, (err, ok) => {
      if (err) return finish(failure(err));
      let sent = 0;
      while (channel.sendToQueue(ok.queue, Buffer.from(`message ${sent}`))) sent++;
      sent++;  // the one that filled the buffer was queued too
      connection.close((err) => finish(err ? failure(err) : { sent, closed: true }));
    });
  });
}
