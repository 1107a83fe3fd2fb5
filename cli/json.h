/* json: strings, numbers and matrices for JSON written by the CLI. Strings are safe inside an
 * HTML <script> block too: '<', '>' and '&' come out as \u escapes (no "</script>" or "<!--"
 * can appear), U+2028 and U+2029 escaped, and invalid UTF-8 replaced by U+FFFD, so any input
 * gives valid JSON. */
#ifndef ATTEND_JSON_H
#define ATTEND_JSON_H

#include <stdio.h>

/* The length (1-4) of the well-formed UTF-8 character at p, 0 when p starts none (an
 * invalid, overlong, surrogate or cut sequence; p NUL-terminated). */
int json_utf8_len(const unsigned char *p);
/* s as a JSON string literal, quotes included. */
void json_str(FILE *f, const char *s);
/* n strings as a JSON array. */
void json_strs(FILE *f, const char *const *s, int n);
/* n numbers as a JSON array, "%.7g" each. */
void json_floats(FILE *f, const float *x, int n);
/* A [rows, cols] matrix as an array of rows, one row a line, each indented by indent and two
 * spaces; the closing bracket on its own line after indent. */
void json_matrix(FILE *f, const float *m, int rows, int cols, const char *indent);

#endif
