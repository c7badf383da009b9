/* metrics: Prometheus text with llama-server's llamacpp:* names, plus the time-to-first-token and
 * inter-token latency histograms under vLLM's names (the SLO metrics serving users ask for). */
#include <stdio.h>
#include <stdlib.h>

#include "server.h"

static void metric(strbuf *b, const char *type, const char *name, const char *help, double v) {
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", name, help,
                     name, type, name, v);
    sb_add(b, line, (size_t)n);
}

static void histogram(strbuf *b, const char *name, const char *help, const uint64_t *h, double sum, uint64_t n) {
    char line[512];
    int k = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    sb_add(b, line, (size_t)k);
    uint64_t cum = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        cum += h[i];
        k = snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, hist_bounds[i], (unsigned long long)cum);
        sb_add(b, line, (size_t)k);
    }
    k = snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name,
                 (unsigned long long)(cum + h[HIST_BUCKETS]), name, sum, name, (unsigned long long)n);
    sb_add(b, line, (size_t)k);
}

char *metrics_text(const srv_metrics *m) {
    strbuf b = {0};
    sb_add(&b, "", 0);
    metric(&b, "counter", "prompt_tokens_total", "Number of prompt tokens processed.", (double)m->prompt_tokens);
    metric(&b, "counter", "prompt_seconds_total", "Prompt process time", m->prompt_s);
    metric(&b, "counter", "tokens_predicted_total", "Number of generation tokens processed.",
           (double)m->predicted_tokens);
    metric(&b, "counter", "tokens_predicted_seconds_total", "Predict process time", m->predicted_s);
    metric(&b, "counter", "n_decode_total", "Total number of batched forward passes", (double)m->n_decode);
    metric(&b, "counter", "prompt_tokens_cache_total", "Prompt tokens reused from the cache", (double)m->prompt_cached);
    metric(&b, "counter", "requests_total", "Requests accepted", (double)m->requests);
    metric(&b, "gauge", "n_busy_slots_per_decode", "Average number of busy slots per forward pass",
           m->n_decode ? (double)m->busy_slots_sum / (double)m->n_decode : 0);
    metric(&b, "gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s",
           m->prompt_s > 0 ? (double)m->prompt_tokens / m->prompt_s : 0);
    metric(&b, "gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s",
           m->predicted_s > 0 ? (double)m->predicted_tokens / m->predicted_s : 0);
    uint64_t seen = m->prompt_tokens + m->prompt_cached;
    metric(&b, "gauge", "prompt_cache_hit_ratio", "Share of prompt tokens served from the cache",
           seen ? (double)m->prompt_cached / (double)seen : 0);
    metric(&b, "gauge", "n_tokens_max", "Largest number of tokens in one forward pass", m->n_tokens_max);
    metric(&b, "gauge", "requests_processing", "Number of requests processing.", m->processing);
    metric(&b, "gauge", "requests_deferred", "Number of requests deferred.", m->deferred);
    histogram(&b, "llamacpp:time_to_first_token_seconds", "Time from request to first token", m->ttft, m->ttft_sum,
              m->ttft_n);
    histogram(&b, "llamacpp:inter_token_latency_seconds", "Time between generated tokens", m->itl, m->itl_sum,
              m->itl_n);
    return b.s;
}
