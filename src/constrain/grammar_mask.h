/* grammar_mask.h — the tokens that may come next: the vocabulary's trie walked through the DFA.
 *
 * WHY: a mask is asked for at every step, over tens of thousands of tokens, so it must cost microseconds. The walk
 * goes through the trie (grammar_vocab.h) in preorder, stepping the DFA (grammar_dfa.h) by each node's byte, so a
 * prefix that is refused refuses every token under it in one step. Three things keep the walk short where nearly
 * everything is allowed (inside a string):
 * - a subtree whose bytes cannot fail from its node's state — ASCII bytes that all lead to one successor for as many
 *   steps as the subtree is deep, and valid UTF-8 when every character does the same — is allowed whole;
 * - counting states (a string of maxLength 1000 is 1000 of them) are masked through a canonical state with every
 *   count above the vocabulary's horizon H (the token length at most 128 tokens exceed) lowered to H + 1, which
 *   accepts exactly the same byte strings of up to H bytes; the few longer tokens are then checked one by one;
 * - the masks of the last GRAMMAR_MASK_SLOTS (canonical) states are kept: in a string, a mask is mostly a copy.
 * What it costs (docs/performance.md): on average 2-31 µs per token on a 32k vocabulary, 20-310 µs on a 150k one.
 * A sampler may also sample first and check only the token it drew (grammar_token_allowed), masking only when
 * that one is refused.
 *
 * INVARIANT: a kept mask answers for its state only while the state's id means that state (dfa_compact renumbers the
 * states and empties the slots); a mask kept for a canonical state leaves the tokens past the horizon out, and
 * those are checked afresh every time.
 *
 * Thread-safety: as the state's (grammar_dfa.h): one generation at a time; the vocabulary is only read.
 */
#ifndef FKV_GRAMMAR_MASK_H
#define FKV_GRAMMAR_MASK_H

#include <stdbool.h>
#include <stdint.h>

#include "constrain/grammar_dfa.h"
#include "constrain/grammar_vocab.h"

/* allowed[id] = 1 when token id's bytes can continue a valid output from s, else 0; end-of-generation ids are
 * allowed exactly when the output so far is complete. allowed has grammar_vocab_n(gv) entries. No allocation
 * once the state's caches are warm (the first call for a vocabulary makes the kept masks). A grammar that matches
 * nothing, or a state stopped by a bound, allows nothing at all: the caller ends the generation. */
void grammar_allowed(const grammar_state *s, const grammar_vocab *gv, uint8_t *allowed);
/* One entry of that mask, without computing the rest (cost: the token's bytes). For sampling first and masking
 * only when the sampled token is refused. */
bool grammar_token_allowed(const grammar_state *s, const grammar_vocab *gv, int32_t id);
/* Advance s by token id; -1 (s unchanged) when id is not allowed. An allowed end-of-generation id leaves s as it
 * is (complete). */
int grammar_accept(grammar_state *s, const grammar_vocab *gv, int32_t id);

#endif
