/* metrics: Prometheus text with llama-server's llamacpp:* names and types, plus time-to-first-token
 * and inter-token latency histograms (the SLO metrics serving users ask for) under trit:*, so
 * that llamacpp:* holds exactly one typed sample per name as llama-server's own scrapers expect. */
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
    /* llama-server's counters and gauges, by its names and types */
    metric(&b, "counter", "prompt_tokens_total", "Prompt tokens evaluated (cached ones not counted)",
           (double)m->prompt_tokens);
    metric(&b, "counter", "prompt_tokens_cached_total", "Prompt tokens taken from the cache", (double)m->prompt_cached);
    metric(&b, "counter", "prompt_seconds_total", "Seconds spent evaluating prompts", m->prompt_s);
    metric(&b, "counter", "tokens_predicted_total", "Tokens generated", (double)m->predicted_tokens);
    metric(&b, "counter", "tokens_predicted_seconds_total", "Seconds spent generating", m->predicted_s);
    metric(&b, "counter", "n_decode_total", "Forward passes", (double)m->n_decode);
    metric(&b, "counter", "n_tokens_max", "Longest sequence seen in a slot (prompt and generated)", m->n_tokens_max);
    /* trit has no speculative decoding: its counters stay zero */
    metric(&b, "counter", "spec_decode_num_draft_tokens_total", "Speculative draft tokens (none)", 0);
    metric(&b, "counter", "spec_decode_num_accepted_tokens_total", "Speculative draft tokens accepted (none)", 0);
    metric(&b, "counter", "spec_decode_num_drafts_total", "Speculative verification steps (none)", 0);
    metric(&b, "counter", "requests_total", "Requests accepted", (double)m->requests);
    metric(&b, "gauge", "prompt_tokens_seconds", "Prompt throughput in tokens/s since the last scrape",
           m->win_prompt_s > 0 ? (double)m->win_prompt_tokens / m->win_prompt_s : 0);
    metric(&b, "gauge", "predicted_tokens_seconds", "Generation throughput in decode steps/s since the last scrape",
           m->win_predicted_s > 0 ? (double)m->win_steps / m->win_predicted_s : 0);
    metric(&b, "gauge", "requests_processing", "Requests in a slot", m->processing);
    metric(&b, "gauge", "requests_deferred", "Requests waiting for a slot", m->deferred);
    metric(&b, "gauge", "n_busy_slots_per_decode", "Mean busy slots per forward pass",
           m->n_decode ? (double)m->busy_slots_sum / (double)m->n_decode : 0);
    uint64_t seen = m->prompt_tokens + m->prompt_cached;
    metric(&b, "gauge", "prompt_cache_hit_ratio", "Share of prompt tokens served from the cache",
           seen ? (double)m->prompt_cached / (double)seen : 0);
    histogram(&b, "trit:time_to_first_token_seconds", "Time from request to first token", m->ttft, m->ttft_sum,
              m->ttft_n);
    histogram(&b, "trit:inter_token_latency_seconds", "Time between generated tokens", m->itl, m->itl_sum, m->itl_n);
    return b.s;
}
