/*
 * Complex event processing beside the splitter (docs/cep.md; docs/p4.md,
 * "The CEP stage"): built only with CEP defined (splitter_cep.p4).
 *
 * Every event frame goes through three steps after the splitter's own:
 *
 *   1. Window operators.  Each of the CEP_WINDOWS slots whose stream is
 *      the event's takes the event's field into a ring buffer of
 *      CEP_DEPTH cells.  sum and count(w op c) are kept as running values;
 *      min and max too, and only when the value that leaves was the least
 *      or the greatest is the ring scanned again (CEP_SCAN).
 *   2. Patterns.  Each of the CEP_PATTERNS slots on the event's stream
 *      evaluates its comparisons into a symbol (bit c = comparison c), and
 *      looks (state, symbol) up in its transition table: the next state,
 *      and whether the event completes a match.
 *   3. Emission.  An event that completed a match is cloned once
 *      (I2E, session CEP_SESSION) to the multicast group of every sink,
 *      with the matches in the clone's preserved metadata; egress keeps,
 *      per sink port, the complex events whose pattern names that sink
 *      (register cep_sinks) and turns the clone into a complex event
 *      frame (docs/wire.md, "Complex events").
 *
 * All configuration is in registers and tables the control plane writes
 * (testbed.dataplane.cep): a new pattern changes entries only.  Values are
 * compared "order-encoded": a signed value (the event's value, and a
 * sum, min or max over it) has its sign bit flipped, so that one unsigned
 * comparison orders it; the control plane encodes constants alike.
 * testbed/dataplane/model/cep.py is the same stage in Python.
 */
#ifndef SPLITTER_CEP_P4
#define SPLITTER_CEP_P4
#ifdef CEP

/* ---- window operators: configuration (control plane) and state --------- */
register<bit<16>, bit<32>>(CEP_WINDOWS)    cep_window_stream;
register<bit<8>, bit<32>>(CEP_WINDOWS)     cep_window_size;      /* values held at most; 0: slot unused */
register<bit<8>, bit<32>>(CEP_WINDOWS)     cep_window_field;     /* CEP_FIELD_* */
register<bit<8>, bit<32>>(CEP_WINDOWS)     cep_window_test;      /* count(w op c): CEP_OP_*; 0: none */
register<bit<64>, bit<32>>(CEP_WINDOWS)    cep_window_constant;  /* ... and its c, order-encoded */
register<bit<64>, bit<32>>(CEP_RING_CELLS) cep_ring;             /* slot w's values at w * CEP_DEPTH .., order-encoded */
register<bit<8>, bit<32>>(CEP_WINDOWS)     cep_head;             /* the cell the next value goes to */
register<bit<8>, bit<32>>(CEP_WINDOWS)     cep_fill;             /* values held: count(w) */
register<bit<64>, bit<32>>(CEP_WINDOWS)    cep_sum;              /* raw, modulo 2^64 */
register<bit<64>, bit<32>>(CEP_WINDOWS)    cep_min;              /* order-encoded */
register<bit<64>, bit<32>>(CEP_WINDOWS)    cep_max;              /* order-encoded */
register<bit<8>, bit<32>>(CEP_WINDOWS)     cep_passing;          /* count(w op c), running */

/* ---- patterns: configuration and state ---------------------------------- */
register<bit<1>, bit<32>>(CEP_PATTERNS)          cep_pattern_on;
register<bit<16>, bit<32>>(CEP_PATTERNS)         cep_pattern_id;
register<bit<16>, bit<32>>(CEP_PATTERNS)         cep_pattern_stream;
register<bit<8>, bit<32>>(CEP_PATTERNS)          cep_return_operand;   /* CEP_OPERAND_* */
register<bit<32>, bit<32>>(CEP_PATTERNS)         cep_return_window;    /* 32 bits: read straight into a register index */
register<bit<8>, bit<32>>(CEP_COMPARISON_CELLS)  cep_compare_operand;  /* comparison c of slot p at p * CEP_COMPARISONS + c; 0: unused */
register<bit<32>, bit<32>>(CEP_COMPARISON_CELLS) cep_compare_window;   /* 32 bits, as cep_return_window */
register<bit<8>, bit<32>>(CEP_COMPARISON_CELLS)  cep_compare_op;
register<bit<64>, bit<32>>(CEP_COMPARISON_CELLS) cep_compare_constant; /* order-encoded */
register<bit<8>, bit<32>>(CEP_PATTERNS)          cep_state;
register<bit<32>, bit<32>>(CEP_PATTERNS)         cep_matches;
register<bit<8>, bit<32>>(N_PORTS)               cep_sinks;            /* per port: bit p if slot p's pattern sends there */

