/*
 * The least count-window splitter on bmv2: one stream, its events counted
 * into windows of a size that is a whole number of slides, each window's
 * events sent to its operator, round robin over N.  Tumbling (size = slide)
 * and sliding windows are the same program; only the table's entries
 * differ, so the two are counted on one build.
 *
 * What it leaves out of the splitter (p4/splitter.p4) is what the splitter
 * is measured against: streams looked up by id, time windows, lateness,
 * changes of window or operators mid-stream, drop counters, and the Windows
 * header that tells each operator which windows a copy is for.  Events go
 * out as they came.  So the bench's ratio of the two is the price of that
 * generality plus bmv2's per-field costs, not of splitting as such
 * (docs/p4.md, "The splitter's floor").
 *
 * The run-time configuration is one table, keyed by the window state: the
 * state's operator port (or, for sliding windows, the multicast group of
 * the operators whose windows hold the current slide), the state after it,
 * and the slide length.  An event's windows depend only on which slide it
 * lies in once the size is a multiple of the slide, so two registers hold
 * everything: events seen in the current slide, and the state.  A sliding
 * stream's first size/slide - 1 slides, held by fewer windows, have states
 * of their own from 0 (where the registers start); then a ring of N states,
 * one per operator of the newest window
 * (testbed.experiments.bench.splitter_floor writes the entries).
 */
struct splitter_floor_meta_t {
    bit<32> fill;    /* events of the current slide, this one included */
    bit<8>  state;
    bit<8>  next;    /* the state once this slide is over */
    bit<32> slide;
}
#define FLOOR_META splitter_floor_meta_t
#include "events.p4"

register<bit<32>>(1) floor_fill;
register<bit<8>>(1)  floor_state;

control SplitterFloorIngress(inout event_headers_t hdr, inout splitter_floor_meta_t meta,
                             inout standard_metadata_t standard_metadata) {
    action to_operator(bit<9> port, bit<8> next, bit<32> slide) {
        standard_metadata.egress_spec = port;
        meta.next = next;
        meta.slide = slide;
    }

    action to_operators(bit<16> group, bit<8> next, bit<32> slide) {
        standard_metadata.mcast_grp = group;
        meta.next = next;
        meta.slide = slide;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* A state with no entry is a stream not configured: its events go nowhere. */
    table floor_split {
        key = { meta.state : exact @name("state"); }
        actions = { to_operator; to_operators; @defaultonly drop; }
        const default_action = drop();
        size = 256;
    }

    apply {
        if (hdr.event.isValid()) {
            /* Statements between two tables or conditions become one action
             * of a table p4c makes, and each table applied costs bmv2 more
             * than a primitive: so the reads and the count go before the
             * table, and each branch writes its own state. */
            floor_fill.read(meta.fill, 0);
            floor_state.read(meta.state, 0);
            meta.fill = meta.fill + 1;
            floor_split.apply();
            if (meta.fill == meta.slide) {
                floor_fill.write(0, 0);
                floor_state.write(0, meta.next);
            } else {
                floor_fill.write(0, meta.fill);
            }
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}

V1Switch(EventParser(), EventVerifyChecksum(), SplitterFloorIngress(), EventEgress(),
         EventComputeChecksum(), EventDeparser()) main;
