/*
 * Ingress: stream lookup, window tracking, and the destination decision.
 *
 * S4's pipeline (Fig. 4) in order, with a bank chosen first:
 *   0. BoundaryCheck   registers -> the bank in force, or the other one when
 *                      the event crosses an armed change's boundary (epochs.p4)
 *   1. window_spec     (stream, bank) -> window kind and spec (action data)
 *   2. operator_count  (stream, bank) -> N and the operator set, kept apart
 *                      so N and the spec change independently
 *      previous_spec   stream -> the previous epoch's spec and N, only while
 *                      its windows may still hold events
 *   3. SlideTracker    registers -> (w, c) or a drop reason (slides.p4)
 *   4. unicast         (opset, w) -> egress port, when c == 1, or
 *                      (opset, crc32(key) mod N) for a stream split by key
 *      multicast       (opset, w, c) -> multicast group, when c >= 2
 *                      An operator set is one list of operators: streams
 *                      dealt over the same list share its entries, so a
 *                      thousand streams cost two entries each, not 3N.
 *      handover        (stream, old w, old c, w, c) -> port or group, when
 *                      the event lies in windows of the previous epoch too
 * The build without changes (FIXED) looks up operator_count first, and
 * tracks a count stream in window_spec's action (counts.p4): only time
 * windows take step 3 there.
 * A batch takes steps 0-3 once per event, one ingress pass each
 * (batches.p4); its last pass takes step 4 once, for the windows of all
 * its events.
 * Every event that reaches no operator is counted in stream_drops under its
 * reason and marked to drop; operator hosts' heartbeats are counted per
 * port in heartbeats, other frames that are not events (malformed batches
 * among them) in non_event.  Only the control plane fills these tables: a
 * new spec or N is a table update, never a recompilation.
 */
#ifndef SPLITTER_FORWARDING_P4
#define SPLITTER_FORWARDING_P4

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter<bit<16>>(N_STREAMS, CounterType.packets_and_bytes) stream_in;           /* events sent on (a batch's: given >= 1 window) */
    counter<bit<32>>(DROP_COUNTER_SIZE, CounterType.packets_and_bytes) stream_drops; /* stream * DROP_SLOTS + code */
    counter<bit<32>>(1, CounterType.packets_and_bytes) non_event;                    /* frames that are no event */
    counter<port_t>(N_PORTS, CounterType.packets_and_bytes) heartbeats;              /* per ingress port (liveness) */

#ifndef FIXED
    BoundaryCheck() boundary_check;
#endif
    SlideTracker() slides;

    /* ---- window_spec -------------------------------------------------- */
    /* Each action writes the fields its kind of window reads, and no other:
     * hdr.scratch is never valid, so bmv2 does not reset it (headers.p4).
     * The whole windows an event lies in (size / slide) go straight into
     * the verdict's count, where the tracker adds the partial one: set
     * here, that costs no table of p4c's between the tracker's tests
     * (docs/p4.md, rule 6).  A verdict that drops keeps it unread. */
#ifdef FIXED
    /* the build without changes: the count stream's whole tracker (counts.p4) */
    COUNT_WINDOW_STEP
#else
    action set_count_window(bit<64> slide, bit<32> full, bit<64> extra, bit<32> cap) {
        hdr.scratch.kind = WINDOW_COUNT;
        hdr.scratch.slide = slide;
        meta.verdict.active = full;
        hdr.scratch.extra = extra;
        hdr.scratch.cap = cap;
    }