/* RESULT (bool) = X op C, unsigned, for op CEP_OP_*.  Written as a chain of
 * ifs: p4c gives every operand of && and || a temporary field of its own,
 * and bmv2 zeroes every field of every packet (docs/p4.md, "Three builds"). */
#define CEP_COMPARE(RESULT, X, OP, C)                                          \
    RESULT = false;                                                            \
    if (OP == CEP_OP_LT) { RESULT = X < C; }                                   \
    else if (OP == CEP_OP_LE) { RESULT = X <= C; }                             \
    else if (OP == CEP_OP_EQ) { RESULT = X == C; }                             \
    else if (OP == CEP_OP_NE) { RESULT = X != C; }                             \
    else if (OP == CEP_OP_GE) { RESULT = X >= C; }                             \
    else if (OP == CEP_OP_GT) { RESULT = X > C; }

/* meta.cep.x = the operand meta.cep.operand (of window slot meta.cep.wi),
 * order-encoded; meta.cep.is_signed says whether it was a signed value. */
#define CEP_OPERAND                                                            \
    cep_window_field.read(meta.cep.wfield, meta.cep.wi);                       \
    meta.cep.is_signed = 0;                                                       \
    if (meta.cep.operand == CEP_OPERAND_VALUE) {                               \
        meta.cep.x = hdr.event.value ^ CEP_SIGN;                               \
        meta.cep.is_signed = 1;                                                   \
    } else if (meta.cep.operand == CEP_OPERAND_KEY) {                          \
        meta.cep.x = hdr.event.group_key;                                      \
    } else if (meta.cep.operand == CEP_OPERAND_TS) {                           \
        meta.cep.x = hdr.event.ts;                                             \
    } else if (meta.cep.operand == CEP_OPERAND_SEQ) {                          \
        meta.cep.x = (bit<64>)hdr.event.seq;                                   \
    } else if (meta.cep.operand == CEP_OPERAND_COUNT) {                        \
        cep_fill.read(meta.cep.count, meta.cep.wi);                            \
        meta.cep.x = (bit<64>)meta.cep.count;                                  \
    } else if (meta.cep.operand == CEP_OPERAND_COUNT_IF) {                     \
        cep_passing.read(meta.cep.count, meta.cep.wi);                         \
        meta.cep.x = (bit<64>)meta.cep.count;                                  \
    } else {                                                                   \
        if (meta.cep.operand == CEP_OPERAND_SUM) {                             \
            cep_sum.read(meta.cep.x, meta.cep.wi);                             \
            if (meta.cep.wfield == CEP_FIELD_VALUE) {                          \
                meta.cep.x = meta.cep.x ^ CEP_SIGN;                            \
            }                                                                  \
        } else if (meta.cep.operand == CEP_OPERAND_MIN) {                      \
            cep_min.read(meta.cep.x, meta.cep.wi);                             \
        } else {                                                               \
            cep_max.read(meta.cep.x, meta.cep.wi);                             \
        }                                                                      \
        if (meta.cep.wfield == CEP_FIELD_VALUE) {                              \
            meta.cep.is_signed = 1;                                               \
        }                                                                      \
    }

/* Cell I of window slot W, read back into the least and the greatest. */
#define CEP_SCAN(W, I)                                                         \
    if (I < meta.cep.size) {                                                   \
        cep_ring.read(meta.cep.old, W * CEP_DEPTH + I);                        \
        if (meta.cep.old < meta.cep.least) { meta.cep.least = meta.cep.old; }  \
        if (meta.cep.old > meta.cep.most) { meta.cep.most = meta.cep.old; }    \
    }

