/*
 * S4-style stream splitter for bmv2's v1model (simple_switch).
 *
 * One program carries all four window semantics: count or time windows,
 * tumbling or sliding, chosen per stream at run time by the action of the
 * window_spec table.  docs/p4.md describes the layout and how it maps to
 * S4's pipeline; docs/windows.md the semantics and the division-free
 * algorithm.  Compile with `python -m testbed.targets.bmv2.toolchain`.
 *
 *   constants.p4   named constants shared with testbed/dataplane/contract.py
 *   headers.p4     Ethernet / IPv4 / UDP / event header, metadata
 *   parser.p4      parser, deparser, checksum controls
 *   state.p4       per-stream registers (window state, reconfiguration)
 *   epochs.p4      BoundaryCheck: which bank of configuration serves an event
 *   eventstarts.p4 the (w, c) decision for windows that start at events
 *   slides.p4      the slide tracker: the (w, c) decision, per epoch
 *   batches.p4     the per-event steps of a batch, unrolled per event slot
 *   cep.p4         complex event processing beside the splitter (CEP builds)
 *   forwarding.p4  ingress: window_spec, operator_count, previous_spec,
 *                  next_spec, unicast, multicast, handover
 *   egress.p4      egress_rewrite and the per-copy counters
 */
#include <core.p4>
/* The version whose register and counter take their index's type: the
 * stream's registers are indexed by the event header's own 16-bit field,
 * which no packet pays to copy or reset (docs/p4.md, rule 1). */
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

#include "constants.p4"
#include "headers.p4"
#include "parser.p4"
#include "state.p4"
#include "epochs.p4"
#include "eventstarts.p4"
#include "slides.p4"
#include "counts.p4"
#include "batches.p4"
#include "cep.p4"
#include "forwarding.p4"
#include "egress.p4"

V1Switch(
    MyParser(),
    MyVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    MyComputeChecksum(),
    MyDeparser()
) main;
