/* http.c — libmicrohttpd plumbing: routing, authentication, body limits, responses (JSON and Server-Sent
 * Events), client liveness, logging, and the signal-driven shutdown (server.h).
 *
 * One thread per connection: a connection thread may block while its job is queued or generating. It
 * wakes every LIVENESS_MS to look at its socket, so a client that went away cancels its generation
 * within that time even when no token is ready to be written.
 */
#include <arpa/inet.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "anthropic.h"
#include "base/err.h"
#include "metrics.h"
#include "openai.h"
#include "responses.h"
#include "scheduler.h"
#include "server.h"

#define LIVENESS_MS 50

typedef struct {
    const fkv_model *model;
    const server_params *p;
    sched *sched;
    metrics *metrics;
    oai_context oai;
    resp_store *responses; /* the Responses API's stored responses */
    pthread_mutex_t mu;
    uint32_t connections; /* open now (guarded by mu) */
} server;

/* MHD itself would leave connections past its limit unaccepted in the kernel's backlog, where a client waits
 * without a word; flatkv accepts this many more, to answer each with a 503 and close it. */
#define REFUSAL_SLOTS 64

/* A streamed choice's progress on the wire. */
typedef struct {
    size_t sent;     /* text bytes sent */
    size_t lps_sent; /* logprob entries sent (sched_job.lps) */
    bool first_sent, done;
} choice_stream;

/* The API a path speaks: how its requests parse, and the shape of its answers, streams and errors. */
typedef enum { API_OPENAI, API_MESSAGES, API_RESPONSES } api_kind;

/* One request, from its first header to its completion callback. */
typedef struct {
    server *srv;
    char method[16];
    char path[256];
    char *body;
    size_t len, cap;
    bool too_large;
    bool close;      /* the response closes the connection (a refusal past --max-connections) */
    unsigned retry_after; /* a Retry-After header on the response (seconds); 0: none */
    char key[65]; /* the routing key, for the log: X-Session-Id, else prompt_cache_key */
    int status;
    double t0;
    int fd;
    sched_job *job;
    api_kind api;
    oai_request req;    /* API_OPENAI */
    anth_request areq;  /* API_MESSAGES */
    resp_request rreq;  /* API_RESPONSES */
    /* streaming */
    char *pending;
    size_t pending_len, pending_off;
    choice_stream choice[SCHED_MAX_CHOICES]; /* per choice: the job, then its followers */
    bool finished;
    bool broken; /* an event could not be made (out of memory): the stream ends with an error */
} conn;

/* A client's routing key as the log shows it: printable ASCII without spaces, truncated. */
static void set_log_key(char key[65], const char *src) {
    size_t i = 0;
    for (; src[i] && i < 64; i++) key[i] = src[i] > ' ' && src[i] < 0x7f ? src[i] : '?';
    key[i] = 0;
}

/* The peer closed its side (or the socket failed): nobody will read what we write. */
static bool client_gone(int fd) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0) return false;
    if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char c;
    return (pfd.revents & POLLIN) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static enum MHD_Result send_text(struct MHD_Connection *c, conn *st, int status, const char *type, char *text) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    if (st->close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (st->retry_after) {
        char seconds[16];
        snprintf(seconds, sizeof seconds, "%u", st->retry_after);
        MHD_add_response_header(r, "Retry-After", seconds);
    }
    st->status = status;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, conn *st, int status, json_t *body) {
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (oai_json_failed() || !text) { /* the body lost parts as it was built: never send it as if whole */
        free(text);
        static const char failed[] = "{\"error\": {\"message\": \"out of memory building the response\", \"type\": "
                                     "\"server_error\", \"param\": null, \"code\": \"out_of_memory\"}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(failed), (void *)failed, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "application/json");
        st->status = 500;
        enum MHD_Result ret = MHD_queue_response(c, 500, r);
        MHD_destroy_response(r);
        return ret;
    }
    return send_text(c, st, status, "application/json", text);
}

static enum MHD_Result send_error(struct MHD_Connection *c, conn *st, const oai_error *e) {
    st->retry_after = e->retry_after;
    return send_json(c, st, e->status, st->api == API_MESSAGES ? anth_error_body(e) : oai_error_body(e));
}

static enum MHD_Result fail(struct MHD_Connection *c, conn *st, int status, const char *type, const char *param,
                            const char *code, const char *message) {
    oai_error e;
    oai_fail(&e, status, type, param, code, "%s", message);
    return send_error(c, st, &e);
}

