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
 * A batch that stays inside one slide (a time batch also in order) needs
 * no more than its first pass (BATCH_WHOLE_SLIDE): all its events share the
 * first one's windows.
 *
 * The last pass sends the frame once, to the operators of a range of
 * windows that covers every event's windows (BATCH_COVER), through the
 * unicast, multicast and handover tables.  Egress, where the steps are
 * cheap, is unrolled once per event slot: each replica keeps only the
 * events whose windows are its operator's (BATCH_KEEP).
 *
 * A record is one wide field (PACK, UNPACK), and the unrolled steps share
 * their locals: bmv2 zeroes every metadata field of every frame it
 * receives, so each field the batch path adds slows unbatched frames too.
 */
#ifndef SPLITTER_BATCHES_P4
#define SPLITTER_BATCHES_P4

/* ---- records ------------------------------------------------------------ */

/* An event_record_t holds a batched_event_t's fields from the lowest bits
 * up: assigned, by_key, newest, active, old_newest, old_active, window,
 * old_window, epoch, n_ops, old_n_ops, key_op (BATCH_TAKE packs them). */
#define UNPACK(RECORD, EV)                                                     \
    EV.assigned = RECORD[0:0];                                                 \
    EV.by_key = RECORD[1:1];                                                   \
    EV.newest = RECORD[33:2];                                                  \
    EV.active = RECORD[65:34];                                                 \
    EV.old_newest = RECORD[97:66];                                             \
    EV.old_active = RECORD[129:98];                                            \
    EV.window = RECORD[193:130];                                               \
    EV.old_window = RECORD[257:194];                                           \
    EV.epoch = RECORD[289:258];                                                \
    EV.n_ops = RECORD[321:290];                                                \
    EV.old_n_ops = RECORD[353:322];                                            \
    EV.key_op = RECORD[385:354];

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

/* What egress needs of the event this pass took (EVENT), which has
 * windows: its verdict, epoch and N, packed into its slot's record. */
#define BATCH_TAKE(EVENT)                                                      \
    bit<32> old_n_ops = 0;                                                     \
    if (meta.verdict.old_active != 0) {                                        \
        old_n_ops = meta.prev.n_ops;                                           \
    }                                                                          \
    bit<32> key_op = 0;                                                        \
    if (meta.win.by_key == 1) {                                                \
        hash(key_op, HashAlgorithm.crc32, (bit<32>)0,                          \
             { EVENT.group_key }, meta.win.n_ops);                             \
    }                                                                          \
    event_record_t record = key_op ++ old_n_ops ++ meta.win.n_ops              \
        ++ meta.epoch.number ++ meta.verdict.old_window ++ meta.verdict.window \
        ++ meta.verdict.old_active ++ meta.verdict.old_newest                  \
        ++ meta.verdict.active ++ meta.verdict.newest_op ++ meta.win.by_key    \
        ++ (bit<1>)1;                                                          \
    FOR_EACH_SLOT(BATCH_RECORD)                                                \
    meta.batch.any_assigned = 1;

#define BATCH_RECORD(I)                                                        \
    if (meta.batch.at == I) {                                                  \
        meta.batch.e##I = record;                                              \
    }

/* A batch whose events all fall into the slide of its first, on the same
 * side of that slide's `extra` point, with no change armed to fire and none
 * in transition: every event lies in exactly the windows of the first, and
 * a pass per event would only move the stream's position on (its event
 * count, or its newest timestamp).  A time batch must also be in order from
 * a first event that was not late, which the newest timestamp equal to the
 * first's tells: then none of its events is late either.  So the first pass
 * takes the whole batch: it counts each event in stream_in and moves the
 * position to the last event, which is all the passes for events 1 ..
 * count - 1 would have written, and sets meta.batch.whole: the steps below
 * then read every event's record from e0 and do their work for slot 0 only.
 * An armed change fires only when an event reaches next_start, which none
 * of these does.  (docs/p4.md, "Batches"; the model takes the same step,
 * and the differential tests hold the two to the same frames, registers and
 * counters.) */
