/* http.c — libmicrohttpd plumbing: routing, authentication, body limits, responses (JSON and Server-Sent
 * Events), client liveness, logging, and the signals: shutdown, and the keys' reload (server.h).
 *
 * Routing is two tables: the APIs' rows (api.h), each POSTed at its paths and answered through its row, and the
 * routes below for what is not an API. The path alone picks the error shape of a refusal (the row whose path begins
 * it, else OpenAI's).
 *
 * One thread per connection: a connection thread may block while its job is queued or generating. It
 * wakes every LIVENESS_MS to look at its socket, so a client that went away cancels its generation
 * within that time even when no token is ready to be written.
 *
 * Keys: a request's key is looked up once, when it is routed, and the tenant it names (tenants.h) is copied into the
 * request, which keeps it to the end: a reload (SIGHUP) swaps the table under a lock and changes no request in flight.
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
#include "models.h"
#include "openai.h"
#include "responses.h"
#include "scheduler.h"
#include "server.h"
#include "tenants.h"
#include "web.h"

#define LIVENESS_MS 50

/* The APIs the server speaks; a new one is a file that defines its row, and its line here. */
static const api *const apis[] = {&oai_chat, &oai_completions, &anth_messages, &resp_responses};
static const api *const default_api = &oai_chat; /* the shape of errors on paths no API claims */

typedef struct {
    const server_params *p;
    models *models;
    metrics *metrics;
    pthread_mutex_t mu;
    uint32_t connections; /* open now (guarded by mu) */
    pthread_rwlock_t keys_mu;
    tenants *keys; /* the keys and their tenants (guarded by keys_mu: swapped by a reload); NULL: no key needed */
} server;

/* MHD itself would leave connections past its limit unaccepted in the kernel's backlog, where a client waits
 * without a word; flatkv accepts this many more, to answer each with a 503 and close it. */
#define REFUSAL_SLOTS 64