/* Append one SSE event "data: JSON\n\n" (or the literal [DONE]) to the pending output. */
static void push_event(conn *st, json_t *obj, const char *literal) {
    char *json = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    const char *payload = json ? json : literal;
    char *grown = payload && !oai_json_failed() ? realloc(st->pending, st->pending_len + strlen(payload) + 9) : NULL;
    if (grown) {
        st->pending = grown;
        st->pending_len += (size_t)sprintf(st->pending + st->pending_len, "data: %s\n\n", payload);
    } else {
        st->broken = true; /* an event lost: the stream must not look whole */
    }
    free(json);
}

/* Choice i of the connection's request: the job, then its followers. */
static sched_job *choice_job(const conn *st, uint32_t i) { return i ? st->job->followers[i - 1] : st->job; }

/* Queue the events that choice i's progress allows; returns true if any. */
static bool produce_choice_events(conn *st, uint32_t i) {
    sched_job *j = choice_job(st, i);
    choice_stream *c = &st->choice[i];
    const size_t before = st->pending_len;
    pthread_mutex_lock(&j->mu);
    if (!c->first_sent && st->req.kind == OAI_CHAT)
        push_event(st, oai_stream_chunk(&st->req, (int)i, "", 0, NULL, true, NULL), NULL);
    c->first_sent = true;
    if (j->prog.text.stable > c->sent) {
        size_t lps_to = c->lps_sent; /* the tokens whose text this chunk completes */
        while (lps_to < j->prog.n_lps && lps_to < j->prog.text.n_tokens &&
               j->prog.text.ends[lps_to] <= j->prog.text.stable)
            lps_to++;
        json_t *lps = j->req.logprobs ? oai_logprobs(&st->req, j, c->lps_sent, lps_to) : NULL;
        push_event(st,
                   oai_stream_chunk(&st->req, (int)i, j->prog.text.text + c->sent, j->prog.text.stable - c->sent, NULL,
                                    false, lps),
                   NULL);
        c->sent = j->prog.text.stable;
        c->lps_sent = lps_to;
    }
    if (j->prog.done && c->sent == j->prog.text.stable && !c->done) {
        if (j->prog.tool_calls) push_event(st, oai_tool_calls_chunk(&st->req, (int)i, j), NULL);
        if (!j->prog.error.code)
            push_event(st, oai_stream_chunk(&st->req, (int)i, NULL, 0, j->prog.finish_reason, false, NULL), NULL);
        c->done = true;
    }
    pthread_mutex_unlock(&j->mu);
    return st->pending_len > before;
}

/* Queue the events that the choices' progress allows; once all are done, the usage and [DONE]. True if any. */
static bool produce_events(conn *st) {
    const size_t before = st->pending_len;
    bool all_done = true;
    for (uint32_t i = 0; i <= st->job->n_followers; i++) {
        produce_choice_events(st, i);
        all_done &= st->choice[i].done;
    }
    if (all_done && !st->finished) {
        sched_job *failed = NULL;
        for (uint32_t i = 0; i <= st->job->n_followers && !failed; i++)
            if (choice_job(st, i)->prog.error.code) failed = choice_job(st, i);
        if (failed) {
            oai_error e;
            oai_fail_with(&e, NULL, &failed->prog.error);
            push_event(st, oai_error_body(&e), NULL);
        } else if (st->req.include_usage) {
            push_event(st, oai_usage_chunk(&st->req, st->job), NULL);
        }
        push_event(st, NULL, "[DONE]");
        st->finished = true;
    }
    return st->pending_len > before;
}

/* The Messages and Responses streams (one choice): each event named by its type — "event: TYPE\ndata: JSON\n\n" —
 * and no [DONE]. Returns true if any was queued. */
