/*
 * Batches: the per-event steps of a frame that carries several events
 * (docs/windows.md and docs/wire.md, "Batches";
 * testbed/dataplane/model/batches.py is the same in Python).
 *
 * P4 has no loops outside the parser, and a control or table is applied at
 * one place only, so ingress takes a batch's events one per pass: the pass
 * for event `at` selects it (BATCH_SELECT), runs it through the steps an
 * event in a frame of its own takes (bank, configuration, slide tracker,
 * counters), records the outcome (BATCH_RECORD), and resubmits the frame
 * for the next event with that record kept (the BATCH_FIELDS field list).
 * bmv2 gives resubmitted packets priority over new arrivals, so no other
 * frame comes between a batch's events.  Each event looks up its own bank's
 * configuration, so a change whose boundary falls inside the batch takes
 * effect at that event.
 *
 * The last pass sends the frame once, to the operators of a range of
 * windows that covers every event's windows (BATCH_COVER), through the
 * unicast, multicast and handover tables.  Egress, where the steps are
 * cheap, is unrolled once per event slot: each replica keeps only the
 * events whose windows are its operator's (BATCH_KEEP).
 */
#ifndef SPLITTER_BATCHES_P4
#define SPLITTER_BATCHES_P4

/* ---- ingress ------------------------------------------------------------ */

/* A well-formed batch holds events of one stream only. */
#define BATCH_SAME_STREAM(I)                                                   \
    if (I < hdr.batch.count && hdr.events[I].stream != hdr.events[0].stream) { \
        well_formed = false;                                                   \
    }

/* The event this pass takes. */
#define BATCH_SELECT(I)                                                        \
    if (meta.batch.at == I) {                                                  \
        current = hdr.events[I];                                               \
    }

/* What egress needs of the event this pass took. */
#define BATCH_RECORD(I)                                                        \
    if (meta.batch.at == I) {                                                  \
        meta.batch.e##I = taken;                                               \
    }

/* RANGE grown to hold windows LO .. HI, the newest on operator HI_OP. */
#define WIDEN(RANGE, LO, HI, HI_OP, N_OPS)                                     \
    if (RANGE.valid == 0) {                                                    \
        RANGE.valid = 1;                                                       \
        RANGE.lo = LO;                                                         \
        RANGE.hi = HI;                                                         \
        RANGE.hi_op = HI_OP;                                                   \
    } else {                                                                   \
        if (LO < RANGE.lo) {                                                   \
            RANGE.lo = LO;                                                     \
        }                                                                      \
        if (HI > RANGE.hi) {                                                   \
            RANGE.hi = HI;                                                     \
            RANGE.hi_op = HI_OP;                                               \
        }                                                                      \
    }                                                                          \
    RANGE.n_ops = N_OPS;

/* Event I's windows into the covering ranges: those of the stream's final
 * epoch into cover, those of the epoch before it (an event before a
 * change's boundary, or the old windows of one after it) into old_cover.
 * A stream split by key never changes; its range is of operator indices. */
