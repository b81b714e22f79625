/* Inside views/: JSON helpers of the JSON renderers. */
#ifndef APERTURE_VIEWS_FRAMES_JSON_H
#define APERTURE_VIEWS_FRAMES_JSON_H

#include <stdio.h>
#include <cjson/cJSON.h>

/* A ';'-joined stack (root first) as an array of frame names; null for a NULL stack; NULL
 * when out of memory. */
cJSON *view_frames_json(const char *frames);

/* Prints root and a newline to out, and frees root. 0 or -ENOMEM. */
int view_json_print(cJSON *root, FILE *out);

#endif