static bool produce_typed_events(conn *st) {
    json_t *events = json_array(), *event;
    pthread_mutex_lock(&st->job->mu);
    if (st->api == API_MESSAGES) {
        anth_stream(&st->areq, st->job, events);
        st->choice[0].sent = st->areq.sent;
        st->finished = st->areq.finished;
    } else {
        resp_stream(&st->rreq, st->job, events);
        st->choice[0].sent = st->rreq.sent;
        st->finished = st->rreq.finished;
    }
    pthread_mutex_unlock(&st->job->mu);
    size_t i;
    json_array_foreach(events, i, event) {
        char *json = json_dumps(event, JSON_COMPACT);
        const char *type = json_string_value(json_object_get(event, "type"));
        size_t need = (json ? strlen(json) : 0) + strlen(type) + 16;
        char *grown = json ? realloc(st->pending, st->pending_len + need + 1) : NULL;
        if (grown && !oai_json_failed()) {
            st->pending = grown;
            st->pending_len += (size_t)sprintf(st->pending + st->pending_len, "event: %s\ndata: %s\n\n", type, json);
        } else {
            if (grown) st->pending = grown;
            st->broken = true;
        }
        free(json);
    }
    bool produced = json_array_size(events) > 0;
    json_decref(events);
    return produced;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    conn *st = cls;
    for (;;) {
        if (st->pending_off < st->pending_len) {
            size_t n = st->pending_len - st->pending_off < max ? st->pending_len - st->pending_off : max;
            memcpy(buf, st->pending + st->pending_off, n);
            st->pending_off += n;
            return (ssize_t)n;
        }
        st->pending_off = st->pending_len = 0;
        if (st->broken) {
            for (uint32_t k = 0; k <= st->job->n_followers; k++) sched_job_cancel(choice_job(st, k));
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        uint32_t waiting = 0; /* the first choice still going: its progress wakes this reader (the others' shows at
                               * the next wake, at most LIVENESS_MS later) */
        while (waiting < st->job->n_followers && st->choice[waiting].done) waiting++;
        sched_job *w = choice_job(st, waiting);
        pthread_mutex_lock(&w->mu);
        sched_job_wait_locked(w, st->choice[waiting].sent, LIVENESS_MS);
        pthread_mutex_unlock(&w->mu);
        bool produced = st->api == API_OPENAI ? produce_events(st) : produce_typed_events(st);
        if (!produced && client_gone(st->fd)) {
            for (uint32_t k = 0; k <= st->job->n_followers; k++) sched_job_cancel(choice_job(st, k));
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static enum MHD_Result run_completion(struct MHD_Connection *c, conn *st, oai_kind kind) {
    server *srv = st->srv;
    oai_error e;
    st->job = sched_job_new();
    if (!st->job) return fail(c, st, 500, "server_error", NULL, NULL, "out of memory");
    const char *body = st->body ? st->body : "";
    int rc = st->api == API_MESSAGES
                 ? anth_parse(&srv->oai, srv->p->engine.prefix_cache, body, st->len, &st->areq, st->job, &e)
             : st->api == API_RESPONSES ? resp_parse(&srv->oai, srv->responses, body, st->len, &st->rreq, st->job, &e)
                                        : oai_parse(&srv->oai, kind, body, st->len, &st->req, st->job, &e);
    if (rc) {
        sched_job_release(srv->sched, st->job); /* never queued: nothing to wait for */
        st->job = NULL;
        return send_error(c, st, &e);
    }
    if (!st->key[0]) set_log_key(st->key, st->api == API_RESPONSES ? st->rreq.cache_key : st->req.cache_key);
    if (srv->p->timeout_s) st->job->req.deadline_ms = st->t0 + srv->p->timeout_s * 1e3; /* copied by followers */
    /* The other choices: the same request, each with its seed + i, started from this one's prompt. */
    for (uint32_t i = 1; i < st->req.n; i++) {
        sched_job *f = sched_job_follower(st->job, st->job->req.sampling.seed + i);
        if (!f) {
            sched_job_release(srv->sched, st->job);
            st->job = NULL;
            return fail(c, st, 500, "server_error", NULL, NULL, "out of memory");
        }
        sched_job_release(srv->sched, f); /* the leader keeps it */
    }
    fkv_error busy = {0};
    uint32_t retry_after = 0;
    if (sched_submit(srv->sched, st->job, &retry_after, &busy)) {
        sched_job_release(srv->sched, st->job);
        st->job = NULL;
        metrics_count_rejected(srv->metrics, METRICS_QUEUE_FULL);
        oai_fail_with(&e, NULL, &busy);
        e.retry_after = retry_after;
        return send_error(c, st, &e);
    }
    if (st->api == API_MESSAGES ? st->areq.stream : st->api == API_RESPONSES ? st->rreq.stream : st->req.stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, st, NULL);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        st->status = 200;
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    sched_job *j = st->job;
    for (uint32_t i = 0; i <= j->n_followers; i++) { /* every choice */
        sched_job *choice = i ? j->followers[i - 1] : j;
        pthread_mutex_lock(&choice->mu);
        while (!choice->prog.done) {
            sched_job_wait_locked(choice, SIZE_MAX, LIVENESS_MS);
            if (!choice->prog.done && client_gone(st->fd)) {
                pthread_mutex_unlock(&choice->mu);
                for (uint32_t k = 0; k <= j->n_followers; k++) sched_job_cancel(k ? j->followers[k - 1] : j);
                st->status = 499; /* client closed the request */
                return MHD_NO;
            }
        }
        pthread_mutex_unlock(&choice->mu);
        if (choice->prog.error.code) {
            oai_error e;
            oai_fail_with(&e, NULL, &choice->prog.error);
            return send_error(c, st, &e);
        }
    }
    return send_json(c, st, 200,
                     st->api == API_MESSAGES    ? anth_response(&st->areq, j)
                     : st->api == API_RESPONSES ? resp_response(&st->rreq, j)
                                                : oai_response(&st->req, j));
}

/* The key as OpenAI's clients send it (Authorization: Bearer) or as Anthropic's do (x-api-key), on every route. */
static bool authorized(struct MHD_Connection *c, const server *srv) {
    if (!srv->p->api_key) return true;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    return (auth && !strncmp(auth, "Bearer ", 7) && !strcmp(auth + 7, srv->p->api_key)) ||
           (key && !strcmp(key, srv->p->api_key));
}

static enum MHD_Result dispatch(struct MHD_Connection *c, conn *st) {
    server *srv = st->srv;
    static const struct {
        const char *path, *method;
        int route;
    } routes[] = {{"/health", "GET", 0},           {"/v1/models", "GET", 1},
                  {"/models", "GET", 1},           {"/metrics", "GET", 2},
                  {"/v1/chat/completions", "POST", 3}, {"/chat/completions", "POST", 3},
                  {"/v1/completions", "POST", 4},  {"/completions", "POST", 4},
                  {"/v1/messages", "POST", 5},     {"/v1/responses", "POST", 6}};
    static const char response_path[] = "/v1/responses/"; /* + id: GET (route 7) and DELETE (route 8) */
    const size_t response_prefix = sizeof response_path - 1;
    st->api = !strncmp(st->path, "/v1/messages", 12)    ? API_MESSAGES
              : !strncmp(st->path, "/v1/responses", 13) ? API_RESPONSES
                                                         : API_OPENAI;
    int route = -1;
    const char *allowed = NULL;
    if (!strncmp(st->path, response_path, response_prefix) && st->path[response_prefix]) {
        allowed = "GET or DELETE";
        route = !strcmp(st->method, "GET") ? 7 : !strcmp(st->method, "DELETE") ? 8 : -1;
    }
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (strcmp(st->path, routes[i].path)) continue;
        allowed = routes[i].method;
        if (!strcmp(st->method, routes[i].method)) route = routes[i].route;
    }
    if (!allowed) {
        char msg[400];
        snprintf(msg, sizeof msg, "Unknown path %.300s", st->path);
        return fail(c, st, 404, "invalid_request_error", NULL, "not_found", msg);
    }
    if (route < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s %.300s is not allowed; use %s", st->method, st->path, allowed);
        return fail(c, st, 405, "invalid_request_error", NULL, "method_not_allowed", msg);
    }
    if (route != 0 && !authorized(c, srv))
        return fail(c, st, 401, "invalid_request_error", NULL, "invalid_api_key",
                    "Missing or incorrect API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'.");
    if (st->too_large) {
        char msg[200];
        snprintf(msg, sizeof msg, "The request body exceeds the limit of %zu bytes.", srv->p->max_body);
        return fail(c, st, 413, "invalid_request_error", NULL, "request_too_large", msg);
    }
    switch (route) {
    case 0:
        return send_json(c, st, 200, json_pack("{s:s,s:s,s:s}", "status", "ok", "kernels", fkv_kernels_name(), "spec",
                                               fkv_spec_mode_name(srv->p->spec.mode)));
    case 1: {
        fkv_model_info info = fkv_model_get_info(srv->model);
        return send_json(c, st, 200,
                         json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:{s:i,s:i}}]}", "object", "list", "data", "id", info.name,
                                   "object", "model", "created", (json_int_t)0, "owned_by", "flatkv", "meta", "n_ctx",
                                   (int)sched_n_ctx(srv->sched), "n_vocab", (int)info.n_vocab));
    }
    case 2: {
        fkv_engine_stats kv = sched_stats(srv->sched);
        metrics_load load = {.max_queue = srv->p->max_queue, .max_connections = srv->p->max_connections};
        sched_load(srv->sched, &load.queued, &load.running);
        pthread_mutex_lock(&srv->mu);
        load.connections = srv->connections;
        pthread_mutex_unlock(&srv->mu);
        char *text = metrics_render(srv->metrics, &kv, &load);
        return send_text(c, st, 200, "text/plain; version=0.0.4", text ? text : strdup(""));
    }
    case 3: case 5: case 6: return run_completion(c, st, OAI_CHAT); /* 5, 6: st->api says which */
    case 7: case 8: {
        /* A stored response is its cache_salt's: GET and DELETE name it as ?cache_salt=, as POST does in the body. */
        const char *salt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cache_salt");
        const char *id = st->path + response_prefix;
        oai_error e;
        json_t *r = route == 7 ? resp_store_get(srv->responses, id, salt, &e) : resp_store_delete(srv->responses, id, salt, &e);
        return r ? send_json(c, st, 200, r) : send_error(c, st, &e);
    }
    default: return run_completion(c, st, OAI_COMPLETION);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    server *srv = cls;
    conn *st = *con_cls;
    if (!st) {
        oai_json_failed(); /* what this thread met before is not this request's */
        if (!(st = calloc(1, sizeof *st))) return MHD_NO;
        st->srv = srv;
        st->t0 = sched_now_ms();
        snprintf(st->method, sizeof st->method, "%s", method);
        snprintf(st->path, sizeof st->path, "%s", url);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        st->fd = ci ? ci->connect_fd : -1;
        const char *session = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Session-Id");
        if (session) set_log_key(st->key, session);
        *con_cls = st;
        pthread_mutex_lock(&srv->mu);
        const bool over_limit = srv->connections > srv->p->max_connections;
        pthread_mutex_unlock(&srv->mu);
        if (!over_limit) return MHD_YES;
        /* Answered before any body is read (libmicrohttpd takes a response then, and discards the body). */
        st->close = true;
        oai_error e;
        oai_fail(&e, 503, "server_error", NULL, "busy", "The server is at its limit of %u open connections "
                 "(--max-connections); retry after 1 s.", srv->p->max_connections);
        e.retry_after = 1;
        return send_error(c, st, &e);
    }
    if (*upload_size) {
        if (srv->p->body_timeout_s && sched_now_ms() - st->t0 > srv->p->body_timeout_s * 1e3) {
            /* A client this slow holds a connection thread: close it. No answer can go first — libmicrohttpd
             * queues none while a body is arriving — so the log and /metrics say 408. */
            metrics_count_rejected(srv->metrics, METRICS_BODY_TIMEOUT);
            st->status = 408;
            return MHD_NO;
        }
        if (st->len + *upload_size > srv->p->max_body) {
            st->too_large = true; /* keep reading, discard: the client gets its 413 after sending */
        } else {
            if (st->len + *upload_size + 1 > st->cap) {
                size_t cap = (st->len + *upload_size + 1) * 2;
                char *grown = realloc(st->body, cap);
                if (!grown) return MHD_NO;
                st->body = grown;
                st->cap = cap;
            }
            memcpy(st->body + st->len, upload_data, *upload_size);
            st->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return dispatch(c, st);
}

/* Open connections, counted for --max-connections and /metrics. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    (void)c, (void)socket_context;
    server *srv = cls;
    pthread_mutex_lock(&srv->mu);
    srv->connections += code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
    pthread_mutex_unlock(&srv->mu);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c;
    server *srv = cls;
    conn *st = *con_cls;
    if (!st) return;
    uint32_t prompt = 0, cached = 0, generated = 0;
    char diverged[96] = "";
    if (st->job) {
        sched_job *j = st->job;
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
            for (uint32_t k = 0; k <= j->n_followers; k++) sched_job_cancel(k ? j->followers[k - 1] : j);
        pthread_mutex_lock(&j->mu);
        /* A cancelled job ends at its next token; wait briefly so its work is logged and counted. */
        for (int waited = 0; !j->prog.done && waited < 1000; waited += LIVENESS_MS)
            sched_job_wait_locked(j, SIZE_MAX, LIVENESS_MS);
        if (j->prog.error.code == FKV_E_TIMEOUT) metrics_count_rejected(srv->metrics, METRICS_DEADLINE);
        if (j->prog.done && !j->prog.error.code) {
            prompt = j->req.n_ids, cached = j->prog.cached, generated = j->prog.n_gen;
            int at = j->prog.diverged ? snprintf(diverged, sizeof diverged, " diverged_at=%u", j->prog.diverged_at) : 0;
            if (j->prog.reuse.held <
                j->prog.reuse.capped) /* the rest agreed, but the window layers no longer held its rows */
                at += snprintf(diverged + at, sizeof diverged - (size_t)at, " window_held=%u/%u", j->prog.reuse.held,
                               j->prog.reuse.capped);
            if (j->prog.reuse.from_disk)
                snprintf(diverged + at, sizeof diverged - (size_t)at, " disk=%u", j->prog.reuse.from_disk);
            const metrics_completion done = {.prompt = prompt, .cached = cached, .generated = generated,
                                             .drafted = j->prog.drafted, .accepted = j->prog.accepted,
                                             .prefill_ms = j->prog.prefill_ms, .decode_ms = j->prog.decode_ms};
            metrics_count_completion(srv->metrics, &done);
        }
        pthread_mutex_unlock(&j->mu);
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && st->status == 200) st->status = 499;
        sched_job_release(srv->sched, j);
    }
    if (st->status) metrics_count_request(srv->metrics, st->status);
    fprintf(stderr, "%s %s %d prompt=%u cached=%u generated=%u%s%s%s %.1fms\n", st->method, st->path, st->status,
            prompt, cached, generated, diverged, st->key[0] ? " key=" : "", st->key, sched_now_ms() - st->t0);
    resp_request_free(&st->rreq);
    free(st->body);
    free(st->pending);
    free(st);
    *con_cls = NULL;
}

