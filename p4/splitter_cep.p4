/*
 * The splitter with complex event processing: p4/splitter.p4 built with CEP
 * defined, so that every event also goes through the CEP stage (cep.p4,
 * docs/p4.md, "The CEP stage").  A topology with `cep:` rules runs on this
 * build; every other runs on splitter.p4, which pays nothing for it (bmv2
 * resets every metadata field of every frame).
 */
#define CEP
#include "splitter.p4"