#define BATCH_WHOLE_SLIDE                                                      \
    if (meta.batch.count > 1 && meta.win.by_key == 0                           \
            && meta.epoch.switching == 0 && hdr.scratch.in_transition == 0     \
            && meta.verdict.old_active == 0) {                                 \
        bit<64> position;     /* the stream's count, or its newest timestamp */\
        bit<64> first_x;      /* the first event's position */                 \
        bit<64> last_x;       /* the last event's */                           \
        bool in_order = true;                                                  \
        if (hdr.scratch.kind == WINDOW_COUNT) {                                \
            event_count.read(position, STREAM_KEY);                            \
            first_x = position - 1;                                            \
            last_x = position + (bit<64>)meta.batch.count - 2;                 \
        } else {                                                               \
            last_ts.read(position, STREAM_KEY);                                \
            first_x = hdr.events[0].ts;                                        \
            last_x = first_x;                                                  \
            in_order = position == first_x;                                    \
            FOR_EACH_LATER_SLOT(BATCH_IN_ORDER)                                \
        }                                                                      \
        bit<64> slide_x;      /* where the first event's slide starts */       \
        bit<64> next_slide_x; /* where the slide after it starts */            \
        slide_start.read(slide_x, STREAM_KEY);                                 \
        next_start.read(next_slide_x, STREAM_KEY);                             \
        if (in_order && last_x < next_slide_x                                  \
                && (first_x - slide_x < hdr.scratch.extra)                     \
                   == (last_x - slide_x < hdr.scratch.extra)) {                \
            if (hdr.scratch.kind == WINDOW_COUNT) {                            \
                event_count.write(STREAM_KEY, last_x + 1);                     \
            } else {                                                           \
                last_ts.write(STREAM_KEY, last_x);                             \
            }                                                                  \
            FOR_EACH_SLOT(BATCH_COUNT_IN)                                      \
            meta.batch.whole = 1;                                              \
            meta.batch.at = (bit<8>)meta.batch.count - 1;                      \
        }                                                                      \
    }

/* Slot I (1 ..) of a time batch: its timestamp is not below the one
 * before, and the last slot's is the batch's last position. */
#define BATCH_IN_ORDER(I)                                                      \
    if (I < meta.batch.count) {                                                \
        if (hdr.events[I].ts < hdr.events[I - 1].ts) {                         \
            in_order = false;                                                  \
        }                                                                      \
        last_x = hdr.events[I].ts;                                             \
    }

#define BATCH_COUNT_IN(I)                                                      \
    if (I >= 1 && I < meta.batch.count) {                                      \
        stream_in.count(STREAM_KEY);                                           \
    }

/* Whether slot I's own record is the one to read: in a whole batch only
 * slot 0's is written, and it stands for every event. */
#define OWN_RECORD(I) (I == 0 || meta.batch.whole == 0)

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

/* Slot I's windows into the covering ranges: those of the stream's final
 * epoch into cover, those of the epoch before it (an event before a
 * change's boundary, or the old windows of one after it) into old_cover.
 * A stream split by key never changes; its range is of operator indices.
 * `ev` is the control's one batched_event_t. */
