/* AMQP 1.0 load generator on the Qpid Proton C proactor API.
 *
 *   amqp10_load MODE [options]
 *   MODE  send   attach a sender to --address, send --count messages of --size bytes
 *                (a single data section); --unsettled waits for each disposition,
 *                otherwise messages go pre-settled.  The broker's credit paces us,
 *                and with --unsettled --window W at most W unsettled messages are
 *                in flight (0: credit alone).  --durable sets the header's durable flag.
 *                --rate R paces the sender at R msgs/s (a pacer thread wakes the
 *                connection at each message's due time).
 *         recv   attach a receiver to --address with a --credit window, accept and
 *                settle each delivery; stop after --count or --timeout s of silence.
 *                Prints {"event":"ready"} once the broker answered the attach.
 *         idle   open --connections connections (SASL PLAIN + open), print ready,
 *                hold them until stdin closes.
 * Output: JSON lines on stdout (see loadgen_common.h).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/transport.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loadgen_common.h"

typedef struct {
  const char *mode, *host, *port, *user, *password, *address, *vhost;
  int credit, unsettled, window, connections, durable;
  double timeout, rate;
  size_t size;
  uint64_t count;
} opts_t;

static opts_t O = {.host = "127.0.0.1", .port = "5672", .user = "guest", .password = "guest",
                   .address = "/queue/bench", .vhost = NULL, .credit = 300, .unsettled = 0, .window = 0,
                   .connections = 1000, .timeout = 15, .rate = 0, .size = 100, .count = 100000};

static pn_proactor_t *P;
static char err[512];
static uint64_t sent, received, confirmed, errors, t_start, t_first, t_last;
static samples_t lat;
static bool ready_printed, finished;
static unsigned char *encoded, *rbuf;
static size_t encoded_len, rbuf_cap;
static pn_message_t *decode_msg;
static int opened, closed_conns;
static pn_connection_t *send_conn;
static pn_link_t *send_link;
static volatile bool pacer_stop;

static void set_err(const char *what, pn_condition_t *cond) {
  if (err[0]) return;
  if (cond && pn_condition_is_set(cond))
    snprintf(err, sizeof err, "%s: %s %s", what, pn_condition_get_name(cond),
             pn_condition_get_description(cond) ? pn_condition_get_description(cond) : "");
  else
    snprintf(err, sizeof err, "%s", what);
  errors++;
}

static pn_connection_t *new_connection(void) {
  pn_connection_t *c = pn_connection();
  pn_transport_t *t = pn_transport();
  pn_sasl_t *sasl = pn_sasl(t);
  pn_sasl_allowed_mechs(sasl, "PLAIN");
  pn_sasl_set_allow_insecure_mechs(sasl, true);
  pn_connection_set_user(c, O.user);
  pn_connection_set_password(c, O.password);
  pn_connection_set_container(c, "bench-loadgen");
  if (O.vhost) pn_connection_set_hostname(c, O.vhost);
  char addr[512];
  snprintf(addr, sizeof addr, "%s:%s", O.host, O.port);
  pn_proactor_connect2(P, c, t, addr);
  return c;
}

/* Encode one message once; each send only patches the stamp in the body, which is the
 * last O.size bytes of the encoding (single data section, no footer). */
static void prepare_message(void) {
  unsigned char *body = malloc(O.size);
  body_init(body, O.size);
  pn_message_t *m = pn_message();
  pn_message_set_inferred(m, true);
  pn_message_set_durable(m, O.durable);
  pn_data_put_binary(pn_message_body(m), pn_bytes(O.size, (const char *)body));
  size_t cap = O.size + 1024;
  encoded = malloc(cap);
  encoded_len = cap;
  if (pn_message_encode(m, (char *)encoded, &encoded_len) != 0) {
    fprintf(stderr, "encode failed\n");
    exit(3);
  }
  pn_message_free(m);
  free(body);
}

