// The live dashboard: polls the management API every few seconds (the browser sends the
// credentials it was asked for when it loaded the page) and redraws the tables. Rates are
// the change of the API's counters between two polls.
"use strict";
const INTERVAL_MS = Number(new URLSearchParams(location.search).get("interval") || 2000);
let previous = null;  // {at, queues: {key: stats}, exchanges: {...}, overview}

async function api(path) {
  const response = await fetch("/api/" + path, {headers: {"Accept": "application/json"}});
  if (!response.ok) throw new Error(path + ": " + response.status + " " + response.statusText);
  return response.json();
}

function get(obj, dotted) {
  return dotted.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function rate(now, before, seconds) {
  if (before == null || now == null || seconds <= 0) return "";
  return Math.max(0, (now - before) / seconds).toFixed(1);
}

function cell(tr, value, field) {
  const td = document.createElement("td");
  td.textContent = value == null ? "" : String(value);
  if (typeof value === "number" || /^[0-9.]+$/.test(td.textContent)) td.className = "num";
  if (field) td.dataset.field = field;
  tr.appendChild(td);
}

// one row per entity, found by tests and scripts as tr[data-vhost][data-name]
function fill(id, rows, columns) {
  const body = document.querySelector("#" + id + " tbody");
  const fresh = document.createElement("tbody");
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.dataset.name = row.name;
    if (row.vhost !== undefined) tr.dataset.vhost = row.vhost;
    for (const [field, value] of columns(row)) cell(tr, value, field);
    fresh.appendChild(tr);
  }
  body.replaceWith(fresh);
}

function stat(name, value) {
  document.querySelector('[data-stat="' + name + '"]').textContent = value == null ? "-" : value;
}

const queueKey = q => JSON.stringify([q.vhost, q.name]);

async function refresh() {
  const [overview, connections, queues, exchanges, remotes] = await Promise.all([
    api("overview"), api("connections"), api("queues"), api("exchanges"),
    api("gateway/remotes")]);
  const at = Date.now() / 1000;
  const seconds = previous ? at - previous.at : 0;
  document.getElementById("node").textContent =
    (overview.product_version ? overview.product_version + " " : "") + (overview.node || "");
  const byProtocol = {};
  for (const c of connections) {
    const p = String(c.protocol || "").includes("1.0") ? "amqp10" : "amqp091";
    byProtocol[p] = (byProtocol[p] || 0) + 1;
  }
  stat("connections", connections.length);
  stat("connections_amqp091", byProtocol.amqp091 || 0);
  stat("connections_amqp10", byProtocol.amqp10 || 0);
  stat("channels", get(overview, "object_totals.channels"));
  stat("queues", queues.length);
  stat("messages", queues.reduce((n, q) => n + (q.messages || 0), 0));
  const published = get(overview, "message_stats.publish");
  const delivered = get(overview, "message_stats.deliver_get");
  stat("publish_rate", previous ? rate(published, get(previous.overview, "message_stats.publish"), seconds) : "-");
  stat("deliver_rate", previous ? rate(delivered, get(previous.overview, "message_stats.deliver_get"), seconds) : "-");
  const alarms = overview.alarms || [];
  const alarmText = document.getElementById("alarms");
  alarmText.textContent = alarms.length ? alarms.join(", ") : "none";
  alarmText.className = alarms.length ? "raised" : "";
  fill("connections", connections, c => [
    ["name", c.name], ["user", c.user], ["vhost", c.vhost], ["protocol", c.protocol],
    ["peer", c.peer || ((c.peer_host || "") + (c.peer_port ? ":" + c.peer_port : ""))],
    ["channels", c.channels]]);
  const before = previous ? previous.queues : {};
  fill("queues", queues, q => {
    const old = before[queueKey(q)];
    return [["vhost", q.vhost], ["name", q.name], ["messages", q.messages],
      ["messages_ready", q.messages_ready], ["messages_unacknowledged", q.messages_unacknowledged],
      ["consumers", q.consumers],
      ["publish_rate", rate(get(q, "message_stats.publish"), get(old, "message_stats.publish"), seconds)],
      ["deliver_rate", rate(get(q, "message_stats.deliver_get"), get(old, "message_stats.deliver_get"), seconds)]];
  });
  const xBefore = previous ? previous.exchanges : {};
  fill("exchanges", exchanges, x => [
    ["vhost", x.vhost], ["name", x.name || "(default)"], ["type", x.type], ["durable", x.durable],
    ["publish_rate", rate(get(x, "message_stats.publish_in"),
                          get(xBefore[queueKey(x)], "message_stats.publish_in"), seconds)]]);
  fill("remotes", remotes, r => [
    ["name", r.name], ["state", r.state], ["outbox_depth", r.outbox_depth], ["forwarded", r.forwarded],
    ["last_error", r.last_error]]);
  previous = {at, overview, queues: Object.fromEntries(queues.map(q => [queueKey(q), q])),
              exchanges: Object.fromEntries(exchanges.map(x => [queueKey(x), x]))};
}

async function loop() {
  const status = document.getElementById("status");
  try {
    await refresh();
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "";
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  } catch (error) {
    status.textContent = "cannot reach the API: " + error.message;
    status.className = "failed";
  }
  setTimeout(loop, INTERVAL_MS);
}
loop();
