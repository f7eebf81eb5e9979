/* AMQP 0-9-1 load generator on librabbitmq (rabbitmq-c).
 *
 *   amqp091_load MODE [options]
 *   MODE  setup   declare (and purge) --queue (durable with --durable)
 *         delete  delete --queue
 *         send    publish --count messages of --size bytes (persistent with --durable)
 *         recv    consume until --count messages arrived (or --timeout s of silence)
 *         idle    open --connections connections (full handshake), print ready,
 *                 hold them until stdin closes
 *
 * send: to the default exchange with routing key --queue, or to --exchange with keys
 *       "<key-prefix><i>", i drawn from --topics; --hot-topics H / --hot-share F send a
 *       share F of the traffic to the first H topics.  --confirms turns on publisher
 *       confirms with at most --confirm-window unconfirmed messages.  --rate caps msgs/s.
 * recv: from --queue, or (with --exchange) --subscribers S connections, each with a
 *       server-named queue bound to the keys "<key-prefix><i>" with i % S == its index.
 *       basic.qos --prefetch; acks (multiple) every --ack-every messages.
 *       Prints {"event":"ready"} once consuming, then the result line.
 *
 * All output is JSON lines on stdout (see loadgen_common.h).  Exit status 0 unless the
 * arguments were wrong (2); broker errors are reported in the result's "error".
 */
#define _GNU_SOURCE
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loadgen_common.h"

typedef struct {
  const char *mode, *host, *user, *password, *vhost, *queue, *exchange, *key_prefix;
  int port, topics, hot_topics, subscribers, prefetch, confirms, confirm_window, ack_every;
  int connections, durable, frame_max;
  double hot_share, rate, timeout;
  size_t size;
  uint64_t count;
} opts_t;

static opts_t O = {.host = "127.0.0.1", .user = "guest", .password = "guest", .vhost = "/",
                   .queue = "bench", .exchange = NULL, .key_prefix = "bench.k.", .port = 5672,
                   .topics = 0, .hot_topics = 0, .subscribers = 1, .prefetch = 300,
                   .confirms = 0, .confirm_window = 300, .ack_every = 1, .connections = 1000,
                   .durable = 0, .frame_max = 131072, .hot_share = 0.5, .rate = 0, .timeout = 15,
                   .size = 100, .count = 100000};

static int reply_ok(amqp_rpc_reply_t r, const char *what, char *err, size_t errlen) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return 1;
    case AMQP_RESPONSE_NONE:
      snprintf(err, errlen, "%s: missing reply", what);
      return 0;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      snprintf(err, errlen, "%s: %s", what, amqp_error_string2(r.library_error));
      return 0;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = (amqp_connection_close_t *)r.reply.decoded;
        snprintf(err, errlen, "%s: connection closed %u %.*s", what, m->reply_code,
                 (int)m->reply_text.len, (char *)m->reply_text.bytes);
      } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = (amqp_channel_close_t *)r.reply.decoded;
        snprintf(err, errlen, "%s: channel closed %u %.*s", what, m->reply_code,
                 (int)m->reply_text.len, (char *)m->reply_text.bytes);
      } else {
        snprintf(err, errlen, "%s: server method 0x%08x", what, r.reply.id);
      }
      return 0;
  }
  return 0;
}

/* Connection with channel 1 open, or NULL with err set. */
static amqp_connection_state_t open_conn(char *err, size_t errlen, int with_channel) {
  amqp_connection_state_t c = amqp_new_connection();
  amqp_socket_t *s = amqp_tcp_socket_new(c);
  if (!s) {
    snprintf(err, errlen, "socket: out of memory");
    amqp_destroy_connection(c);
    return NULL;
  }
  int st = amqp_socket_open(s, O.host, O.port);
  if (st != AMQP_STATUS_OK) {
    snprintf(err, errlen, "connect %s:%d: %s", O.host, O.port, amqp_error_string2(st));
    amqp_destroy_connection(c);
    return NULL;
  }
  if (!reply_ok(amqp_login(c, O.vhost, 0, O.frame_max, 0, AMQP_SASL_METHOD_PLAIN, O.user,
                           O.password),
                "login", err, errlen)) {
    amqp_destroy_connection(c);
    return NULL;
  }
  if (with_channel) {
    amqp_channel_open(c, 1);
    if (!reply_ok(amqp_get_rpc_reply(c), "channel.open", err, errlen)) {
      amqp_destroy_connection(c);
      return NULL;
    }
  }
  return c;
}