/* One request, from its first header to its completion callback. */
typedef struct {
    server *srv;
    char method[16];
    char path[256];
    const char *id; /* what follows a route's path that ends in '/' */
    char *body;
    size_t len, cap;
    bool too_large;
    bool close;           /* the response closes the connection (a refusal past --max-connections) */
    unsigned retry_after; /* a Retry-After header on the response (seconds); 0: none */
    char key[65];         /* the routing key, for the log: X-Session-Id, else prompt_cache_key */
    int status;
    double t0;
    int fd;
    const api *api; /* the path's: the shape of its errors and, for a completion, its parser and answers */
    tenant tenant;  /* whom its key names ("": no key needed) */
    models_slot *slot; /* a completion's model, held until the request completes */
    api_context ctx;   /* the model's context, with the tenant's cache: what the body is parsed with */
    sched_job *job;
    api_request req;
    /* streaming */
    char *pending;
    size_t pending_len, pending_off;
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

/* Cancel every choice of a request. */
static void cancel_choices(sched_job *job) {
    for (uint32_t k = 0; k <= job->n_followers; k++) sched_job_cancel(sched_job_choice(job, k));
}

/* Queue response r with status (the log's and /metrics' too), and let go of it. */
static enum MHD_Result queue(struct MHD_Connection *c, conn *st, int status, struct MHD_Response *r) {
    st->status = status;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
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
    return queue(c, st, status, r);
}

static enum MHD_Result send_json(struct MHD_Connection *c, conn *st, int status, json_t *body) {
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (api_json_failed() || !text) { /* the body lost parts as it was built: never send it as if whole */
        free(text);
        static const char failed[] = "{\"error\": {\"message\": \"out of memory building the response\", \"type\": "
                                     "\"server_error\", \"param\": null, \"code\": \"out_of_memory\"}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(failed), (void *)failed, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "application/json");
        return queue(c, st, 500, r);
    }
    return send_text(c, st, status, "application/json", text);
}

static enum MHD_Result send_error(struct MHD_Connection *c, conn *st, const api_error *e) {
    st->retry_after = e->retry_after;
    return send_json(c, st, e->status, st->api->error_body(e));
}

static enum MHD_Result fail(struct MHD_Connection *c, conn *st, int status, const char *type, const char *param,
                            const char *code, const char *message) {
    api_error e;
    api_fail(&e, status, type, param, code, "%s", message);
    return send_error(c, st, &e);
}

/* The events the job's progress allows now, as Server-Sent Events on the pending output: under their type where the
 * row names its events ("event: TYPE\n"), then "data: " and the event (a string as it is, else its JSON), "\n\n".
 * An event that could not be made breaks the stream: it must not look whole. Returns true if any was queued. */
static bool produce_events(conn *st) {
    const size_t before = st->pending_len;
    json_t *events = json_array(), *event;
    pthread_mutex_lock(&st->job->mu);
    if (events) st->api->stream(&st->req, st->job, events);
    pthread_mutex_unlock(&st->job->mu);
    size_t i;
    json_array_foreach(events, i, event) {
        char *json = json_is_string(event) ? NULL : json_dumps(event, JSON_COMPACT);
        const char *data = json ? json : json_string_value(event);
        const char *type = st->api->named_events ? json_string_value(json_object_get(event, "type")) : "";
        char *grown = data && type && !api_json_failed()
                          ? realloc(st->pending, st->pending_len + strlen(data) + strlen(type) + 17)
                          : NULL;
        if (grown) {
            st->pending = grown;
            if (*type) st->pending_len += (size_t)sprintf(st->pending + st->pending_len, "event: %s\n", type);
            st->pending_len += (size_t)sprintf(st->pending + st->pending_len, "data: %s\n\n", data);
        } else {
            st->broken = true;
        }
        free(json);
    }
    if (!events || api_json_failed()) st->broken = true;
    json_decref(events);
    return st->pending_len > before;
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
            cancel_choices(st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (st->req.finished) return MHD_CONTENT_READER_END_OF_STREAM;
        uint32_t waiting = 0; /* the first choice still going: its progress wakes this reader (the others' shows at
                               * the next wake, at most LIVENESS_MS later) */
        while (waiting < st->job->n_followers && st->req.choice[waiting].done) waiting++;
        sched_job *w = sched_job_choice(st->job, waiting);
        pthread_mutex_lock(&w->mu);
        sched_job_wait_locked(w, st->req.choice[waiting].sent, LIVENESS_MS);
        pthread_mutex_unlock(&w->mu);
        if (!produce_events(st) && client_gone(st->fd)) {
            cancel_choices(st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

/* --- the routes --- */

/* The 404 of a path nothing serves. */
static enum MHD_Result unknown_path(struct MHD_Connection *c, conn *st) {
    char msg[400];
    snprintf(msg, sizeof msg, "Unknown path %.300s", st->path);
    return fail(c, st, 404, "invalid_request_error", NULL, "not_found", msg);
}

/* When the request must be answered by (--timeout from its arrival; 0: no bound). */
static double request_deadline(const conn *st) {
    return st->srv->p->timeout_s ? st->t0 + st->srv->p->timeout_s * 1e3 : 0;
}

/* The model the body names, loaded and held for the request (released when it completes). 0, or -1 with e. */
static int acquire_model(conn *st, api_error *e) {
    char *name = api_body_model(st->body ? st->body : "", st->len);
    const int refused = models_acquire(st->srv->models, name, request_deadline(st), &st->slot, e);
    free(name);
    return refused;
}

/* POST to an API's path: the model the body names, then parse, queue, and stream the events or answer once every
 * choice is done. */
static enum MHD_Result complete(struct MHD_Connection *c, conn *st) {
    server *srv = st->srv;
    api_error e;
    const double deadline_ms = request_deadline(st);
    if (acquire_model(st, &e)) return send_error(c, st, &e);
    sched *sched = models_sched(st->slot);
    if (!(st->job = sched_job_new())) return fail(c, st, 500, "server_error", NULL, NULL, "out of memory");
    st->ctx = *models_context(st->slot);
    st->ctx.tenant = tenants_cache(&st->tenant);
    if (st->api->parse(&st->ctx, st->body ? st->body : "", st->len, &st->req, st->job, &e)) {
        sched_job_release(sched, st->job); /* never queued: nothing to wait for */
        st->job = NULL;
        return send_error(c, st, &e);
    }
    if (!st->key[0]) set_log_key(st->key, st->req.cache_key);
    st->job->req.deadline_ms = deadline_ms; /* copied by followers */
    /* The other choices: the same request, each with its seed + i, started from this one's prompt. */
    for (uint32_t i = 1; i < st->req.n; i++) {
        sched_job *f = sched_job_follower(st->job, st->job->req.sampling.seed + i);
        if (!f) {
            sched_job_release(sched, st->job);
            st->job = NULL;
            return fail(c, st, 500, "server_error", NULL, NULL, "out of memory");
        }
        sched_job_release(sched, f); /* the leader keeps it */
    }
    fkv_error busy = {0};
    uint32_t retry_after = 0;
    if (sched_submit(sched, st->job, &retry_after, &busy)) {
        sched_job_release(sched, st->job);
        st->job = NULL;
        metrics_count_rejected(srv->metrics, METRICS_QUEUE_FULL);
        api_fail_with(&e, NULL, &busy);
        e.retry_after = retry_after;
        return send_error(c, st, &e);
    }
    if (st->req.stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, st, NULL);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        return queue(c, st, 200, r);
    }
    sched_job *j = st->job;
    for (uint32_t i = 0; i <= j->n_followers; i++) { /* every choice */
        sched_job *choice = sched_job_choice(j, i);
        pthread_mutex_lock(&choice->mu);
        while (!choice->prog.done) {
            sched_job_wait_locked(choice, SIZE_MAX, LIVENESS_MS);
            if (!choice->prog.done && client_gone(st->fd)) {
                pthread_mutex_unlock(&choice->mu);
                cancel_choices(j);
                st->status = 499; /* client closed the request */
                return MHD_NO;
            }
        }
        pthread_mutex_unlock(&choice->mu);
        if (choice->prog.error.code) {
            api_fail_with(&e, NULL, &choice->prog.error);
            return send_error(c, st, &e);
        }
    }
    return send_json(c, st, 200, st->api->respond(&st->req, j));
}

static enum MHD_Result health(struct MHD_Connection *c, conn *st) {
    return send_json(c, st, 200, json_pack("{s:s,s:s,s:s}", "status", "ok", "kernels", fkv_kernels_name(), "spec",
                                           fkv_spec_mode_name(st->srv->p->spec.mode)));
}

static enum MHD_Result list_models(struct MHD_Connection *c, conn *st) {
    return send_json(c, st, 200, models_list(st->srv->models));
}

static enum MHD_Result get_model(struct MHD_Connection *c, conn *st) {
    api_error e;
    json_t *model = models_get(st->srv->models, st->id, &e);
    return model ? send_json(c, st, 200, model) : send_error(c, st, &e);
}

/* Anthropic's count of what POST /v1/messages would prefill, on the model the body names. */
static enum MHD_Result count_tokens(struct MHD_Connection *c, conn *st) {
    api_error e;
    if (acquire_model(st, &e)) return send_error(c, st, &e);
    json_t *r = anth_count_tokens(models_context(st->slot), st->body ? st->body : "", st->len, &e);
    return r ? send_json(c, st, 200, r) : send_error(c, st, &e);
}

/* The engine counters are the first loaded model's; the queue and running requests every loaded model's. */
static enum MHD_Result scrape_metrics(struct MHD_Connection *c, conn *st) {
    server *srv = st->srv;
    fkv_engine_stats kv = {0};
    metrics_load load = {.max_queue = srv->p->max_queue, .max_connections = srv->p->max_connections};
    models_stats(srv->models, &kv, &load.queued, &load.running);
    pthread_mutex_lock(&srv->mu);
    load.connections = srv->connections;
    pthread_mutex_unlock(&srv->mu);
    char *text = metrics_render(srv->metrics, &kv, &load);
    return send_text(c, st, 200, "text/plain; version=0.0.4", text ? text : strdup(""));
}

/* A stored response is its salt's: GET and DELETE name its cache_salt as ?cache_salt=, as POST does in the body, and
 * the key's tenant composes it as it composed POST's (tenants_salt), so no tenant reaches another's. */
static enum MHD_Result stored_response(struct MHD_Connection *c, conn *st,
                                       json_t *(*op)(resp_store *, const char *, const char *, api_error *)) {
    const char *given = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cache_salt");
    api_error e;
    fkv_error err = {0};
    char *salt;
    if (tenants_salt(tenants_cache(&st->tenant), given, &salt, &err)) {
        api_fail_with(&e, "cache_salt", &err);
        return send_error(c, st, &e);
    }
    json_t *r = models_stored_response(st->srv->models, st->id, salt, op, &e);
    free(salt);
    return r ? send_json(c, st, 200, r) : send_error(c, st, &e);
}

static enum MHD_Result get_response(struct MHD_Connection *c, conn *st) {
    return stored_response(c, st, resp_store_get);
}

static enum MHD_Result delete_response(struct MHD_Connection *c, conn *st) {
    return stored_response(c, st, resp_store_delete);
}

/* The chat page (web.h): "/" is its index.html, "/web/NAME" the rest. Open: the page is what asks for the key. The
 * policy keeps the page to its own files and this server, so nothing the model writes can load or run anything. */
static enum MHD_Result web_page(struct MHD_Connection *c, conn *st) {
    const web_file *f = web_find(st->id);
    if (!f) {
        return unknown_path(c, st);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(f->len, (void *)f->bytes, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", f->content_type);
    MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'; img-src 'self' data:");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return queue(c, st, 200, r);
}

/* Where a request goes: its method, and its path — exact, or where it ends in '/' (but "/" itself), any id after it;
 * NULL: every path of an API's row. */
static const struct route {
    const char *method, *path;
    enum MHD_Result (*handler)(struct MHD_Connection *c, conn *st);
    bool open; /* answered without the API key */
} routes[] = {
    {"GET", "/health", health, true},
    {"GET", "/v1/models", list_models, false},
    {"GET", "/models", list_models, false},
    {"GET", "/v1/models/", get_model, false},
    {"GET", "/models/", get_model, false},
    {"GET", "/metrics", scrape_metrics, false},
    {"POST", NULL, complete, false},
    {"POST", "/v1/messages/count_tokens", count_tokens, false},
    {"GET", "/v1/responses/", get_response, false},
    {"DELETE", "/v1/responses/", delete_response, false},
    {"GET", "/", web_page, true},
    {"GET", "/web/", web_page, true},
};

/* The row whose paths include path (exact), or one of which begins it (else). NULL: none. */
static const api *api_of(const char *path, bool exact) {
    for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
        for (const char *const *p = apis[i]->paths; *p; p++)
            if (exact ? !strcmp(path, *p) : !strncmp(path, *p, strlen(*p))) return apis[i];
    return NULL;
}

static bool route_matches(const struct route *r, const char *path) {
    if (!r->path) return api_of(path, true) != NULL;
    const size_t n = strlen(r->path);
    return n > 1 && r->path[n - 1] == '/' ? !strncmp(path, r->path, n) && path[n] : !strcmp(path, r->path);
}

/* The key as OpenAI's clients send it (Authorization: Bearer) or as Anthropic's do (x-api-key), on every route: its
 * tenant copied into st. false: no key the server knows. */
static bool authenticate(struct MHD_Connection *c, server *srv, conn *st) {
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    pthread_rwlock_rdlock(&srv->keys_mu);
    bool known = !srv->keys;
    if (!known && auth && !strncmp(auth, "Bearer ", 7)) known = tenants_find(srv->keys, auth + 7, &st->tenant);
    if (!known && key) known = tenants_find(srv->keys, key, &st->tenant);
    pthread_rwlock_unlock(&srv->keys_mu);
    return known;
}

static enum MHD_Result dispatch(struct MHD_Connection *c, conn *st) {
    server *srv = st->srv;
    const api *own = api_of(st->path, false);
    st->api = own ? own : default_api;
    const struct route *route = NULL;
    char allowed[64] = ""; /* the methods the path takes */
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (!route_matches(&routes[i], st->path)) continue;
        const size_t at = strlen(allowed);
        snprintf(allowed + at, sizeof allowed - at, "%s%s", at ? " or " : "", routes[i].method);
        if (!strcmp(st->method, routes[i].method)) route = &routes[i];
    }
    if (!allowed[0]) {
        return unknown_path(c, st);
    }
    if (!route) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s %.300s is not allowed; use %s", st->method, st->path, allowed);
        return fail(c, st, 405, "invalid_request_error", NULL, "method_not_allowed", msg);
    }
    if (!route->open && !authenticate(c, srv, st)) {
        metrics_count_auth_failure(srv->metrics);
        return fail(c, st, 401, "invalid_request_error", NULL, "invalid_api_key",
                    "Missing or incorrect API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'.");
    }
    if (st->too_large) {
        char msg[200];
        snprintf(msg, sizeof msg, "The request body exceeds the limit of %zu bytes.", srv->p->max_body);
        return fail(c, st, 413, "invalid_request_error", NULL, "request_too_large", msg);
    }
    if (route->path) st->id = st->path + strlen(route->path);
    return route->handler(c, st);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    server *srv = cls;
    conn *st = *con_cls;
    if (!st) {
        api_json_failed(); /* what this thread met before is not this request's */
        if (!(st = calloc(1, sizeof *st))) return MHD_NO;
        st->srv = srv;
        st->api = default_api; /* a refusal before the path is routed is OpenAI's */
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
        api_error e;
        api_fail(&e, 503, "server_error", NULL, "busy", "The server is at its limit of %u open connections "
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
    const char *who = st->tenant.name[0] ? st->tenant.name : NULL; /* the key's tenant: its name, never the key */
    uint32_t prompt = 0, cached = 0, generated = 0;
    char diverged[128] = "";
    if (st->job) {
        sched_job *j = st->job;
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) cancel_choices(j);
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
            if (j->prog.reuse.state < j->prog.reuse.held) /* held, but no recurrent state is kept there */
                at += snprintf(diverged + at, sizeof diverged - (size_t)at, " state=%u/%u", j->prog.reuse.state,
                               j->prog.reuse.held);
            if (j->prog.reuse.from_disk)
                snprintf(diverged + at, sizeof diverged - (size_t)at, " disk=%u", j->prog.reuse.from_disk);
            const metrics_completion done = {.prompt = prompt, .cached = cached, .generated = generated,
                                             .drafted = j->prog.drafted, .accepted = j->prog.accepted,
                                             .prefill_ms = j->prog.prefill_ms, .decode_ms = j->prog.decode_ms,
                                             .tenant = who};
            metrics_count_completion(srv->metrics, &done);
        }
        pthread_mutex_unlock(&j->mu);
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && st->status == 200) st->status = 499;
        sched_job_release(models_sched(st->slot), j);
    }
    if (st->slot) models_release(srv->models, st->slot);
    if (st->status) metrics_count_request(srv->metrics, st->status, who);
    fprintf(stderr, "%s %s %d prompt=%u cached=%u generated=%u%s%s%s%s%s %.1fms\n", st->method, st->path, st->status,
            prompt, cached, generated, diverged, st->key[0] ? " key=" : "", st->key, who ? " tenant=" : "",
            who ? who : "", sched_now_ms() - st->t0);
    api_request_free(&st->req);
    free(st->body);
    free(st->pending);
    free(st);
    *con_cls = NULL;
}

/* The keys' count as the log gives it (never a key). */
static void log_keys(const char *when, const tenants *keys, const char *path) {
    fprintf(stderr, "flatkv serve: %s%s: %u key%s of %u tenant%s\n", when, path, tenants_keys(keys),
            tenants_keys(keys) == 1 ? "" : "s", tenants_names(keys), tenants_names(keys) == 1 ? "" : "s");
}

/* SIGHUP: --api-keys FILE again, swapped in whole; a file that does not load leaves the keys as they were. */
static void reload_keys(server *srv) {
    const server_params *p = srv->p;
    if (!p->api_keys) {
        fprintf(stderr, "flatkv serve: SIGHUP: no --api-keys file to reload\n");
        return;
    }
    fkv_error err = {0};
    tenants *fresh = tenants_load(p->api_keys, p->api_key, &err);
    if (!fresh) {
        fprintf(stderr, "flatkv serve: SIGHUP: %s; the keys stay as they were\n", err.msg);
        return;
    }
    pthread_rwlock_wrlock(&srv->keys_mu);
    tenants *old = srv->keys;
    srv->keys = fresh;
    pthread_rwlock_unlock(&srv->keys_mu);
    tenants_free(old); /* nothing points into it: a request copied its tenant under the lock */
    log_keys("SIGHUP: reloaded ", fresh, p->api_keys);
}

int server_run(fkv_model *first, tenants *keys, const server_params *p, fkv_error *err) {
    /* Signals are taken by sigwait below; every thread started from here on inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(p->port)};
    const char *host = strcmp(p->host, "localhost") ? p->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fkv_model_free(first);
        tenants_free(keys);
        err_input(err, "--host '%s' is not an IPv4 address", p->host);
        return -1;
    }
    if (p->api_keys) log_keys("", keys, p->api_keys);
    api_json_init();
    /* One thread per connection: glibc would give the threads arenas of their own, up to 8 per core, each keeping its
     * freed memory — RSS crept up 1 MB in a 10-minute soak that way, and stayed flat (±0.3 MB) with 2. */
    mallopt(M_ARENA_MAX, 2);
    const models_params mp = {.entries = p->models, .n_entries = p->n_models, .max_loaded = p->max_models,
                              .any_model = p->any_model, .engine = &p->engine, .parallel = p->parallel,
                              .max_queue = p->max_queue, .tmpl = p->tmpl, .spec = p->spec,
                              .responses_max = p->responses_max, .responses_mem = p->responses_mem};
    server srv = {.p = p, .metrics = metrics_new(), .mu = PTHREAD_MUTEX_INITIALIZER,
                  .keys_mu = PTHREAD_RWLOCK_INITIALIZER, .keys = keys};
    if (!(srv.models = models_new(&mp, first, err))) {
        metrics_free(srv.metrics);
        tenants_free(srv.keys);
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
        models_free(srv.models);
        metrics_free(srv.metrics);
        tenants_free(srv.keys);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "flatkv serve: listening on http://%s:%u\n", host, info ? info->port : p->port);
    int sig = 0;
    for (;;) {
        sigwait(&sigs, &sig);
        if (sig != SIGHUP) break;
        reload_keys(&srv);
    }
    fprintf(stderr, "flatkv serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_socket listen_fd = MHD_quiesce_daemon(d);
    if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
    models_stop(srv.models); /* what runs and what waits ends now; connections see their jobs done */
    MHD_stop_daemon(d);      /* joins the connection threads */
    models_free(srv.models);
    metrics_free(srv.metrics);
    tenants_free(srv.keys);
    pthread_rwlock_destroy(&srv.keys_mu);
    return 0;
}