static bool window_open(void) {
  return !O.unsettled || !O.window || sent - confirmed < (uint64_t)O.window;
}

/* Messages due by now at --rate (all of them without a rate). */
static uint64_t due_now(void) {
  if (O.rate <= 0) return O.count;
  uint64_t due = (uint64_t)((double)(now_ns() - t_start) * O.rate / 1e9) + 1;
  return due < O.count ? due : O.count;
}

/* --rate: wake the connection at each message's due time (pn_connection_wake may be
 * called from any thread); the wake event sends what is due. */
static void *pacer(void *arg) {
  (void)arg;
  for (uint64_t k = 1; k < O.count && !pacer_stop; k++) {
    uint64_t due = t_start + (uint64_t)((double)k * 1e9 / O.rate), t = now_ns();
    if (t < due) sleep_ns(due - t);
    pn_connection_wake(send_conn);
  }
  return NULL;
}

static void send_some(pn_link_t *l) {
  uint64_t due = due_now();
  while (pn_link_credit(l) > 0 && sent < due && window_open()) {
    char tag[16];
    int tl = snprintf(tag, sizeof tag, "%llx", (unsigned long long)sent);
    pn_delivery_t *d = pn_delivery(l, pn_dtag(tag, (size_t)tl));
    body_stamp(encoded + encoded_len - O.size, sent);
    pn_link_send(l, (const char *)encoded, encoded_len);
    pn_link_advance(l);
    if (!O.unsettled) pn_delivery_settle(d);
    sent++;
  }
  if (sent == O.count && (!O.unsettled || confirmed == sent) && !finished) {
    finished = true;
    pn_connection_close(pn_session_connection(pn_link_session(l)));
  }
}

static uint64_t stamp_of(const unsigned char *p, size_t n) {
  if (n >= O.size) {
    uint64_t s = body_sent_ns(p + n - O.size, O.size);
    if (s) return s;
  }
  /* Not our tail layout (e.g. properties added after the body?): decode properly. */
  if (!decode_msg) decode_msg = pn_message();
  pn_message_clear(decode_msg);
  if (pn_message_decode(decode_msg, (const char *)p, n) != 0) return 0;
  pn_data_t *b = pn_message_body(decode_msg);
  pn_data_rewind(b);
  if (!pn_data_next(b) || pn_data_type(b) != PN_BINARY) return 0;
  pn_bytes_t bytes = pn_data_get_binary(b);
  return body_sent_ns((const unsigned char *)bytes.start, bytes.size);
}

static void on_delivery(pn_event_t *e) {
  pn_delivery_t *d = pn_event_delivery(e);
  pn_link_t *l = pn_delivery_link(d);
  if (pn_link_is_sender(l)) {
    if (pn_delivery_remote_state(d) || pn_delivery_settled(d)) {
      uint64_t st = pn_delivery_remote_state(d);
      if (st == PN_REJECTED || st == PN_RELEASED || st == PN_MODIFIED) errors++;
      confirmed++;
      pn_delivery_settle(d);
      send_some(l); /* the window has room again, or the last one came: close */
    }
    return;
  }
  if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return;
  size_t n = pn_delivery_pending(d);
  if (n > rbuf_cap) {
    rbuf_cap = n * 2;
    rbuf = realloc(rbuf, rbuf_cap);
  }
  ssize_t got = pn_link_recv(l, (char *)rbuf, n);
  pn_link_advance(l);
  uint64_t t = now_ns();
  uint64_t s = got > 0 ? stamp_of(rbuf, (size_t)got) : 0;
  if (s && t >= s) samples_add(&lat, (t - s) / 1000);
  if (!t_first) t_first = t;
  t_last = t;
  received++;
  pn_delivery_update(d, PN_ACCEPTED);
  pn_delivery_settle(d);
  int credit = pn_link_credit(l);
  if (credit < O.credit / 2) pn_link_flow(l, O.credit - credit);
  if (received >= O.count && !finished) {
    finished = true;
    pn_connection_close(pn_session_connection(pn_link_session(l)));
  }
}

