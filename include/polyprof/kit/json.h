/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text for host->set_app_metadata(): strings from a target (thread
 * names, paths, versions) are hostile and may be invalid UTF-8.
 */
#ifndef POLYPROF_KIT_JSON_H
#define POLYPROF_KIT_JSON_H

#include <stddef.h>
#include <stdint.h>

/* Writes `in` as a quoted JSON string into out (cap bytes, always
 * terminated; a string that does not fit is cut at a character boundary
 * and still closed). Control characters are escaped, invalid UTF-8 bytes
 * become U+FFFD. Returns the length written, excluding the NUL. */
size_t pp_json_string(char *out, size_t cap, const char *in);

/* Length of the valid UTF-8 sequence at s (1 to 4 bytes, at most n), 0
 * if it is not one (a stray continuation byte, a cut sequence, an overlong
 * form, a surrogate, beyond U+10FFFF). *cp (optional) gets the code point.
 * The one definition of "valid" for every writer of text a target chose. */
size_t pp_utf8_decode(const char *s, size_t n, uint32_t *cp);

#endif
