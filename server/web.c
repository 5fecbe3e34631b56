/* web.c — the chat page's files, embedded (web.h). */
#include "web.h"

#include <string.h>

#include "web_files.inc" /* web_files[]: cmake/embed.cmake's output, in the build's generated/ folder */

const web_file *web_find(const char *name) {
    if (!*name) name = "index.html";
    for (size_t i = 0; i < sizeof web_files / sizeof *web_files; i++)
        if (!strcmp(web_files[i].name, name)) return &web_files[i];
    return NULL;
}