#endif

    action set_time_window(bit<64> slide, bit<32> full, bit<64> extra, bit<32> cap,
                           bit<8> fixed_origin, bit<64> origin, bit<64> lateness) {
        hdr.scratch.kind = WINDOW_TIME;
        hdr.scratch.slide = slide;
        meta.verdict.active = full;
        hdr.scratch.extra = extra;
        hdr.scratch.cap = cap;
        hdr.scratch.fixed_origin = fixed_origin;
        hdr.scratch.origin = origin;
        hdr.scratch.lateness = lateness;
    }

    /* starts: event (eventstarts.p4): no lateness, and the size itself */
    action set_event_time_window(bit<64> slide, bit<64> size, bit<32> cap,
                                 bit<8> fixed_origin, bit<64> origin) {
        hdr.scratch.kind = WINDOW_TIME_EVENT_STARTS;
        hdr.scratch.lateness = 0;   /* read on the time path; the header is not reset */
        hdr.scratch.slide = slide;
        hdr.scratch.size = size;
        hdr.scratch.cap = cap;
        hdr.scratch.fixed_origin = fixed_origin;
        hdr.scratch.origin = origin;
    }

    table window_spec {
        key = {
            STREAM_KEY       : exact @name("stream");
            BANK_KEY         : exact @name("bank");
        }
        actions = { set_count_window; set_time_window; set_event_time_window; @defaultonly NoAction; }
        const default_action = NoAction();
        size = STREAM_TABLE_SIZE;
    }

    /* ---- operator_count ----------------------------------------------- */
    /* Round robin over windows: window j to the operator at j mod N.
     * by_key stays at the 0 bmv2 gives all metadata (rule 3, docs/p4.md);
     * the build without changes keeps both in hdr.scratch instead (N_OPS,
     * headers.p4). */
    action set_operator_count(bit<32> n, bit<32> opset) {
#ifdef FIXED
        hdr.scratch.n_operators = n;
#else
        meta.win.n_ops = n;
#endif
        meta.win.opset = opset;
    }

    /* One operator per key: crc32(group_key) mod N takes the event with all
     * of its windows (testbed.semantics.splitting). */
    action split_by_key(bit<32> n, bit<32> opset) {
#ifdef FIXED
        hdr.scratch.n_operators = n | BY_KEY_N;
        /* The key's operator, which the verdict takes in place of the
         * tracker's round robin (counts.p4, and after slides.apply below):
         * hashed here, only for a stream split by key, it costs an event of
         * any other stream no test. */
        hash(hdr.scratch.key_op, HashAlgorithm.crc32, (bit<32>)0, { hdr.event.group_key }, n);
#else
        meta.win.n_ops = n;
        meta.win.by_key = 1;
#endif
        meta.win.opset = opset;
    }

    table operator_count {
        key = {
            STREAM_KEY       : exact @name("stream");
            BANK_KEY         : exact @name("bank");
        }
        actions = { set_operator_count; split_by_key; @defaultonly NoAction; }
        const default_action = NoAction();
        size = STREAM_TABLE_SIZE;
    }

#ifndef FIXED
    /* ---- previous_spec ------------------------------------------------ */
    action set_previous(bit<64> slide, bit<32> full, bit<64> extra, bit<64> size,
                        bit<32> n_ops, bit<64> tail) {
        hdr.prev.slide = slide;
        hdr.prev.full = full;
        hdr.prev.extra = extra;
        hdr.prev.size = size;
        meta.prev.n_ops = n_ops;
        hdr.prev.tail = tail;
    }

    table previous_spec {
        key = { STREAM_KEY       : exact @name("stream"); }
        actions = { set_previous; @defaultonly NoAction; }
        const default_action = NoAction();
        size = PREVIOUS_TABLE_SIZE;
    }
#endif

    /* ---- unicast / multicast ------------------------------------------ */
    /* Outside the batch build an event is counted in stream_in by the
     * destination table that sends it on: a count of its own, after the
     * verdict, was a table of p4c's on every event.  So an event with
     * windows that no entry routes is counted once, as dropped
     * (unknown_stream, UNROUTED).  A batch's events are counted one by one
     * as each is taken, and its one destination counts none. */
