/*
 * The least CEP stage on bmv2: what P4CEP's Fig. 4 pattern costs with none
 * of the CEP build's generality.  One window of CEP_DEPTH values of the event's
 * value, keeping max(w); one pattern of two basic events,
 * [value >= FLOOR_FIRST_AT_LEAST]; [max(w) >= FLOOR_THEN_MAX_AT_LEAST],
 * its predicates compiled in and its state machine in a (state, symbol)
 * table; a completing event cloned to the sink.  Every event is also
 * forwarded as forward_events.p4 forwards it.
 *
 * Not a target: it holds one rule set, as P4CEP's generated programs do, so
 * a new pattern would mean a recompile.  It exists to be counted beside the
 * CEP build (p4/splitter_cep.p4) and the two forwarding baselines in
 * `make bench` (testbed.experiments.bench.instructions): what is left of
 * the stage's cost once the splitter, the window and pattern slots, the
 * run-time rules and the complex event frame are gone (docs/p4.md, "What an
 * event costs").  The bench holds its output to the oracle's complex events.
 *
 * Values are order-encoded (sign bit flipped), as in cep.p4, so that one
 * unsigned comparison orders signed values.
 */
struct floor_meta_t {
    bit<8>  head;      /* the cell the next value goes to */
    bit<8>  fill;      /* values held */
    bit<64> x;         /* the event's value, order-encoded */
    bit<64> old;       /* the value the new one replaces */
    bit<64> most;      /* max(w), order-encoded */
    bit<8>  state;
    bit<8>  symbol;    /* bit 0: the first predicate holds; bit 1: the second */
    bit<1>  emit;
}
#define FLOOR_META floor_meta_t
#include "events.p4"

const bit<64> FLOOR_FIRST_AT_LEAST = 90 ^ CEP_SIGN;
const bit<64> FLOOR_THEN_MAX_AT_LEAST = 0 ^ CEP_SIGN;
const bit<8>  FLOOR_LAST_CELL = (bit<8>)(CEP_DEPTH - 1);
const bit<8>  FLOOR_FULL = (bit<8>)CEP_DEPTH;
const bit<32> FLOOR_SESSION = 1;   /* the mirror session to the sink's group */

register<bit<64>>(CEP_DEPTH) floor_ring;
register<bit<8>>(1)  floor_head;
register<bit<8>>(1)  floor_fill;
register<bit<64>>(1) floor_max;
register<bit<8>>(1)  floor_state;

/* Cell I, read back into max(w): constant indices, so no index temporaries. */
#define FLOOR_SCAN(I)                                                          \
    floor_ring.read(meta.old, I);                                              \
    if (meta.old > meta.most) { meta.most = meta.old; }

#define FLOOR_SCAN_ALL \
    FLOOR_SCAN(0) FLOOR_SCAN(1) FLOOR_SCAN(2) FLOOR_SCAN(3) \
    FLOOR_SCAN(4) FLOOR_SCAN(5) FLOOR_SCAN(6) FLOOR_SCAN(7) \
    FLOOR_SCAN(8) FLOOR_SCAN(9) FLOOR_SCAN(10) FLOOR_SCAN(11) \
    FLOOR_SCAN(12) FLOOR_SCAN(13) FLOOR_SCAN(14) FLOOR_SCAN(15) \
    FLOOR_SCAN(16) FLOOR_SCAN(17) FLOOR_SCAN(18) FLOOR_SCAN(19) \
    FLOOR_SCAN(20) FLOOR_SCAN(21) FLOOR_SCAN(22) FLOOR_SCAN(23) \
    FLOOR_SCAN(24) FLOOR_SCAN(25) FLOOR_SCAN(26) FLOOR_SCAN(27) \
    FLOOR_SCAN(28) FLOOR_SCAN(29) FLOOR_SCAN(30) FLOOR_SCAN(31)

control FloorIngress(inout event_headers_t hdr, inout floor_meta_t meta,
                     inout standard_metadata_t standard_metadata) {
    FORWARD_BY_PORT

    action step(bit<8> next, bit<1> emit) {
        meta.state = next;
        meta.emit = emit;
    }

    /* Filled by the control plane: (state, symbol) to the next state and
     * whether the event completes a match.  A miss keeps the state. */
    table floor_transition {
        key = {
            meta.state  : exact @name("state");
            meta.symbol : exact @name("symbol");
        }
        actions = { step; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    apply {
        forward.apply();
        if (hdr.event.isValid()) {
            floor_head.read(meta.head, 0);
            floor_fill.read(meta.fill, 0);
            floor_max.read(meta.most, 0);
            meta.x = hdr.event.value ^ CEP_SIGN;
            floor_ring.read(meta.old, (bit<32>)meta.head);
            floor_ring.write((bit<32>)meta.head, meta.x);
            if (meta.head == FLOOR_LAST_CELL) { meta.head = 0; } else { meta.head = meta.head + 1; }
            if (meta.fill == FLOOR_FULL) {
                if (meta.old == meta.most) {
                    /* the greatest left: find the new one among the values held */
                    meta.most = meta.x;
                    FLOOR_SCAN_ALL
                } else if (meta.x > meta.most) {
                    meta.most = meta.x;
                }
            } else {
                if (meta.fill == 0 || meta.x > meta.most) { meta.most = meta.x; }
                meta.fill = meta.fill + 1;
            }
            floor_head.write(0, meta.head);
            floor_fill.write(0, meta.fill);
            floor_max.write(0, meta.most);

            if (meta.x >= FLOOR_FIRST_AT_LEAST) { meta.symbol = 1; }
            if (meta.most >= FLOOR_THEN_MAX_AT_LEAST) { meta.symbol = meta.symbol | 2; }
            floor_state.read(meta.state, 0);
            floor_transition.apply();
            floor_state.write(0, meta.state);
            if (meta.emit == 1) {
                clone(CloneType.I2E, FLOOR_SESSION);
            }
        }
    }
}

V1Switch(EventParser(), EventVerifyChecksum(), FloorIngress(), EventEgress(),
         EventComputeChecksum(), EventDeparser()) main;