#define BATCH_COVER(I)                                                         \
    if (meta.batch.e##I.assigned == 1) {                                       \
        if (meta.batch.e##I.by_key == 1) {                                     \
            WIDEN(meta.batch.cover, (bit<64>)meta.batch.e##I.key_op,           \
                  (bit<64>)meta.batch.e##I.key_op, meta.batch.e##I.key_op,     \
                  meta.batch.e##I.n_ops)                                       \
        } else {                                                               \
            if (meta.batch.e##I.active != 0) {                                 \
                if (meta.batch.e##I.epoch == meta.batch.final_epoch) {         \
                    WIDEN(meta.batch.cover,                                    \
                          meta.batch.e##I.window                               \
                              - (bit<64>)meta.batch.e##I.active + 1,           \
                          meta.batch.e##I.window, meta.batch.e##I.newest,      \
                          meta.batch.e##I.n_ops)                               \
                } else {                                                       \
                    WIDEN(meta.batch.old_cover,                                \
                          meta.batch.e##I.window                               \
                              - (bit<64>)meta.batch.e##I.active + 1,           \
                          meta.batch.e##I.window, meta.batch.e##I.newest,      \
                          meta.batch.e##I.n_ops)                               \
                }                                                              \
            }                                                                  \
            if (meta.batch.e##I.old_active != 0) {                             \
                WIDEN(meta.batch.old_cover,                                    \
                      meta.batch.e##I.old_window                               \
                          - (bit<64>)meta.batch.e##I.old_active + 1,           \
                      meta.batch.e##I.old_window, meta.batch.e##I.old_newest,  \
                      meta.batch.e##I.old_n_ops)                               \
            }                                                                  \
        }                                                                      \
    }

/* The frame found no destination: each of its events that had windows is
 * dropped, and counted, as an event in a frame of its own would be. */
#define BATCH_UNROUTED(I)                                                      \
    if (meta.batch.e##I.assigned == 1) {                                       \
        stream_drops.count(stream_idx * DROP_SLOTS + DROP_UNKNOWN_STREAM);     \
    }

/* ---- egress ------------------------------------------------------------- */

/* (NEWEST - POSITION) mod N_OPS without division: how far back from an
 * event's newest window this copy's operator's newest one lies. */
#define COPY_BACK(BACK, NEWEST, POSITION, N_OPS)                               \
    if (NEWEST >= POSITION) {                                                  \
        BACK = NEWEST - POSITION;                                              \
    } else {                                                                   \
        BACK = NEWEST + N_OPS - POSITION;                                      \
    }

/* Event I stays in this replica, with its Windows header, when some of its
 * windows are this operator's; otherwise it is cut out.  An event of the
 * epoch before the final one stands in that epoch's operator list
 * (previous_position), as the old windows of a transition do. */
#define BATCH_KEEP(I)                                                          \
    if (meta.batch.e##I.assigned == 1) {                                       \
        bit<64> kept_window = 0;                                               \
        bit<32> span = 0;                                                      \
        bit<64> kept_old_window = 0;                                            \
        bit<32> old_span = 0;                                                  \
        bit<16> stride = (bit<16>)meta.batch.e##I.n_ops;                       \
        bool mine = false;                                                     \
        if (meta.batch.e##I.by_key == 1) {                                     \
            kept_window = meta.batch.e##I.window;                              \
            span = meta.batch.e##I.active;                                     \
            stride = 1;                                                        \
            mine = position_hit                                                \
                && meta.copy.position == meta.batch.e##I.key_op;               \
        } else {                                                               \
            if (meta.batch.e##I.active != 0) {                                 \
                bool known = position_hit;                                     \
                bit<32> position = meta.copy.position;                         \
                if (meta.batch.e##I.epoch != meta.batch.final_epoch) {         \
                    known = old_position_hit;                                  \
                    position = meta.copy.old_position;                         \
                }                                                              \
                if (known) {                                                   \
                    bit<32> back;                                              \
                    COPY_BACK(back, meta.batch.e##I.newest, position,          \
                              meta.batch.e##I.n_ops)                           \
                    if (back < meta.batch.e##I.active) {                       \
                        kept_window = meta.batch.e##I.window - (bit<64>)back;     \
                        span = meta.batch.e##I.active - back;                  \
                    }                                                          \
                }                                                              \
            }                                                                  \
            if (meta.batch.e##I.old_active != 0 && old_position_hit) {         \
                bit<32> back;                                                  \
                COPY_BACK(back, meta.batch.e##I.old_newest,                    \
                          meta.copy.old_position, meta.batch.e##I.old_n_ops)   \
                if (back < meta.batch.e##I.old_active) {                       \
                    kept_old_window = meta.batch.e##I.old_window - (bit<64>)back;   \
                    old_span = meta.batch.e##I.old_active - back;              \
                }                                                              \
            }                                                                  \
            mine = span != 0 || old_span != 0;                                 \
        }                                                                      \
        if (mine) {                                                            \
            hdr.events_windows[I].setValid();                                  \
            hdr.events_windows[I].window = kept_window;                          \
            hdr.events_windows[I].span = span;                                 \
            hdr.events_windows[I].stride = stride;                             \
            hdr.events_windows[I].epoch = (bit<16>)meta.batch.e##I.epoch;      \
            hdr.events_windows[I].old_window = kept_old_window;                     \
            hdr.events_windows[I].old_span = old_span;                         \
            hdr.events_windows[I].old_stride = (bit<16>)meta.batch.e##I.old_n_ops; \
            hdr.events_windows[I].reserved = 0;                                \
            hdr.events[I].flags = hdr.events[I].flags | FLAG_WINDOWS;          \
            meta.batch.kept = meta.batch.kept + 1;                             \
            stream_out.count((bit<32>)meta.stream);                            \
            operator_out.count((bit<32>)standard_metadata.egress_port);        \
        } else {                                                               \
            hdr.events[I].setInvalid();                                        \
        }                                                                      \
    } else {                                                                   \
        hdr.events[I].setInvalid();                                            \
    }

/* Every macro above, once per event slot. */
#define FOR_EACH_SLOT(STEP)                                                    \
    STEP(0)  STEP(1)  STEP(2)  STEP(3)  STEP(4)  STEP(5)  STEP(6)  STEP(7)     \
    STEP(8)  STEP(9)  STEP(10) STEP(11) STEP(12) STEP(13) STEP(14) STEP(15)

#endif
