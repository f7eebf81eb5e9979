/* Shared pieces of the benchmark load generators (amqp091_load.c, amqp10_load.c).
 *
 * Message body layout (both protocols, so a message published with one protocol and
 * consumed with the other still carries its send time):
 *   bytes 0..3   magic "BNCH"
 *   bytes 4..11  send time, CLOCK_MONOTONIC nanoseconds, little endian
 *   bytes 12..19 sequence number, little endian
 *   rest         filler ('x')
 * CLOCK_MONOTONIC is system wide, so a sender and a receiver in two processes on the
 * same machine compare stamps directly.
 *
 * Results are one JSON object per line on stdout; progress lines go to stderr.
 */
#ifndef LOADGEN_COMMON_H
#define LOADGEN_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY_MAGIC "BNCH"
#define BODY_HEADER 20

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  nanosleep(&ts, NULL);
}

static inline void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Fill a body of `size` bytes (size >= BODY_HEADER) with the header and filler. */
static inline void body_init(unsigned char *body, size_t size) {
  memset(body, 'x', size);
  memcpy(body, BODY_MAGIC, 4);
}

static inline void body_stamp(unsigned char *body, uint64_t seq) {
  put_u64(body + 4, now_ns());
  put_u64(body + 12, seq);
}

/* Send time of a body, or 0 when it does not carry our header. */
static inline uint64_t body_sent_ns(const unsigned char *body, size_t len) {
  if (len < BODY_HEADER || memcmp(body, BODY_MAGIC, 4) != 0) return 0;
  return get_u64(body + 4);
}

/* Latency samples in microseconds; grows on demand. */
typedef struct {
  uint32_t *v;
  size_t n, cap;
} samples_t;

static inline void samples_add(samples_t *s, uint64_t us) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 65536;
    s->v = (uint32_t *)realloc(s->v, s->cap * sizeof(uint32_t));
    if (!s->v) { perror("realloc"); exit(3); }
  }
  s->v[s->n++] = us > 0xffffffffu ? 0xffffffffu : (uint32_t)us;
}

static inline void samples_merge(samples_t *into, const samples_t *from) {
  for (size_t i = 0; i < from->n; i++) samples_add(into, from->v[i]);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Percentile q in [0,1] of the samples (sorts them); 0 when there are none. */
static inline uint32_t samples_pct(samples_t *s, double q, int sorted) {
  if (!s->n) return 0;
  if (!sorted) qsort(s->v, s->n, sizeof(uint32_t), cmp_u32);
  size_t i = (size_t)(q * (double)(s->n - 1) + 0.5);
  return s->v[i];
}

/* Deterministic xorshift for key choice: the same run picks the same keys on both brokers. */
static inline uint64_t xorshift64(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13; x ^= x >> 7; x ^= x << 17;
  return *state = x;
}

/* Print the common result object.  role: "send" / "recv" / "idle". */
static inline void print_result(const char *role, uint64_t sent, uint64_t received, uint64_t confirmed,
                                uint64_t t_start, uint64_t t_first, uint64_t t_last, uint64_t t_end,
                                samples_t *lat, uint64_t errors, const char *error_text) {
  uint32_t p50 = samples_pct(lat, 0.50, 0);
  uint32_t p99 = samples_pct(lat, 0.99, 1);
  uint32_t p999 = samples_pct(lat, 0.999, 1);
  uint32_t pmax = lat->n ? lat->v[lat->n - 1] : 0;
  double secs = (double)(t_end - t_start) / 1e9;
  uint64_t n = received ? received : sent;
  char clean[256] = "";
  if (error_text) {
    size_t k = 0;
    for (; error_text[k] && k < sizeof(clean) - 1; k++) {
      char c = error_text[k];
      clean[k] = (c == '"' || c == '\\' || (unsigned char)c < 0x20) ? ' ' : c;
    }
    clean[k] = 0;
  }
  printf("{\"role\":\"%s\",\"sent\":%llu,\"received\":%llu,\"confirmed\":%llu,"
         "\"t_start_ns\":%llu,\"t_first_ns\":%llu,\"t_last_ns\":%llu,\"t_end_ns\":%llu,"
         "\"own_rate\":%.1f,\"latency_samples\":%zu,\"p50_us\":%u,\"p99_us\":%u,\"p999_us\":%u,"
         "\"max_us\":%u,\"errors\":%llu,\"error\":\"%s\"}\n",
         role, (unsigned long long)sent, (unsigned long long)received, (unsigned long long)confirmed,
         (unsigned long long)t_start, (unsigned long long)t_first, (unsigned long long)t_last,
         (unsigned long long)t_end, secs > 0 ? (double)n / secs : 0.0, lat->n, p50, p99, p999, pmax,
         (unsigned long long)errors, clean);
  fflush(stdout);
}

static inline void print_ready(void) {
  printf("{\"event\":\"ready\"}\n");
  fflush(stdout);
}

#endif