static void close_conn(amqp_connection_state_t c) {
  amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(c, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(c);
}

static char **make_keys(int n) {
  char **keys = calloc((size_t)n, sizeof(char *));
  for (int i = 0; i < n; i++) {
    if (asprintf(&keys[i], "%s%d", O.key_prefix, i) < 0) exit(3);
  }
  return keys;
}

static int run_setup(int delete) {
  char err[512] = "";
  amqp_connection_state_t c = open_conn(err, sizeof err, 1);
  if (c) {
    if (delete) {
      amqp_queue_delete(c, 1, amqp_cstring_bytes(O.queue), 0, 0);
      reply_ok(amqp_get_rpc_reply(c), "queue.delete", err, sizeof err);
    } else {
      amqp_queue_declare(c, 1, amqp_cstring_bytes(O.queue), 0, O.durable, 0, 0, amqp_empty_table);
      if (reply_ok(amqp_get_rpc_reply(c), "queue.declare", err, sizeof err)) {
        amqp_queue_purge(c, 1, amqp_cstring_bytes(O.queue));
        reply_ok(amqp_get_rpc_reply(c), "queue.purge", err, sizeof err);
      }
    }
    close_conn(c);
  }
  printf("{\"role\":\"%s\",\"ok\":%s,\"error\":\"%s\"}\n", delete ? "delete" : "setup",
         err[0] ? "false" : "true", err);
  return 0;
}

/* ---- send ---------------------------------------------------------------------- */

typedef struct {
  unsigned char *acked; /* acked[tag] != 0 once confirmed; tags are 1-based */
  uint64_t contiguous;  /* every tag <= contiguous is confirmed */
  uint64_t confirmed, nacked;
} confirms_t;

static void confirm_tag(confirms_t *cf, uint64_t tag, int multiple, int nack, uint64_t sent) {
  if (tag > sent) tag = sent;
  uint64_t from = multiple ? cf->contiguous + 1 : tag;
  for (uint64_t t = from; t <= tag; t++) {
    if (!cf->acked[t]) {
      cf->acked[t] = 1;
      cf->confirmed++;
      if (nack) cf->nacked++;
    }
  }
  while (cf->contiguous < sent && cf->acked[cf->contiguous + 1]) cf->contiguous++;
}

/* Read one frame (waiting at most timeout_us, 0 = poll) and apply it.
 * Returns 1 when a frame was handled, 0 on timeout, -1 on a fatal error. */
static int pump_confirms(amqp_connection_state_t c, confirms_t *cf, uint64_t sent, long timeout_us,
                         char *err, size_t errlen) {
  amqp_frame_t f;
  struct timeval tv = {timeout_us / 1000000, timeout_us % 1000000};
  int st = amqp_simple_wait_frame_noblock(c, &f, &tv);
  if (st == AMQP_STATUS_TIMEOUT) return 0;
  if (st != AMQP_STATUS_OK) {
    snprintf(err, errlen, "wait confirms: %s", amqp_error_string2(st));
    return -1;
  }
  if (f.frame_type != AMQP_FRAME_METHOD) return 1;
  switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
      amqp_basic_ack_t *a = (amqp_basic_ack_t *)f.payload.method.decoded;
      confirm_tag(cf, a->delivery_tag, a->multiple, 0, sent);
      return 1;
    }
    case AMQP_BASIC_NACK_METHOD: {
      amqp_basic_nack_t *a = (amqp_basic_nack_t *)f.payload.method.decoded;
      confirm_tag(cf, a->delivery_tag, a->multiple, 1, sent);
      return 1;
    }
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD:
      snprintf(err, errlen, "broker closed while publishing (method 0x%08x)", f.payload.method.id);
      return -1;
    default:
      return 1;
  }
}