#define BATCH_COVER_RECORD(I)                                                  \
    UNPACK(meta.batch.e##I, ev)                                                \
    if (ev.assigned == 1) {                                                    \
        if (ev.by_key == 1) {                                                  \
            WIDEN(meta.batch.cover, (bit<64>)ev.key_op, (bit<64>)ev.key_op,    \
                  ev.key_op, ev.n_ops)                                         \
        } else {                                                               \
            if (ev.active != 0) {                                              \
                if (ev.epoch == meta.batch.final_epoch) {                      \
                    WIDEN(meta.batch.cover,                                    \
                          ev.window - (bit<64>)ev.active + 1, ev.window,       \
                          ev.newest, ev.n_ops)                                 \
                } else {                                                       \
                    WIDEN(meta.batch.old_cover,                                \
                          ev.window - (bit<64>)ev.active + 1, ev.window,       \
                          ev.newest, ev.n_ops)                                 \
                }                                                              \
            }                                                                  \
            if (ev.old_active != 0) {                                          \
                WIDEN(meta.batch.old_cover,                                    \
                      ev.old_window - (bit<64>)ev.old_active + 1,              \
                      ev.old_window, ev.old_newest, ev.old_n_ops)              \
            }                                                                  \
        }                                                                      \
    }

/* A whole batch's windows are slot 0's. */
#define BATCH_COVER(I)                                                         \
    if (OWN_RECORD(I)) {                                                       \
        BATCH_COVER_RECORD(I)                                                  \
    }

/* RANGE's newest window's operator and its length, clamped to N: the
 * (newest_op, active) of the destination tables. */
#define RANGE_KEY(RANGE, NEWEST, ACTIVE)                                       \
    if (RANGE.valid == 1) {                                                    \
        NEWEST = RANGE.hi_op;                                                  \
        ACTIVE = RANGE.n_ops;                                                  \
        if (RANGE.hi - RANGE.lo < (bit<64>)RANGE.n_ops) {                      \
            ACTIVE = (bit<32>)(RANGE.hi - RANGE.lo) + 1;                       \
        }                                                                      \
    }

/* The last pass, once meta.batch.final_epoch is read: the batch's one
 * destination key, from the ranges that cover all its events' windows.
 * The operator set is the last event's, which is of the final epoch: the
 * unicast, multicast and operator_position keys need no bank. */
#define BATCH_DESTINATION                                                      \
    batched_event_t ev;                                                        \
    FOR_EACH_SLOT(BATCH_COVER)                                                 \
    meta.verdict.newest_op = 0;                                                \
    meta.verdict.active = 0;                                                   \
    meta.verdict.old_newest = 0;                                               \
    meta.verdict.old_active = 0;                                               \
    RANGE_KEY(meta.batch.cover, meta.verdict.newest_op, meta.verdict.active)   \
    RANGE_KEY(meta.batch.old_cover, meta.verdict.old_newest,                   \
              meta.verdict.old_active)

/* The frame found no destination: each of its events that had windows is
 * dropped, and counted, as an event in a frame of its own would be. */
#define BATCH_UNROUTED(I)                                                      \
    if (meta.batch.e##I[0:0] == 1                                              \
            || (meta.batch.whole == 1 && I < meta.batch.count)) {              \
        stream_drops.count(meta.batch.unrouted);                                        \
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

/* Slot I's Windows header for this replica's operator, written in place
 * into events_windows[I] (W), and whether it has any of the operator's
 * windows (mine).  setValid zeroes the header on bmv2 (add_header), so
 * only the non-zero fields are written.  An event of the epoch before the
 * final one stands in that epoch's operator list (previous_position), as
 * the old windows of a transition do.  The locals (ev, back, known,
 * position, mine) are MyEgress's, shared by the slots. */
#define BATCH_WINDOWS_OF(I, W)                                                 \
    UNPACK(meta.batch.e##I, ev)                                                \
    W.setValid();                                                              \
    W.stride = (bit<16>)ev.n_ops;                                              \
    W.epoch = (bit<16>)ev.epoch;                                               \
    W.old_stride = (bit<16>)ev.old_n_ops;                                      \
    if (ev.assigned == 0) {                                                    \
        mine = false;                                                          \
    } else if (ev.by_key == 1) {                                               \
        W.window = ev.window;                                                  \
        W.span = ev.active;                                                    \
        W.stride = 1;                                                          \
        mine = position_hit && hdr.scratch.position == ev.key_op;              \
    } else {                                                                   \
        if (ev.active != 0) {                                                  \
            known = position_hit;                                              \
            position = hdr.scratch.position;                                   \
            if (ev.epoch != meta.batch.final_epoch) {                          \
                known = old_position_hit;                                      \
                position = hdr.scratch.old_position;                           \
            }                                                                  \
            if (known) {                                                       \
                COPY_BACK(back, ev.newest, position, ev.n_ops)                 \
                if (back < ev.active) {                                        \
                    W.window = ev.window - (bit<64>)back;                       \
                    W.span = ev.active - back;                                 \
                }                                                              \
            }                                                                  \
        }                                                                      \
        if (ev.old_active != 0 && old_position_hit) {                          \
            COPY_BACK(back, ev.old_newest, hdr.scratch.old_position,           \
                      ev.old_n_ops)                                            \
            if (back < ev.old_active) {                                        \
                W.old_window = ev.old_window - (bit<64>)back;                  \
                W.old_span = ev.old_active - back;                             \
            }                                                                  \
        }                                                                      \
        mine = W.span != 0 || W.old_span != 0;                                 \
    }

/* Event I stays in this replica, with its Windows header, when some of its
 * windows are this operator's; otherwise both are cut out.  The events of
 * a whole batch take slot 0's header and verdict (events_windows[0] and
 * mine).  Slots past the count were never valid. */
#define BATCH_KEEP(I)                                                          \
    if (OWN_RECORD(I)) {                                                       \
        BATCH_WINDOWS_OF(I, hdr.events_windows[I])                             \
    } else if (I >= meta.batch.count) {                                        \
        mine = false;                                                          \
    } else if (mine) {                                                         \
        hdr.events_windows[I] = hdr.events_windows[0];                         \
    }                                                                          \
    if (mine) {                                                                \
        hdr.events[I].flags = hdr.events[I].flags | FLAG_WINDOWS;              \
        meta.batch.kept = meta.batch.kept + 1;                                 \
        stream_out.count(STREAM_KEY);                                          \
        operator_out.count(meta.copy.instance);                                    \
    } else if (I < meta.batch.count) {                                         \
        hdr.events[I].setInvalid();                                            \
        hdr.events_windows[I].setInvalid();                                    \
    }

/* Every macro above, once per event slot. */
#define FOR_EACH_SLOT(STEP)                                                    \
    STEP(0)  STEP(1)  STEP(2)  STEP(3)  STEP(4)  STEP(5)  STEP(6)  STEP(7)     \
    STEP(8)  STEP(9)  STEP(10) STEP(11) STEP(12) STEP(13) STEP(14) STEP(15)

/* The same from the second slot on (steps that look at the slot before). */
#define FOR_EACH_LATER_SLOT(STEP)                                              \
    STEP(1)  STEP(2)  STEP(3)  STEP(4)  STEP(5)  STEP(6)  STEP(7)              \
    STEP(8)  STEP(9)  STEP(10) STEP(11) STEP(12) STEP(13) STEP(14) STEP(15)

#endif