/* Returns false once the run is over. */
static bool handle(pn_event_t *e) {
  switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
      pn_connection_t *c = pn_event_connection(e);
      pn_connection_open(c);
      if (!strcmp(O.mode, "idle")) break;
      pn_session_t *s = pn_session(c);
      pn_session_open(s);
      if (!strcmp(O.mode, "send")) {
        pn_link_t *l = pn_sender(s, "bench-sender");
        pn_terminus_set_address(pn_link_target(l), O.address);
        pn_link_set_snd_settle_mode(l, O.unsettled ? PN_SND_UNSETTLED : PN_SND_SETTLED);
        pn_link_open(l);
      } else {
        pn_link_t *l = pn_receiver(s, "bench-receiver");
        pn_terminus_set_address(pn_link_source(l), O.address);
        pn_link_open(l);
        pn_link_flow(l, O.credit);
      }
      break;
    }
    case PN_CONNECTION_REMOTE_OPEN:
      if (!strcmp(O.mode, "idle") && ++opened == O.connections) {
        printf("{\"event\":\"ready\",\"opened\":%d,\"error\":\"%s\"}\n", opened, err);
        fflush(stdout);
      }
      break;
    case PN_LINK_REMOTE_OPEN: {
      pn_link_t *l = pn_event_link(e);
      if (pn_link_is_receiver(l) && !ready_printed) {
        ready_printed = true;
        print_ready();
        t_start = now_ns();
      }
      if (pn_link_is_sender(l)) {
        t_start = now_ns();
        send_link = l;
        send_conn = pn_event_connection(e);
        if (O.rate > 0) {
          pthread_t th;
          pthread_create(&th, NULL, pacer, NULL);
          pthread_detach(th);
        }
        send_some(l);
      }
      break;
    }
    case PN_LINK_FLOW: {
      pn_link_t *l = pn_event_link(e);
      if (pn_link_is_sender(l)) send_some(l);
      break;
    }
    case PN_CONNECTION_WAKE:
      if (send_link && !finished) send_some(send_link);
      break;
    case PN_DELIVERY:
      on_delivery(e);
      break;
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
      pn_link_t *l = pn_event_link(e);
      set_err("link closed by broker", pn_link_remote_condition(l));
      pn_connection_close(pn_session_connection(pn_link_session(l)));
      break;
    }
    case PN_SESSION_REMOTE_CLOSE: {
      pn_session_t *ss = pn_event_session(e);
      set_err("session ended by broker", pn_session_remote_condition(ss));
      pn_connection_close(pn_session_connection(ss));
      break;
    }
    case PN_CONNECTION_REMOTE_CLOSE: {
      pn_connection_t *c = pn_event_connection(e);
      if (!finished) set_err("connection closed by broker", pn_connection_remote_condition(c));
      pn_connection_close(c);
      break;
    }
    case PN_TRANSPORT_ERROR:
      if (!finished) set_err("transport", pn_transport_condition(pn_event_transport(e)));
      break;
    case PN_TRANSPORT_CLOSED:
      if (!strcmp(O.mode, "idle")) {
        if (++closed_conns >= O.connections) return false;
        if (opened + closed_conns == O.connections && !ready_printed) {
          ready_printed = true;
          printf("{\"event\":\"ready\",\"opened\":%d,\"error\":\"%s\"}\n", opened, err);
          fflush(stdout);
        }
        break;
      }
      pacer_stop = true;
      return false;
    case PN_PROACTOR_TIMEOUT:
      if (!strcmp(O.mode, "recv")) {
        uint64_t since = t_last ? t_last : t_start;
        if (since && now_ns() - since > (uint64_t)(O.timeout * 1e9)) {
          finished = true;
          pn_proactor_disconnect(P, NULL);
        } else {
          pn_proactor_set_timeout(P, 500);
        }
      }
      break;
    case PN_PROACTOR_INTERRUPT:
      pn_proactor_disconnect(P, NULL);
      break;
    case PN_PROACTOR_INACTIVE:
      return false;
    default:
      break;
  }
  return true;
}