static int run_send(void) {
  char err[512] = "";
  samples_t none = {0};
  uint64_t sent = 0, errors = 0, t_start = now_ns(), t_end;
  confirms_t cf = {0};
  amqp_connection_state_t c = open_conn(err, sizeof err, 1);
  if (!c) {
    print_result("send", 0, 0, 0, t_start, t_start, t_start, now_ns(), &none, 1, err);
    return 0;
  }
  if (O.confirms) {
    cf.acked = calloc(O.count + 2, 1);
    amqp_confirm_select(c, 1);
    if (!reply_ok(amqp_get_rpc_reply(c), "confirm.select", err, sizeof err)) O.count = 0;
  }
  char **keys = O.topics > 0 ? make_keys(O.topics) : NULL;
  amqp_bytes_t exchange = amqp_cstring_bytes(O.exchange ? O.exchange : "");
  amqp_bytes_t fixed_key = amqp_cstring_bytes(O.queue);
  unsigned char *body = malloc(O.size);
  body_init(body, O.size);
  amqp_bytes_t payload = {O.size, body};
  /* --durable: persistent messages (the queue is declared durable by `setup --durable`) */
  amqp_basic_properties_t props = {._flags = AMQP_BASIC_DELIVERY_MODE_FLAG,
                                   .delivery_mode = O.durable ? 2 : 1};
  uint64_t rnd = 0x9E3779B97F4A7C15ull;
  int cold = O.topics - O.hot_topics;
  t_start = now_ns();
  for (uint64_t seq = 0; seq < O.count; seq++) {
    if (O.rate > 0) {
      uint64_t due = t_start + (uint64_t)((double)seq * 1e9 / O.rate);
      uint64_t t = now_ns();
      if (t < due) sleep_ns(due - t);
    }
    amqp_bytes_t key = fixed_key;
    if (keys) {
      uint64_t r = xorshift64(&rnd);
      int i;
      if (O.hot_topics > 0 && cold > 0)
        i = ((double)(r >> 11) / 9007199254740992.0) < O.hot_share
                ? (int)(xorshift64(&rnd) % (uint64_t)O.hot_topics)
                : O.hot_topics + (int)(xorshift64(&rnd) % (uint64_t)cold);
      else
        i = (int)(r % (uint64_t)O.topics);
      key = amqp_cstring_bytes(keys[i]);
    }
    body_stamp(body, seq);
    int st = amqp_basic_publish(c, 1, exchange, key, 0, 0, &props, payload);
    if (st != AMQP_STATUS_OK) {
      snprintf(err, sizeof err, "publish: %s", amqp_error_string2(st));
      errors++;
      break;
    }
    sent++;
    if (O.confirms) {
      int rc = 0;
      if ((sent & 63) == 0 || amqp_data_in_buffer(c))
        while ((rc = pump_confirms(c, &cf, sent, 0, err, sizeof err)) > 0) {}
      while (rc >= 0 && sent - cf.confirmed >= (uint64_t)O.confirm_window)
        rc = pump_confirms(c, &cf, sent, 1000000, err, sizeof err);
      if (rc < 0) {
        errors++;
        break;
      }
    }
  }
  if (O.confirms && !errors) {
    uint64_t deadline = now_ns() + (uint64_t)(O.timeout * 1e9);
    while (cf.confirmed < sent && now_ns() < deadline)
      if (pump_confirms(c, &cf, sent, 100000, err, sizeof err) < 0) {
        errors++;
        break;
      }
  }
  t_end = now_ns();
  errors += cf.nacked;
  close_conn(c);
  print_result("send", sent, 0, cf.confirmed, t_start, t_start, t_end, t_end, &none, errors, err);
  return 0;
}

/* ---- recv ---------------------------------------------------------------------- */

static atomic_uint_fast64_t g_received;
static atomic_uint_fast64_t g_last_ns;
static atomic_int g_done, g_ready, g_failed;

typedef struct {
  int index;
  pthread_t thread;
  samples_t lat;
  uint64_t received, t_first, t_last, errors;
  char err[512];
} sub_t;

