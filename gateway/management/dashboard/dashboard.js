// The dashboard: polls the management API and redraws the view the location's hash names
// (#/ overview, #/queue/VHOST/NAME, #/connection/NAME, #/admin); its forms call the same
// API as tools do. Signed in with the session cookie (the sign-in page), or with basic
// credentials the browser already sends; writes carry the session's CSRF token.
"use strict";
const INTERVAL_MS = Number(new URLSearchParams(location.search).get("interval") || 2000);
const CLIENT = "amqp-gateway-dashboard";
const enc = encodeURIComponent;
let previous = null;  // the last overview poll: {at, queues: {key: stats}, exchanges: {...}, overview}
let csrfToken = null;
let timer = null;

// Every URL is a path on this listener resolved against location.origin: a page opened as
// http://user:pass@host/ keeps the credentials in its document URL, a relative URL (even
// "/api/...") resolves against it and inherits them, and fetch refuses such a URL
// ("Request cannot be constructed from a URL that includes credentials"; what the
// dashboard did before issue 46). The origin never carries them.
function here(path) {
  return new URL(path, location.origin).toString();
}

async function request(method, path, body, headers) {
  const init = {method, credentials: "same-origin",
                headers: {"Accept": "application/json", "X-Requested-With": CLIENT, ...(headers || {})}};
  if (method !== "GET" && csrfToken) init.headers["X-CSRF-Token"] = csrfToken;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(here(path), init);
  if (response.status === 401) {
    location.assign(here("/login"));
    throw new Error("signed out");
  }
  const text = await response.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch (error) { value = {reason: text}; }
  if (!response.ok) {
    throw new Error((value && value.reason) || (response.status + " " + response.statusText));
  }
  return value;
}

const api = path => request("GET", "/api/" + path);

function get(obj, dotted) {
  return dotted.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function rate(now, before, seconds) {
  if (before == null || now == null || seconds <= 0) return "";
  return Math.max(0, (now - before) / seconds).toFixed(1);
}

// a cell: a value, or [text, href] for a link to a drill-down page, or a DOM node
function cell(tr, value, field) {
  const td = document.createElement("td");
  if (value instanceof Node) {
    td.appendChild(value);
  } else if (Array.isArray(value)) {
    const a = document.createElement("a");
    a.textContent = value[0];
    a.href = value[1];
    td.appendChild(a);
  } else {
    td.textContent = value == null ? "" : (typeof value === "object" ? JSON.stringify(value) : String(value));
    if (typeof value === "number" || /^[0-9.]+$/.test(td.textContent)) td.className = "num";
  }
  if (field) td.dataset.field = field;
  tr.appendChild(td);
}

// one row per entity, found by tests and scripts as tr[data-vhost][data-name]
function fill(id, rows, columns) {
  const body = document.querySelector("#" + id + " tbody");
  const fresh = document.createElement("tbody");
  for (const row of rows) {
    const tr = document.createElement("tr");
    if (row.name !== undefined) tr.dataset.name = row.name;
    if (row.vhost !== undefined) tr.dataset.vhost = row.vhost;
    for (const [field, value] of columns(row)) cell(tr, value, field);
    fresh.appendChild(tr);
  }
  body.replaceWith(fresh);
}

function button(text, action, className) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  if (className) b.className = className;
  b.addEventListener("click", () => act(action));
  return b;
}

function stat(name, value) {
  document.querySelector('[data-stat="' + name + '"]').textContent = value == null ? "-" : value;
}

function notice(text, failed) {
  const p = document.getElementById("notice");
  p.textContent = text;
  p.className = failed ? "failed" : "done";
}

// an operator's action: its outcome in the notice line, then the view redrawn at once
async function act(action) {
  try {
    notice(await action(), false);
  } catch (error) {
    notice(error.message, true);
  }
  schedule(0);
}

const queueKey = q => JSON.stringify([q.vhost, q.name]);
const queueHref = (vhost, name) => "#/queue/" + enc(vhost) + "/" + enc(name);
const connectionHref = name => "#/connection/" + enc(name);

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(p => p !== "").map(decodeURIComponent);
  if (parts[0] === "queue" && parts.length === 3) return {view: "queue", vhost: parts[1], name: parts[2]};
  if (parts[0] === "connection" && parts.length === 2) return {view: "connection", name: parts[1]};
  if (parts[0] === "admin") return {view: "admin"};
  return {view: "overview"};
}

