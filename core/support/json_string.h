/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A JSON string literal written straight to a stream, for the writers that
 * emit JSON by hand because their text is too large to build as a jansson
 * tree first (the speedscope file, the studio upload body carrying a whole
 * .col). The text comes from process names and symbols, so invalid UTF-8 is
 * replaced rather than trusted.
 */
#ifndef PP_SUPPORT_JSON_STRING_H
#define PP_SUPPORT_JSON_STRING_H

#include <stddef.h>
#include <stdio.h>

/* n bytes of s as a JSON string literal, quotes included; invalid UTF-8
 * becomes U+FFFD. */
void pp_json_put_string(FILE *f, const char *s, size_t n);

#endif