static void *subscriber(void *arg) {
  sub_t *s = (sub_t *)arg;
  amqp_connection_state_t c = open_conn(s->err, sizeof s->err, 1);
  if (!c) goto fail;
  amqp_basic_qos(c, 1, 0, (uint16_t)O.prefetch, 0);
  if (!reply_ok(amqp_get_rpc_reply(c), "basic.qos", s->err, sizeof s->err)) goto fail_conn;
  amqp_bytes_t queue = amqp_cstring_bytes(O.queue);
  amqp_bytes_t own = {0, NULL};
  if (O.exchange) {
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(c, 1, amqp_empty_bytes, 0, 0, 1, 1, amqp_empty_table);
    if (!reply_ok(amqp_get_rpc_reply(c), "queue.declare", s->err, sizeof s->err)) goto fail_conn;
    own = amqp_bytes_malloc_dup(ok->queue);
    queue = own;
    char key[256];
    for (int i = s->index; i < O.topics; i += O.subscribers) {
      snprintf(key, sizeof key, "%s%d", O.key_prefix, i);
      amqp_queue_bind(c, 1, queue, amqp_cstring_bytes(O.exchange), amqp_cstring_bytes(key),
                      amqp_empty_table);
      if (!reply_ok(amqp_get_rpc_reply(c), "queue.bind", s->err, sizeof s->err)) goto fail_conn;
    }
  }
  amqp_basic_consume(c, 1, queue, amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  if (!reply_ok(amqp_get_rpc_reply(c), "basic.consume", s->err, sizeof s->err)) goto fail_conn;
  atomic_fetch_add(&g_ready, 1);

  uint64_t unacked = 0, last_tag = 0;
  struct timeval tv = {0, 200000};
  while (!atomic_load(&g_done)) {
    amqp_envelope_t env;
    amqp_maybe_release_buffers(c);
    amqp_rpc_reply_t r = amqp_consume_message(c, &env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
      uint64_t t = now_ns();
      uint64_t sent = body_sent_ns((unsigned char *)env.message.body.bytes, env.message.body.len);
      if (sent && t >= sent) samples_add(&s->lat, (t - sent) / 1000);
      if (!s->t_first) s->t_first = t;
      s->t_last = t;
      s->received++;
      last_tag = env.delivery_tag;
      if (++unacked >= (uint64_t)O.ack_every) {
        amqp_basic_ack(c, 1, last_tag, 1);
        unacked = 0;
      }
      amqp_destroy_envelope(&env);
      atomic_store(&g_last_ns, t);
      if (atomic_fetch_add(&g_received, 1) + 1 >= O.count) atomic_store(&g_done, 1);
    } else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
               r.library_error == AMQP_STATUS_TIMEOUT) {
      if (now_ns() - atomic_load(&g_last_ns) > (uint64_t)(O.timeout * 1e9)) atomic_store(&g_done, 1);
    } else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
               r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      amqp_frame_t f;
      if (amqp_simple_wait_frame(c, &f) != AMQP_STATUS_OK) {
        snprintf(s->err, sizeof s->err, "consume: connection lost");
        s->errors++;
        break;
      }
      if (f.frame_type == AMQP_FRAME_METHOD &&
          (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
           f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
        snprintf(s->err, sizeof s->err, "consume: broker closed (method 0x%08x)",
                 f.payload.method.id);
        s->errors++;
        break;
      }
    } else {
      reply_ok(r, "consume", s->err, sizeof s->err);
      s->errors++;
      break;
    }
  }
  if (unacked && !s->errors) amqp_basic_ack(c, 1, last_tag, 1);
  if (own.bytes) amqp_bytes_free(own);
  if (!s->errors) close_conn(c);
  else amqp_destroy_connection(c);
  return NULL;
fail_conn:
  amqp_destroy_connection(c);
fail:
  s->errors++;
  atomic_store(&g_failed, 1);
  return NULL;
}

static int run_recv(void) {
  int n = O.exchange ? O.subscribers : 1;
  sub_t *subs = calloc((size_t)n, sizeof(sub_t));
  uint64_t t_start = now_ns();
  atomic_store(&g_last_ns, t_start);
  for (int i = 0; i < n; i++) {
    subs[i].index = i;
    pthread_create(&subs[i].thread, NULL, subscriber, &subs[i]);
  }
  while (atomic_load(&g_ready) < n && !atomic_load(&g_failed)) sleep_ns(1000000);
  if (!atomic_load(&g_failed)) {
    atomic_store(&g_last_ns, now_ns()); /* the silence timeout starts when we are ready */
    print_ready();
  } else {
    atomic_store(&g_done, 1);
  }
  samples_t lat = {0};
  uint64_t received = 0, errors = 0, t_first = 0, t_last = 0;
  const char *err = "";
  for (int i = 0; i < n; i++) {
    pthread_join(subs[i].thread, NULL);
    samples_merge(&lat, &subs[i].lat);
    received += subs[i].received;
    errors += subs[i].errors;
    if (subs[i].t_first && (!t_first || subs[i].t_first < t_first)) t_first = subs[i].t_first;
    if (subs[i].t_last > t_last) t_last = subs[i].t_last;
    if (subs[i].err[0] && !err[0]) err = subs[i].err;
  }
  print_result("recv", 0, received, 0, t_start, t_first, t_last, now_ns(), &lat, errors, err);
  return 0;
}