int server_run(const fkv_model *m, const server_params *p, fkv_error *err) {
    /* Signals are taken by sigwait below; every thread started from here on inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(p->port)};
    const char *host = strcmp(p->host, "localhost") ? p->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        err_input(err, "--host '%s' is not an IPv4 address", p->host);
        return -1;
    }
    oai_json_init();
    /* One thread per connection: glibc would give the threads arenas of their own, up to 8 per core, each keeping its
     * freed memory — RSS crept up 1 MB in a 10-minute soak that way, and stayed flat (±0.3 MB) with 2. */
    mallopt(M_ARENA_MAX, 2);
    server srv = {.model = m, .p = p, .metrics = metrics_new(), .mu = PTHREAD_MUTEX_INITIALIZER};
    if (!(srv.sched = sched_new(m, &p->engine, p->parallel, p->max_queue, err))) {
        metrics_free(srv.metrics);
        return -1;
    }
    if (sched_note(srv.sched)) fprintf(stderr, "flatkv serve: %s\n", sched_note(srv.sched));
    srv.oai = (oai_context){m, &p->tmpl, sched_n_ctx(srv.sched), p->spec};
    if (!(srv.responses = resp_store_new(p->responses_max, p->responses_mem))) {
        err_nomem(err, "out of memory");
        sched_free(srv.sched);
        metrics_free(srv.metrics);
        return -1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC, p->port, NULL, NULL,
        on_request, &srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        &srv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(p->body_timeout_s ? p->body_timeout_s : 600),
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, &srv, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(p->max_connections + REFUSAL_SLOTS), MHD_OPTION_END);
    if (!d) {
        err_io(err, "cannot listen on %s:%u (in use, or not an address of this machine)",
                 p->host, p->port);
        sched_free(srv.sched);
        metrics_free(srv.metrics);
        resp_store_free(srv.responses);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "flatkv serve: listening on http://%s:%u\n", host, info ? info->port : p->port);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "flatkv serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_socket listen_fd = MHD_quiesce_daemon(d);
    if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
    sched_stop(srv.sched);  /* what runs and what waits ends now; connections see their jobs done */
    MHD_stop_daemon(d);     /* joins the connection threads */
    sched_free(srv.sched);
    metrics_free(srv.metrics);
    resp_store_free(srv.responses);
    return 0;
}