#ifdef BATCHES
#define COUNT_SENT_ON
#else
#define COUNT_SENT_ON stream_in.count(STREAM_KEY);
#endif
    action to_operator(port_t port) {
        standard_metadata.egress_spec = port;
        COUNT_SENT_ON
    }

    /* A group also serves one operator: an instance on a shared host is
     * reached through a node of its own, whose rid names it (egress.p4). */
    action to_group(bit<16> mgid) {
        standard_metadata.mcast_grp = mgid;
        COUNT_SENT_ON
    }

    table unicast {
        key = {
            meta.win.opset            : exact @name("opset");
            meta.verdict.newest_op    : exact @name("newest_op");
        }
        actions = { to_operator; to_group; @defaultonly NoAction; }
        const default_action = NoAction();
        size = UNICAST_TABLE_SIZE;
    }

    table multicast {
        key = {
            meta.win.opset            : exact @name("opset");
            meta.verdict.newest_op    : exact @name("newest_op");
            meta.verdict.active       : exact @name("active");
        }
        actions = { to_group; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MULTICAST_TABLE_SIZE;
    }

#ifndef FIXED
    /* The union of the previous epoch's windows and the new ones (active 0:
     * the previous epoch's alone): one port or one group. */
    table handover {
        key = {
            STREAM_KEY                : exact @name("stream");
            meta.verdict.old_newest   : exact @name("old_op");
            meta.verdict.old_active   : exact @name("old_active");
            meta.verdict.newest_op    : exact @name("newest_op");
            meta.verdict.active       : exact @name("active");
        }
        actions = { to_operator; to_group; @defaultonly NoAction; }
        const default_action = NoAction();
        size = TRANSITION_TABLE_SIZE;
    }
#endif

#ifdef CEP
    /* ---- the CEP stage's transition tables (cep.p4): one per pattern slot,
     * keyed by the slot's state and the event's symbol ---------------- */
    action cep_next(bit<8> next_state, bit<1> completes) {
        meta.cep.next = next_state;
        meta.cep.emit = completes;
    }

    table cep_transition_0 {
        key = { meta.cep.state : exact @name("state"); meta.cep.symbol : exact @name("symbol"); }
        actions = { cep_next; @defaultonly NoAction; }
        const default_action = NoAction();
        size = CEP_TRANSITION_TABLE_SIZE;
    }

    table cep_transition_1 {
        key = { meta.cep.state : exact @name("state"); meta.cep.symbol : exact @name("symbol"); }
        actions = { cep_next; @defaultonly NoAction; }
        const default_action = NoAction();
        size = CEP_TRANSITION_TABLE_SIZE;
    }

    table cep_transition_2 {
        key = { meta.cep.state : exact @name("state"); meta.cep.symbol : exact @name("symbol"); }
        actions = { cep_next; @defaultonly NoAction; }
        const default_action = NoAction();
        size = CEP_TRANSITION_TABLE_SIZE;
    }

    table cep_transition_3 {
        key = { meta.cep.state : exact @name("state"); meta.cep.symbol : exact @name("symbol"); }
        actions = { cep_next; @defaultonly NoAction; }
        const default_action = NoAction();
        size = CEP_TRANSITION_TABLE_SIZE;
    }
#endif

    /* The window counts every copy's Windows header needs, clamped for the
     * destination tables; and the one destination of the event's copies.
     * Macros, since the batch build reaches them by another path. */
#ifdef FIXED
#define OLD_COUNTS_FOR_COPIES
#else
#define OLD_COUNTS_FOR_COPIES                                                   \
    meta.copy.old_active = meta.verdict.old_active;                             \
    if (meta.verdict.old_active > meta.prev.n_ops) {                            \
        meta.verdict.old_active = meta.prev.n_ops;                              \
    }
#endif
#ifdef EGRESS_DECIDES
#define COPY_WINDOWS                                                            \
    meta.copy.active = meta.verdict.active;
#define BY_KEY_WINDOWS
#else
/* The Windows header of the copy for the newest window's operator, which
 * the one copy of most events is: a multicast copies it into every
 * replica, and egress moves it back to each replica's own windows
 * (rewrite_back in the build without changes, set_position in the plain
 * build; egress.p4).  Split by key, the one copy carries every
 * window of the event: a stride of 1. */
#define COPY_WINDOWS                                                            \
    hdr.windows.halves = WINDOWS_OF(NEWEST_WINDOW, meta.verdict.active, N_OPS);
#define BY_KEY_WINDOWS                                                          \
    hdr.windows.halves = WINDOWS_OF(NEWEST_WINDOW, hdr.windows.halves[191:160], 1);
#endif
#define COUNTS_FOR_COPIES                                                       \
    /* every copy's Windows header needs the counts unclamped */                \
    COPY_WINDOWS                                                                \
    /* With N or more windows open every operator is hit once. */               \
    if (meta.verdict.active > N_OPS) {                                 \
        meta.verdict.active = N_OPS;                                   \
    }                                                                           \
    OLD_COUNTS_FOR_COPIES                                                       \
    if (SPLIT_BY_KEY) {                                                 \
        /* One copy, to the key's operator by its index in the                  \
         * unicast table (bmv2 applies each table at one place                  \
         * only, so the key takes the one-window path); a stream                \
         * split by key never changes, so no handover. */                       \
        hash(meta.verdict.newest_op, HashAlgorithm.crc32, (bit<32>)0,           \
             { CURRENT.group_key }, N_OPS);                            \
        meta.verdict.active = 1;                                                \
        BY_KEY_WINDOWS                                                          \
    }

    /* The drop counted under the stream's slot for its reason.  The index
     * is a field set in each branch of an `if`: p4c folds a single
     * assignment into the call, and makes a temporary for it in metadata
     * that every packet pays to reset (docs/p4.md, rule 5). */
#define DROP_COUNT                                                              \
    if (meta.verdict.drop_code == DROP_UNKNOWN_STREAM) {                        \
        hdr.scratch.drop_slot = (bit<32>)STREAM_KEY * DROP_SLOTS + DROP_UNKNOWN_STREAM;    \
    } else {                                                                    \
        hdr.scratch.drop_slot = (bit<32>)STREAM_KEY * DROP_SLOTS + meta.verdict.drop_code; \
    }                                                                           \
    stream_drops.count(hdr.scratch.drop_slot);

    /* A destination table's miss: no operator for the event.  Outside the
     * batch build it is counted and dropped where it happens, so an event
     * sent on takes no further test of its verdict; a batch's pass counts
     * its events' drops itself, below. */
#ifdef BATCHES
#define UNROUTED                                                                \
    meta.verdict.drop_code = DROP_UNKNOWN_STREAM;
#else
#define UNROUTED                                                                \
    meta.verdict.drop_code = DROP_UNKNOWN_STREAM;                               \
    DROP_COUNT                                                                  \
    mark_to_drop(standard_metadata);
#endif

#ifdef FIXED
#define HANDOVER_OR
#else
#define HANDOVER_OR                                                             \
    if (meta.verdict.old_active != 0) {                                         \
        if (meta.verdict.active == 0) {                                         \
            meta.verdict.newest_op = 0;                                         \
        }                                                                       \
        if (!handover.apply().hit) {                                            \
            UNROUTED                                                            \
        }                                                                       \
    } else
#endif
#ifdef FIXED
/* The build without changes routes without COUNTS_FOR_COPIES.  The one copy
 * that unicast sends to a port reaches egress as the packet itself, with
 * hdr.scratch and the verdict as they are here, so egress makes its Windows
 * header (egress.p4), off this thread, the busiest (docs/p4.md,
 * "The one copy's Windows header, made in egress").  A group's copies are
 * new packets that carry valid headers and metadata only, so the header is
 * made here for them, once.  An event takes unicast when it lies in one
 * window, when its stream has one operator (its windows all go there), or
 * when it is split by key: the count, unclamped, is what the header needs,
 * and is clamped to N only for multicast. */
#define WINDOWS_FOR_COPIES(STRIDE)                                              \
    WINDOWS_HEADER_ON                                                           \
    hdr.windows.halves = WINDOWS_OF(NEWEST_WINDOW, meta.verdict.active, STRIDE);
#define ONE_COPY_OR_MANY                                                        \
    if (meta.verdict.active == 1 || N_UNSPLIT == 1 || SPLIT_BY_KEY) { \
        switch (unicast.apply().action_run) {                                   \
            to_operator: {                                                      \
            }                                                                   \
            to_group: {                                                         \
                WINDOWS_FOR_COPIES(COPY_STRIDE) \
            }                                                                   \
            default: {                                                          \
                UNROUTED                                                        \
            }                                                                   \
        }                                                                       \
    } else {                                                                    \
        WINDOWS_FOR_COPIES(N_UNSPLIT)                                  \
        if (meta.verdict.active > N_UNSPLIT) {                         \
            meta.verdict.active = N_UNSPLIT;                           \
        }                                                                       \
        if (!multicast.apply().hit) {                                           \
            UNROUTED                                                            \
        }                                                                       \
    }
#endif
#define ROUTE_TO_OPERATORS                                                      \
    HANDOVER_OR                                                                 \
    if (meta.verdict.active == 1) {                                             \
        if (!unicast.apply().hit) {                                             \
            UNROUTED                                                            \
        }                                                                       \
    } else {                                                                    \
        if (!multicast.apply().hit) {                                           \
            UNROUTED                                                            \
        }                                                                       \
    }

    apply {
        /* A batch is well formed when its count is 1 .. MAX_BATCH, its UDP
         * length is exactly the header and that many events, all of them
         * were parsed, and they are of one stream (wire.batch_count). */
#ifdef BATCHES
        meta.batch.count = 0;
        if (hdr.batch.isValid() && standard_metadata.parser_error == error.NoError
                && hdr.batch.count >= 1 && hdr.batch.count <= MAX_BATCH
                && UDP_LENGTH(hdr.net) == UDP_HEADER_BYTES + BATCH_HEADER_BYTES
                                      + hdr.batch.count * EVENT_BYTES) {
            bool well_formed = true;
            FOR_EACH_SLOT(BATCH_SAME_STREAM)
            if (well_formed) {
                meta.batch.count = (bit<32>)hdr.batch.count;
            }
        }
        bool batched = meta.batch.count != 0;
#else
        bool batched = false;
#endif

        if (!hdr.event.isValid() && !batched) {
            /* An operator host's heartbeat says it is alive: the controller
             * watches this counter per port (testbed.dataplane.liveness). */
            if (IS_UDP(hdr.net) && UDP_DST_PORT(hdr.net) == HEARTBEAT_UDP_PORT) {
                heartbeats.count(standard_metadata.ingress_port);
            } else {
                non_event.count(0);
            }
            mark_to_drop(standard_metadata);
        } else {
            /* The event: the frame's own, or the one this pass of a batch takes. */
#ifdef BATCHES
            event_t current = hdr.event;
            if (batched) {
                FOR_EACH_SLOT(BATCH_SELECT)
            }
            meta.stream = current.stream;
#define CURRENT current
#else
            /* the header itself: a local copy is a header bmv2 copies per
             * packet, field by field */
#define CURRENT hdr.event
#endif

            /* drop_code is DROP_NONE (0) as bmv2 zeroes all metadata per
             * packet: only a miss writes it, so the common path does not */
#ifdef FIXED
            /* Bank 0 throughout (bmv2's 0), and nothing has been decided:
             * the configuration is looked up straight away. */
            {
#else
            boundary_check.apply(CURRENT, STREAM_KEY, meta.epoch, hdr.scratch);
            if (meta.epoch.switching == 1 || hdr.scratch.in_transition == 1) {
                if (!previous_spec.apply().hit) {
                    meta.verdict.drop_code = DROP_UNKNOWN_STREAM;
                }
            }
            if (meta.verdict.drop_code == DROP_NONE) {
#endif
#ifdef FIXED
                if (operator_count.apply().hit) {
                    switch (window_spec.apply().action_run) {
                        set_count_window: {
                            /* tracked in the action (counts.p4): a count
                             * of 0 is a gap between windows (below) */
                        }
                        set_time_window:
                        set_event_time_window: {
                            slides.apply(CURRENT, STREAM_KEY, meta.win, PREVIOUS_EPOCH meta.verdict,
                                         meta.flags, hdr.scratch);
                            if (SPLIT_BY_KEY) {
                                /* the key's operator (split_by_key) */
                                meta.verdict.newest_op = hdr.scratch.key_op;
                            }
                        }
                        default: {
                            meta.verdict.drop_code = DROP_UNKNOWN_STREAM;
                        }
                    }
                } else {
                    meta.verdict.drop_code = DROP_UNKNOWN_STREAM;
                }
#else
                if (window_spec.apply().hit) {
                    if (operator_count.apply().hit) {
                        slides.apply(CURRENT, STREAM_KEY, meta.win, PREVIOUS_EPOCH meta.verdict,
                                     meta.flags, hdr.scratch);
                    } else {
                        meta.verdict.drop_code = DROP_UNKNOWN_STREAM;
                    }
                } else {
                    meta.verdict.drop_code = DROP_UNKNOWN_STREAM;
                }
#endif
            }
#ifdef BATCHES
            /* Whether the drops are already counted, one by one. */
            bool counted = false;
            if (batched) {
                if (meta.verdict.drop_code == DROP_NONE) {
                    /* a batch's event, counted as it is taken */
                    stream_in.count(STREAM_KEY);
                    BATCH_TAKE(CURRENT)
                    if (meta.batch.at == 0) {
                        BATCH_WHOLE_SLIDE
                    }
                } else {
                    DROP_COUNT
                }
                counted = true;
                meta.verdict.drop_code = DROP_UNKNOWN_STREAM;   /* nothing leaves this pass ... */
                if ((bit<32>)meta.batch.at + 1 < meta.batch.count) {
                    /* ... but the frame, again, for the next event */
                    meta.batch.at = meta.batch.at + 1;
                    resubmit_preserving_field_list(BATCH_FIELDS);
                } else if (meta.batch.any_assigned == 1) {
                    /* The last event: one destination for the whole batch. */
                    epoch.read(meta.batch.final_epoch, STREAM_KEY);
                    BATCH_DESTINATION
                    meta.verdict.drop_code = DROP_NONE;
                }
            } else if (meta.verdict.drop_code == DROP_NONE) {
                COUNTS_FOR_COPIES
            }
            if (meta.verdict.drop_code == DROP_NONE) {
                counted = false;
                ROUTE_TO_OPERATORS
            }
#else
            /* One test of the verdict for every step that needs windows:
             * each `if` is a condition bmv2 evaluates per event, and the
             * code between two is one more table of p4c's.  The batch
             * build's passes need the tests apart (above). */
#ifdef FIXED
            /* Every drop so far left a count of 0 (DROP_AS, headers.p4), and
             * every event with windows has one at least: one test where a
             * count stream's gap took a test of its own before the test of
             * the verdict. */
            if (meta.verdict.active != 0) {
                ONE_COPY_OR_MANY
            } else {
                if (meta.verdict.drop_code == DROP_NONE) {
                    meta.verdict.drop_code = DROP_NO_WINDOW;   /* a count stream's gap */
                }
                DROP_COUNT
                mark_to_drop(standard_metadata);
            }
#else
            if (meta.verdict.drop_code == DROP_NONE) {
#ifndef EGRESS_DECIDES
                WINDOWS_HEADER_ON
#endif
                COUNTS_FOR_COPIES
                ROUTE_TO_OPERATORS
            } else {
                DROP_COUNT
                mark_to_drop(standard_metadata);
            }
#endif
#endif

#ifdef BATCHES
            if (meta.verdict.drop_code != DROP_NONE) {
                if (!counted) {
                    if (batched) {
                        FOR_EACH_SLOT(BATCH_UNROUTED)
                    } else {
                        DROP_COUNT
                    }
                }
                mark_to_drop(standard_metadata);
            } else if (!batched) {
                /* a single event, counted once it is sent on, as in the
                 * other builds (COUNT_SENT_ON) */
                stream_in.count(STREAM_KEY);
            }
#endif
#ifdef CEP
            /* Every event goes through the CEP stage, sent on or dropped
             * by the splitter (docs/cep.md, "What the stage sees"). */
            if (!batched) {
                CEP_INGRESS
            }
#endif
        }
    }
}

#undef CURRENT
#undef COUNTS_FOR_COPIES
#undef COPY_WINDOWS
#undef BY_KEY_WINDOWS
#undef ROUTE_TO_OPERATORS
#undef DROP_COUNT
#undef OLD_COUNTS_FOR_COPIES
#undef HANDOVER_OR
#undef UNROUTED
#undef COUNT_SENT_ON

#endif