#define CEP_SCAN_ALL(W)                                                        \
    CEP_SCAN(W, 0)  CEP_SCAN(W, 1)  CEP_SCAN(W, 2)  CEP_SCAN(W, 3)             \
    CEP_SCAN(W, 4)  CEP_SCAN(W, 5)  CEP_SCAN(W, 6)  CEP_SCAN(W, 7)             \
    CEP_SCAN(W, 8)  CEP_SCAN(W, 9)  CEP_SCAN(W, 10) CEP_SCAN(W, 11)            \
    CEP_SCAN(W, 12) CEP_SCAN(W, 13) CEP_SCAN(W, 14) CEP_SCAN(W, 15)            \
    CEP_SCAN(W, 16) CEP_SCAN(W, 17) CEP_SCAN(W, 18) CEP_SCAN(W, 19)            \
    CEP_SCAN(W, 20) CEP_SCAN(W, 21) CEP_SCAN(W, 22) CEP_SCAN(W, 23)            \
    CEP_SCAN(W, 24) CEP_SCAN(W, 25) CEP_SCAN(W, 26) CEP_SCAN(W, 27)            \
    CEP_SCAN(W, 28) CEP_SCAN(W, 29) CEP_SCAN(W, 30) CEP_SCAN(W, 31)

/* Window slot W, which is over the event's stream, takes its field. */
#define CEP_WINDOW_TAKE(W)                                                     \
    cep_window_field.read(meta.cep.wfield, W);                                 \
    if (meta.cep.wfield == CEP_FIELD_VALUE) {                                  \
        meta.cep.raw = hdr.event.value;                                        \
        meta.cep.x = hdr.event.value ^ CEP_SIGN;                               \
    } else {                                                                   \
        if (meta.cep.wfield == CEP_FIELD_KEY) {                                \
            meta.cep.raw = hdr.event.group_key;                                \
        } else if (meta.cep.wfield == CEP_FIELD_TS) {                          \
            meta.cep.raw = hdr.event.ts;                                       \
        } else {                                                               \
            meta.cep.raw = (bit<64>)hdr.event.seq;                             \
        }                                                                      \
        meta.cep.x = meta.cep.raw;                                             \
    }                                                                          \
    cep_head.read(meta.cep.head, W);                                           \
    cep_fill.read(meta.cep.count, W);                                          \
    cep_sum.read(meta.cep.sum, W);                                             \
    cep_min.read(meta.cep.least, W);                                           \
    cep_max.read(meta.cep.most, W);                                            \
    cep_passing.read(meta.cep.passing, W);                                     \
    cep_window_test.read(meta.cep.op, W);                                      \
    cep_window_constant.read(meta.cep.constant, W);                            \
    meta.cep.cell = W * CEP_DEPTH + (bit<32>)meta.cep.head;                    \
    cep_ring.read(meta.cep.old, meta.cep.cell);                                \
    cep_ring.write(meta.cep.cell, meta.cep.x);                                 \
    if (meta.cep.head + 1 == meta.cep.size) {                                  \
        meta.cep.head = 0;                                                     \
    } else {                                                                   \
        meta.cep.head = meta.cep.head + 1;                                     \
    }                                                                          \
    meta.cep.sum = meta.cep.sum + meta.cep.raw;                                \
    bool full = meta.cep.count == meta.cep.size;                               \
    if (meta.cep.op != 0) {                                                    \
        CEP_COMPARE(passes, meta.cep.x, meta.cep.op, meta.cep.constant)        \
        if (passes) { meta.cep.passing = meta.cep.passing + 1; }               \
    }                                                                          \
    if (full) {                                                                \
        /* the oldest value leaves: undo it in the running values */           \
        if (meta.cep.wfield == CEP_FIELD_VALUE) {                              \
            meta.cep.sum = meta.cep.sum - (meta.cep.old ^ CEP_SIGN);           \
        } else {                                                               \
            meta.cep.sum = meta.cep.sum - meta.cep.old;                        \
        }                                                                      \
        if (meta.cep.op != 0) {                                                \
            CEP_COMPARE(passes, meta.cep.old, meta.cep.op, meta.cep.constant)  \
            if (passes) { meta.cep.passing = meta.cep.passing - 1; }           \
        }                                                                      \
    }                                                                          \
    rescan = false;                                                            \
    if (full) {                                                                \
        if (meta.cep.old == meta.cep.least) { rescan = true; }                 \
        if (meta.cep.old == meta.cep.most) { rescan = true; }                  \
    }                                                                          \
    if (meta.cep.count == 0) {                                                 \
        meta.cep.least = meta.cep.x;                                           \
        meta.cep.most = meta.cep.x;                                            \
    } else if (rescan) {                                                       \
        /* an extreme left: find the new ones among the values held */         \
        meta.cep.least = meta.cep.x;                                           \
        meta.cep.most = meta.cep.x;                                            \
        CEP_SCAN_ALL(W)                                                        \
    } else {                                                                   \
        if (meta.cep.x < meta.cep.least) { meta.cep.least = meta.cep.x; }      \
        if (meta.cep.x > meta.cep.most) { meta.cep.most = meta.cep.x; }        \
    }                                                                          \
    if (!full) { meta.cep.count = meta.cep.count + 1; }                        \
    cep_head.write(W, meta.cep.head);                                          \
    cep_fill.write(W, meta.cep.count);                                         \
    cep_sum.write(W, meta.cep.sum);                                            \
    cep_min.write(W, meta.cep.least);                                          \
    cep_max.write(W, meta.cep.most);                                           \
    cep_passing.write(W, meta.cep.passing);