static void *stdin_watch(void *arg) {
  (void)arg;
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {}
  pn_proactor_interrupt(P);
  return NULL;
}

static void usage(void) {
  fprintf(stderr,
          "usage: amqp10_load send|recv|idle [--host H] [--port P] [--user U] [--password W]\n"
          "  [--vhost HOSTNAME] [--address A] [--size B] [--count N] [--credit K] [--unsettled]\n"
          "  [--window W] [--rate R] [--timeout S] [--connections N] [--durable]\n");
  exit(2);
}

int main(int argc, char **argv) {
  static struct option longopts[] = {
      {"host", 1, 0, 'h'},    {"port", 1, 0, 'p'},     {"user", 1, 0, 'u'},
      {"password", 1, 0, 'w'}, {"address", 1, 0, 'a'}, {"size", 1, 0, 's'},
      {"count", 1, 0, 'n'},   {"credit", 1, 0, 'k'},   {"unsettled", 0, 0, 'U'},
      {"timeout", 1, 0, 'T'}, {"connections", 1, 0, 'C'}, {"vhost", 1, 0, 'v'},
      {"window", 1, 0, 'W'},  {"rate", 1, 0, 'r'},  {"durable", 0, 0, 'D'},
      {0, 0, 0, 0}};
  if (argc < 2) usage();
  O.mode = argv[1];
  optind = 2;
  int ch;
  while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (ch) {
      case 'h': O.host = optarg; break;
      case 'p': O.port = optarg; break;
      case 'u': O.user = optarg; break;
      case 'w': O.password = optarg; break;
      case 'a': O.address = optarg; break;
      case 's': O.size = (size_t)atol(optarg); break;
      case 'n': O.count = (uint64_t)atoll(optarg); break;
      case 'k': O.credit = atoi(optarg); break;
      case 'U': O.unsettled = 1; break;
      case 'W': O.window = atoi(optarg); break;
      case 'r': O.rate = atof(optarg); break;
      case 'T': O.timeout = atof(optarg); break;
      case 'C': O.connections = atoi(optarg); break;
      case 'v': O.vhost = optarg; break;
      case 'D': O.durable = 1; break;
      default: usage();
    }
  }
  if (strcmp(O.mode, "send") && strcmp(O.mode, "recv") && strcmp(O.mode, "idle")) usage();
  if (O.size < BODY_HEADER) O.size = BODY_HEADER;
  if (O.credit < 2) O.credit = 2;
  if (O.window < 0) O.window = 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  P = pn_proactor();
  uint64_t t0 = now_ns();
  if (!strcmp(O.mode, "send")) prepare_message();
  if (!strcmp(O.mode, "idle")) {
    for (int i = 0; i < O.connections; i++) new_connection();
    pthread_t th;
    pthread_create(&th, NULL, stdin_watch, NULL);
  } else {
    new_connection();
    if (!strcmp(O.mode, "recv")) pn_proactor_set_timeout(P, 500);
  }
  bool running = true;
  while (running) {
    pn_event_batch_t *b = pn_proactor_wait(P);
    pn_event_t *e;
    while (running && (e = pn_event_batch_next(b))) running = handle(e);
    pn_proactor_done(P, b);
  }
  uint64_t t_end = now_ns();
  if (!t_start) t_start = t0;
  if (!strcmp(O.mode, "send"))
    print_result("send", sent, 0, confirmed, t_start, t_start, t_end, t_end, &lat, errors, err);
  else if (!strcmp(O.mode, "recv"))
    print_result("recv", 0, received, 0, t_start, t_first, t_last, t_end, &lat, errors, err);
  if (!strcmp(O.mode, "idle")) _exit(0);
  pn_proactor_free(P);
  return 0;
}
