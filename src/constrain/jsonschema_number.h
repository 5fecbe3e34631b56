/* jsonschema_number.h — integers and numbers within bounds, written digit by digit.
 *
 * WHY: a grammar cannot compare numbers, so a range is written as the decimal strings in it (uint_range):
 * {"minimum": 15, "maximum": 300} admits exactly 15..300 with no leading zeros; numbers with integer bounds split at
 * the integer part and the fraction.
 *
 * multipleOf d is a DFA of the residues mod d as the digits are read, one rule per (residue, digits read).
 *
 * INVARIANT: an integer rule admits exactly the integers within the bounds (clamped to ±(10^16 - 1)), without leading
 * zeros; a bounded number rule admits the decimals within the bounds, with no exponent; a number's bound that is not an
 * integer is refused; under multipleOf, exactly the multiples of up to 15 digits, refused unless the bounds keep or
 * drop all the multiples of each sign.
 *
 * Thread-safety: works on one jsctx.
 */
#ifndef FKV_JSONSCHEMA_NUMBER_H
#define FKV_JSONSCHEMA_NUMBER_H

#include <jansson.h>

#include "constrain/jsonschema_rules.h"

/* b += the rule body of integer schema s (minimum, maximum, exclusive*, multipleOf). */
void js_integer_body(jsctx *c, sbuf *b, json_t *s, const char *path);
/* b += the rule body of number schema s (bounds, if any, integers; under multipleOf, an integer's). */
void js_number_body(jsctx *c, sbuf *b, json_t *s, const char *path);

#endif
