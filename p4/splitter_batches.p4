/*
 * The splitter with batches: p4/splitter.p4 built with BATCHES defined, so
 * that it also takes frames of up to MAX_BATCH events (batches.p4,
 * docs/p4.md, "Batches").  A topology with a batched stream runs on this
 * build; every other runs on splitter.p4, which carries none of the batch
 * path's headers and metadata: bmv2 resets every metadata field of every
 * frame, so they would slow unbatched frames by about a quarter.
 */
#define BATCHES
#include "splitter.p4"
