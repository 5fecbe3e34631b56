/* gbnf_leftrec.h — left recursion refused, and the rules that can be empty found.
 *
 * WHY: a rule that can begin with itself (directly, through rules that can be empty, or through a repetition of
 * something that can be empty) would make the parse stacks expand forever; such a grammar is refused, as llama.cpp
 * does, naming the rule it was written in. Which rules can match nothing falls out of the same pass, and lowering
 * needs it (a counted repetition of an item that can be empty is no counter).
 *
 * INVARIANT: after gbnf_check_left_recursion, p->nullable[r] is 1 exactly when rule r can match the empty string
 * (p->nullable is set, or NULL, even on failure; gbnf_parser_free frees it).
 *
 * Thread-safety: works on one gparser.
 */
#ifndef FKV_GBNF_LEFTREC_H
#define FKV_GBNF_LEFTREC_H

#include "constrain/gbnf.h"

/* 0, or -1 with the error recorded in p: left recursion (naming the rule), or out of memory. */
int gbnf_check_left_recursion(gparser *p);

#endif