/* ---- idle ---------------------------------------------------------------------- */

static int run_idle(void) {
  char err[512] = "";
  int opened = 0;
  for (int i = 0; i < O.connections; i++) {
    if (!open_conn(err, sizeof err, 0)) break; /* kept open on purpose: never closed */
    opened++;
  }
  printf("{\"event\":\"ready\",\"opened\":%d,\"error\":\"%s\"}\n", opened, err);
  fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {}
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: amqp091_load setup|delete|send|recv|idle [--host H] [--port P] [--user U]\n"
          "  [--password W] [--vhost V] [--queue Q] [--exchange X] [--key-prefix P] [--topics T]\n"
          "  [--hot-topics H] [--hot-share F] [--subscribers S] [--size B] [--count N]\n"
          "  [--rate R] [--prefetch K] [--confirms] [--confirm-window W] [--ack-every A]\n"
          "  [--timeout S] [--connections N] [--durable]\n");
  exit(2);
}

int main(int argc, char **argv) {
  static struct option longopts[] = {
      {"host", 1, 0, 'h'},         {"port", 1, 0, 'p'},       {"user", 1, 0, 'u'},
      {"password", 1, 0, 'w'},     {"vhost", 1, 0, 'v'},      {"queue", 1, 0, 'q'},
      {"exchange", 1, 0, 'x'},     {"key-prefix", 1, 0, 'k'}, {"topics", 1, 0, 't'},
      {"hot-topics", 1, 0, 'H'},   {"hot-share", 1, 0, 'F'},  {"subscribers", 1, 0, 'S'},
      {"size", 1, 0, 's'},         {"count", 1, 0, 'n'},      {"rate", 1, 0, 'r'},
      {"prefetch", 1, 0, 'P'},     {"confirms", 0, 0, 'c'},   {"confirm-window", 1, 0, 'W'},
      {"ack-every", 1, 0, 'a'},    {"timeout", 1, 0, 'T'},    {"connections", 1, 0, 'C'},
      {"durable", 0, 0, 'D'},    {"frame-max", 1, 0, 'f'},  {0, 0, 0, 0}};
  if (argc < 2) usage();
  O.mode = argv[1];
  optind = 2;
  int ch;
  while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (ch) {
      case 'h': O.host = optarg; break;
      case 'p': O.port = atoi(optarg); break;
      case 'u': O.user = optarg; break;
      case 'w': O.password = optarg; break;
      case 'v': O.vhost = optarg; break;
      case 'q': O.queue = optarg; break;
      case 'x': O.exchange = optarg; break;
      case 'k': O.key_prefix = optarg; break;
      case 't': O.topics = atoi(optarg); break;
      case 'H': O.hot_topics = atoi(optarg); break;
      case 'F': O.hot_share = atof(optarg); break;
      case 'S': O.subscribers = atoi(optarg); break;
      case 's': O.size = (size_t)atol(optarg); break;
      case 'n': O.count = (uint64_t)atoll(optarg); break;
      case 'r': O.rate = atof(optarg); break;
      case 'P': O.prefetch = atoi(optarg); break;
      case 'c': O.confirms = 1; break;
      case 'W': O.confirm_window = atoi(optarg); break;
      case 'a': O.ack_every = atoi(optarg); break;
      case 'T': O.timeout = atof(optarg); break;
      case 'C': O.connections = atoi(optarg); break;
      case 'D': O.durable = 1; break;
      case 'f': O.frame_max = atoi(optarg); break;
      default: usage();
    }
  }
  if (O.size < BODY_HEADER) O.size = BODY_HEADER;
  if (O.subscribers < 1) O.subscribers = 1;
  if (O.ack_every < 1) O.ack_every = 1;
  if (O.confirm_window < 1) O.confirm_window = 1;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (!strcmp(O.mode, "setup")) return run_setup(0);
  if (!strcmp(O.mode, "delete")) return run_setup(1);
  if (!strcmp(O.mode, "send")) return run_send();
  if (!strcmp(O.mode, "recv")) return run_recv();
  if (!strcmp(O.mode, "idle")) return run_idle();
  usage();
  return 2;
}
