/*
 * Count windows in the build without changes (splitter_fixed.p4): the
 * slide tracker of a count stream as window_spec's action.
 *
 * A count stream that never changes needs less state than slides.p4 keeps:
 * how many events its newest slide has had, that slide's operator, and
 * the newest window's id, which is also the number of windows begun less
 * one (every slide begins one).  The first two share one register cell
 * (count_state, state.p4), the id keeps newest_window.  All three are 0
 * before the first event, and that is the state the first event needs:
 * slide 0, on operator 0, not yet full.  So the action has no first-event
 * case, nor any `if` that is a condition of bmv2's: p4c turns each `if`
 * of an action into a choice inside one expression, and each condition
 * or statement between two is a node bmv2 walks per event (docs/p4.md,
 * "Count windows in one action").
 *
 * testbed/dataplane/model/counts.py is the same step in Python.
 */
#ifndef SPLITTER_COUNTS_P4
#define SPLITTER_COUNTS_P4

/* The cell: [39:0] events of the newest slide so far (a stream has at
 * most 2^32), [63:40] the newest window's operator (below N_INSTANCES). */
#define COUNT_FILL     (hdr.scratch.cell & 64w0xffffffffff)
#define COUNT_NEWEST   hdr.scratch.cell[63:40]
#define COUNT_ONE_OP   64w0x10000000000
#define COUNT_OP_ONLY  64w0xffffff0000000000
/* Whether the newest window's operator is the last of the N, asked in
 * the cell's own width: a slice and a cast are a mask each in bmv2
 * (docs/p4.md, rule 7).  N_OPS leaves out the flag of a stream split by
 * key, whose cell turns as any other's. */
#define COUNT_LAST_OP  ((hdr.scratch.cell >> 40) + 1 == (bit<64>)N_OPS)

/* The whole windows window_spec's entry counts, and the partial one if
 * the event lies in it; after the fill has counted the event, hence <=. */
#define COUNT_HELD(FULL, EXTRA) ((FULL) + (COUNT_FILL <= (EXTRA) ? 32w1 : 32w0))

/* The event lies in the fewer of the windows begun (the newest's id + 1)
 * and the windows it is held by.  While the newest id is below `full`,
 * the begun are the fewer, and from then on never: so one comparison
 * with the action's datum decides, where a minimum of the two worked
 * both out twice.  bmv2 evaluates only the branch of a ?: that it takes,
 * operator by operator, so most events pay for the held count alone. */
#define COUNT_WINDOW_STEP                                                       \
    action set_count_window(bit<64> slide, bit<32> full, bit<64> extra, bit<32> cap) { \
        count_state.read(hdr.scratch.cell, STREAM_KEY);                         \
        newest_window.read(hdr.scratch.window, STREAM_KEY);                     \
        /* a full newest slide: the event begins the next, on the next      \
         * operator round robin */                                          \
        hdr.scratch.window = COUNT_FILL == slide ? hdr.scratch.window + 1 : hdr.scratch.window; \
        hdr.scratch.cell = (COUNT_FILL == slide                                 \
            ? (COUNT_LAST_OP ? 64w0 : (hdr.scratch.cell & COUNT_OP_ONLY) + COUNT_ONE_OP) \
            : hdr.scratch.cell) + 1;                                            \
        /* split by key, the key's operator instead (split_by_key) */        \
        meta.verdict.newest_op = SPLIT_BY_KEY ? hdr.scratch.key_op              \
                                                         : (bit<32>)COUNT_NEWEST; \
        meta.verdict.active = hdr.scratch.window < (bit<64>)full                \
            ? (bit<32>)hdr.scratch.window + 1 : COUNT_HELD(full, extra);        \
        count_state.write(STREAM_KEY, hdr.scratch.cell);                        \
        newest_window.write(STREAM_KEY, hdr.scratch.window);                    \
    }

#endif
