/*
 * JSON text for host->set_app_metadata(): strings from a target (thread
 * names, paths, versions) are hostile and may be invalid UTF-8.
 */
#ifndef POLYPROF_KIT_JSON_H
#define POLYPROF_KIT_JSON_H

#include <stddef.h>

/* Writes `in` as a quoted JSON string into out (cap bytes, always
 * terminated; a string that does not fit is cut at a character boundary
 * and still closed). Control characters are escaped, invalid UTF-8 bytes
 * become U+FFFD. Returns the length written, excluding the NUL. */
size_t pp_json_string(char *out, size_t cap, const char *in);

#endif