// -- the views ---------------------------------------------------------------------------

async function refreshOverview() {
  const [overview, connections, queues, exchanges, remotes, rates] = await Promise.all([
    api("overview"), api("connections"), api("queues"), api("exchanges"),
    api("gateway/remotes"), api("gateway/rates")]);
  const at = Date.now() / 1000;
  const seconds = previous ? at - previous.at : 0;
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
  drawRates(document.getElementById("rates"), rates);
  fill("connections", connections, c => [
    ["name", [c.name, connectionHref(c.name)]], ["user", c.user], ["vhost", c.vhost], ["protocol", c.protocol],
    ["peer", c.peer || ((c.peer_host || "") + (c.peer_port ? ":" + c.peer_port : ""))],
    ["channels", c.channels]]);
  const before = previous ? previous.queues : {};
  fill("queues", queues, q => {
    const old = before[queueKey(q)];
    return [["vhost", q.vhost], ["name", [q.name, queueHref(q.vhost, q.name)]], ["messages", q.messages],
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
    ["dead_lettered", r.dead_lettered], ["last_error", r.last_error],
    ["redrive", button("Re-drive dead letters", async () => {
      const done = await request("POST", "/api/remotes/" + enc(r.name) + "/redrive");
      return `${done.redriven} dead letter(s) of remote '${r.name}' back in its outbox`;
    })]]);
  previous = {at, overview, queues: Object.fromEntries(queues.map(q => [queueKey(q), q])),
              exchanges: Object.fromEntries(exchanges.map(x => [queueKey(x), x]))};
}

async function refreshQueue(where) {
  const path = "queues/" + enc(where.vhost) + "/" + enc(where.name);
  const [queue, bindings] = await Promise.all([api(path), api(path + "/bindings")]);
  document.getElementById("queue-name").textContent = queue.name;
  document.getElementById("queue-vhost").textContent = queue.vhost;
  for (const dd of document.querySelectorAll("[data-queue]")) {
    const value = queue[dd.dataset.queue];
    dd.textContent = value == null || value === "" ? "-" : String(value);
  }
  document.getElementById("queue-arguments").textContent = JSON.stringify(queue.arguments || {});
  fill("queue-bindings", bindings, b => [
    ["source", b.source || "(default)"], ["routing_key", b.routing_key], ["arguments", b.arguments]]);
}

async function refreshConnection(where) {
  const [connection, channels] = await Promise.all([
    api("connections/" + enc(where.name)), api("channels")]);
  document.getElementById("connection-name").textContent = connection.name;
  const peer = (connection.peer_host || "") + (connection.peer_port ? ":" + connection.peer_port : "");
  for (const dd of document.querySelectorAll("[data-connection]")) {
    const field = dd.dataset.connection;
    const value = field === "peer" ? peer : connection[field];
    dd.textContent = value == null || value === "" ? "-" : String(value);
  }
  const own = channels.filter(ch => get(ch, "connection_details.name") === connection.name);
  fill("connection-channels", own, ch => [
    ["number", ch.number], ["consumer_count", ch.consumer_count],
    ["messages_unacknowledged", ch.messages_unacknowledged], ["prefetch_count", ch.prefetch_count],
    ["confirm", ch.confirm]]);
}

async function refreshAdmin() {
  const [users, vhosts, permissions] = await Promise.all([api("users"), api("vhosts"), api("permissions")]);
  fill("users", users, u => [
    ["name", u.name], ["tags", Array.isArray(u.tags) ? u.tags.join(", ") : u.tags],
    ["delete", button("Delete", async () => {
      await request("DELETE", "/api/users/" + enc(u.name));
      return `user '${u.name}' deleted`;
    }, "danger")]]);
  fill("vhosts", vhosts, v => [
    ["name", v.name], ["messages", v.messages],
    ["delete", button("Delete", async () => {
      await request("DELETE", "/api/vhosts/" + enc(v.name));
      return `vhost '${v.name}' deleted`;
    }, "danger")]]);
  fill("permissions", permissions.map(p => ({...p, name: p.user})), p => [
    ["user", p.user], ["vhost", p.vhost], ["configure", p.configure], ["write", p.write], ["read", p.read],
    ["delete", button("Clear", async () => {
      await request("DELETE", "/api/permissions/" + enc(p.vhost) + "/" + enc(p.user));
      return `permissions of '${p.user}' in vhost '${p.vhost}' cleared`;
    }, "danger")]]);
}

const VIEWS = {overview: refreshOverview, queue: refreshQueue, connection: refreshConnection,
               admin: refreshAdmin};

async function refresh() {
  const where = route();
  for (const main of document.querySelectorAll("main.view")) main.hidden = main.id !== "view-" + where.view;
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.className = a.dataset.nav === where.view ? "current" : "";
  }
  await VIEWS[where.view](where);
}