/* Window slot W takes the event, if it is over the event's stream: one
 * register read and one test for a slot not in use. */
#define CEP_WINDOW(W)                                                          \
    cep_window_size.read(meta.cep.size, W);                                    \
    if (meta.cep.size != 0) {                                                  \
        cep_window_stream.read(meta.cep.stream, W);                            \
        if (meta.cep.stream == hdr.event.stream) { CEP_WINDOW_TAKE(W) }        \
    }

/* Comparison C of pattern slot P, into bit C of the symbol. */
#define CEP_COMPARISON(P, C)                                                   \
    meta.cep.cell = P * CEP_COMPARISONS + C;                                   \
    cep_compare_operand.read(meta.cep.operand, meta.cep.cell);                 \
    if (meta.cep.operand != 0) {                                               \
        cep_compare_window.read(meta.cep.wi, meta.cep.cell);                   \
        cep_compare_op.read(meta.cep.op, meta.cep.cell);                       \
        cep_compare_constant.read(meta.cep.constant, meta.cep.cell);           \
        CEP_OPERAND                                                            \
        CEP_COMPARE(holds, meta.cep.x, meta.cep.op, meta.cep.constant)         \
        if (holds) { meta.cep.symbol = meta.cep.symbol | ((bit<8>)1 << C); }   \
    }

#define CEP_COMPARISONS_OF(P)                                                  \
    CEP_COMPARISON(P, 0) CEP_COMPARISON(P, 1) CEP_COMPARISON(P, 2)             \
    CEP_COMPARISON(P, 3) CEP_COMPARISON(P, 4) CEP_COMPARISON(P, 5)             \
    CEP_COMPARISON(P, 6) CEP_COMPARISON(P, 7)

