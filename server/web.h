/* web.h — the chat page (web/), built into the binary, by the name it is asked for.
 *
 * WHY: `serve` answers `/` with a page a person can use (chat, and what the cache did per turn) wherever the binary
 * runs — an installed .deb has no source tree to read files from — so cmake/embed.cmake turns the files of web/ into
 * arrays at build time. No file is opened at run time, so no request path can reach the file system.
 *
 * INVARIANT: the files are exactly web/'s at build time; a name is matched whole, never as a path.
 */
#ifndef FLATKV_SERVER_WEB_H
#define FLATKV_SERVER_WEB_H

#include <stddef.h>

typedef struct {
    const char *name; /* as under web/: "index.html", "app.js" */
    const char *content_type;
    const unsigned char *bytes;
    size_t len;
} web_file;

/* The file named `name` ("" is index.html), or NULL when web/ had none of that name. */
const web_file *web_find(const char *name);

#endif