function schedule(delay) {
  clearTimeout(timer);
  timer = setTimeout(loop, delay);
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
  schedule(INTERVAL_MS);
}

// -- the forms ---------------------------------------------------------------------------

function onSubmit(id, action) {
  document.getElementById(id).addEventListener("submit", event => {
    event.preventDefault();
    act(() => action(new FormData(event.target), route()));
  });
}

const queuePath = where => "/api/queues/" + enc(where.vhost) + "/" + enc(where.name);

onSubmit("publish-form", async (form, where) => {
  const properties = {};
  if (form.get("content_type")) properties.content_type = form.get("content_type");
  if (form.get("persistent")) properties.delivery_mode = 2;
  const done = await request("POST", "/api/exchanges/" + enc(where.vhost) + "/amq.default/publish", {
    properties, routing_key: where.name, payload: form.get("payload"), payload_encoding: "string"});
  return done.routed ? `published to queue '${where.name}'` : `not routed: no queue '${where.name}'`;
});

onSubmit("get-form", async (form, where) => {
  const messages = await request("POST", queuePath(where) + "/get", {
    count: Number(form.get("count") || 1), ackmode: form.get("ackmode"), encoding: "auto"});
  fill("get-results", messages.map((m, i) => ({...m, name: String(i + 1)})), m => [
    ["index", m.name], ["payload", m.payload], ["payload_bytes", m.payload_bytes],
    ["redelivered", m.redelivered], ["exchange", m.exchange || "(default)"], ["routing_key", m.routing_key],
    ["message_count", m.message_count]]);
  return `${messages.length} message(s) got from queue '${where.name}'`;
});

onSubmit("purge-form", async (form, where) => {
  await request("DELETE", queuePath(where) + "/contents");
  return `queue '${where.name}' purged`;
});

onSubmit("delete-queue-form", async (form, where) => {
  await request("DELETE", queuePath(where));
  location.hash = "#/";
  return `queue '${where.name}' deleted`;
});

onSubmit("close-form", async (form, where) => {
  await request("DELETE", "/api/connections/" + enc(where.name), undefined,
                {"X-Reason": form.get("reason") || "closed from the dashboard"});
  location.hash = "#/";
  return `connection '${where.name}' closed`;
});

onSubmit("user-form", async form => {
  const tags = String(form.get("tags") || "").split(",").map(t => t.trim()).filter(t => t).join(",");
  await request("PUT", "/api/users/" + enc(form.get("name")), {password: form.get("password"), tags});
  return `user '${form.get("name")}' saved`;
});

onSubmit("vhost-form", async form => {
  await request("PUT", "/api/vhosts/" + enc(form.get("name")), {});
  return `vhost '${form.get("name")}' added`;
});

onSubmit("permission-form", async form => {
  await request("PUT", "/api/permissions/" + enc(form.get("vhost")) + "/" + enc(form.get("user")), {
    configure: form.get("configure"), write: form.get("write"), read: form.get("read")});
  return `permissions of '${form.get("user")}' in vhost '${form.get("vhost")}' set`;
});

document.getElementById("logout").addEventListener("click", async () => {
  try {
    await request("POST", "/logout");
  } finally {
    location.assign(here("/login"));
  }
});

window.addEventListener("hashchange", () => schedule(0));

async function start() {
  try {
    const session = await request("GET", "/session");
    csrfToken = session.csrf_token;
    document.getElementById("whoami").textContent = session.user;
    document.getElementById("logout").hidden = !session.signed_in;
    const overview = await api("overview");
    document.getElementById("node").textContent =
      (overview.product_version ? overview.product_version + " " : "") + (overview.node || "");
  } catch (error) {
    document.getElementById("status").textContent = "cannot reach the API: " + error.message;
  }
  loop();
}
start();