/* Pattern slot P, which is on the event's stream, moves on the event. */
#define CEP_PATTERN_STEP(P)                                                    \
    meta.cep.symbol = 0;                                                       \
    CEP_COMPARISONS_OF(P)                                                      \
    cep_state.read(meta.cep.state, P);                                         \
    meta.cep.next = meta.cep.state;                                            \
    meta.cep.emit = 0;                                                         \
    cep_transition_##P.apply();   /* declared in MyIngress (forwarding.p4) */  \
    cep_state.write(P, meta.cep.next);                                         \
    if (meta.cep.emit == 1) {                                                  \
        cep_matches.read(meta.cep.match_##P, P);                               \
        meta.cep.match_##P = meta.cep.match_##P + 1;                           \
        cep_matches.write(P, meta.cep.match_##P);                              \
        cep_pattern_id.read(meta.cep.id_##P, P);                               \
        cep_return_operand.read(meta.cep.operand, P);                          \
        cep_return_window.read(meta.cep.wi, P);                                \
        CEP_OPERAND                                                            \
        if (meta.cep.is_signed == 1) {                                         \
            meta.cep.x = meta.cep.x ^ CEP_SIGN;                                \
        }                                                                      \
        meta.cep.value_##P = meta.cep.x;                                       \
        meta.cep.matched = meta.cep.matched | ((bit<8>)1 << P);                \
    }

/* Pattern slot P moves on the event, if it is on the event's stream: one
 * register read and one test for a slot not in use. */
#define CEP_PATTERN(P)                                                         \
    cep_pattern_on.read(meta.cep.on, P);                                       \
    if (meta.cep.on != 0) {                                                    \
        cep_pattern_stream.read(meta.cep.stream, P);                           \
        if (meta.cep.stream == hdr.event.stream) { CEP_PATTERN_STEP(P) }       \
    }

/* Inside MyIngress's apply, for an event frame (not a batch).  The window
 * and pattern slots share their booleans: p4c makes each local a metadata
 * field, which bmv2 zeroes for every packet, and a local per unrolled slot
 * cost 40 of them. */
#define CEP_INGRESS                                                            \
    bool passes;    /* CEP_WINDOW: a value meets the window's count-if test */ \
    bool rescan;    /* CEP_WINDOW: an extreme left, find the new ones */       \
    bool holds;     /* CEP_COMPARISON: comparison C holds */                   \
    meta.cep.matched = 0;                                                      \
    CEP_WINDOW(0) CEP_WINDOW(1) CEP_WINDOW(2) CEP_WINDOW(3)                    \
    CEP_PATTERN(0) CEP_PATTERN(1) CEP_PATTERN(2) CEP_PATTERN(3)                \
    if (meta.cep.matched != 0) {                                               \
        clone_preserving_field_list(CloneType.I2E, CEP_SESSION, CEP_FIELDS);   \
    }

/* Complex event P of the clone, if this sink's. */
#define CEP_OUT(P)                                                             \
    if ((meta.cep.mine & ((bit<8>)1 << P)) != 0) {                               \
        hdr.cep_events[P].setValid();                                          \
        hdr.cep_events[P].pattern = meta.cep.id_##P;                           \
        hdr.cep_events[P].reserved = 0;                                        \
        hdr.cep_events[P].match_no = meta.cep.match_##P;                          \
        hdr.cep_events[P].stream = hdr.event.stream;                           \
        hdr.cep_events[P].reserved2 = 0;                                       \
        hdr.cep_events[P].seq = hdr.event.seq;                                 \
        hdr.cep_events[P].ts = hdr.event.ts;                                   \
        hdr.cep_events[P].value = meta.cep.value_##P;                          \
        hdr.cep.count = hdr.cep.count + 1;                                     \
        cep_out.count(meta.copy.instance);                                         \
    }

/* Inside MyEgress, for a clone the sinks' group replicated: this sink's
 * complex events, or nothing. */
#define CEP_EGRESS                                                             \
    cep_sinks.read(meta.cep.mine, meta.copy.instance);                            \
    meta.cep.mine = meta.cep.mine & meta.cep.matched;                          \
    if (meta.cep.mine != 0) {                                                  \
        hdr.cep.setValid();                                                    \
        hdr.cep.count = 0;                                                     \
        hdr.cep.flags = 0;                                                     \
        CEP_OUT(0) CEP_OUT(1) CEP_OUT(2) CEP_OUT(3)                            \
        hdr.event.setInvalid();                                                \
        bit<16> payload = CEP_HEADER_BYTES + hdr.cep.count * COMPLEX_EVENT_BYTES; \
        /* the UDP checksum, 0 since rewrite_dst */                            \
        hdr.net.udp = CEP_UDP_PORT ++ CEP_UDP_PORT ++ (UDP_HEADER_BYTES + payload) ++ 16w0; \
        IP_TOTAL_LEN(hdr.net) = IPV4_HEADER_BYTES + UDP_HEADER_BYTES + payload;  \
        truncate((bit<32>)(ETHERNET_HEADER_BYTES + IP_TOTAL_LEN(hdr.net)));      \
        sent = true;                                                           \
    }

#endif
#endif
