/*
 * Egress: address every copy to its operator instance, and tell it which
 * of the event's windows are its own (the windows header).
 *
 * The rewrite is keyed on where the copy leaves and the rid of the
 * multicast node that made it: 0 for unicast and for a node of whole
 * hosts, the instance's id for an instance on a shared port
 * (testbed.semantics.instances).  So it is right for unicast and for each
 * replica of a group alike, and so are the position tables; its action
 * names the copy's instance, which operator_out counts.  The build
 * without changes does all of that in operator_back, keyed on the
 * (operator set, newest operator) too.  A copy for an instance without an
 * entry is dropped.  stream_out / operator_out count
 * the copies that actually leave.
 */
#ifndef SPLITTER_EGRESS_P4
#define SPLITTER_EGRESS_P4

/* The previous epoch's windows of the copy's operator, at old_position in
 * its operator list (previous_position). */
#define PREVIOUS_WINDOWS                                                       \
    COPY_BACK(hdr.scratch.back, meta.verdict.old_newest, hdr.scratch.old_position, meta.prev.n_ops) \
    if (hdr.scratch.back < meta.copy.old_active) {                             \
        PREVIOUS_HALF(OLD_WINDOWS_OF(meta.verdict.old_window - (bit<64>)hdr.scratch.back, \
                                              meta.copy.old_active - hdr.scratch.back)) \
    } else {                                                                   \
        PREVIOUS_HALF(OLD_WINDOWS_OF(0, 0))                           \
    }

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    counter<bit<16>>(N_STREAMS, CounterType.packets_and_bytes) stream_out;   /* copies sent, per stream */
    counter<bit<32>>(N_INSTANCES, CounterType.packets_and_bytes) operator_out; /* copies sent, per operator instance */
#ifdef CEP
    counter<bit<32>>(N_PORTS, CounterType.packets_and_bytes) cep_out;        /* complex events sent, per sink port */
#endif

    /* Destination MAC and IP of the operator instance; the UDP checksum
     * covers the destination IP, so it is switched off (0) rather than left
     * stale: here where egress decides, and elsewhere once per event in
     * ingress, beside WINDOWS_HEADER_ON.  The IPv4 checksum is recomputed in
     * MyComputeChecksum. */
    action rewrite_dst(mac_addr_t mac, ipv4_addr_t ip, bit<32> instance) {
        hdr.net.eth_dst = mac;
        hdr.net.ip_dst = ip;
#ifdef EGRESS_DECIDES
        hdr.net.udp = hdr.net.udp & UDP_NO_CHECKSUM;
        /* counted later, once the copy is known to leave */
        meta.copy.instance = instance;
#else
        /* every copy addressed here leaves: counted here, not in a table
         * of p4c's of its own */
        stream_out.count(STREAM_KEY);
        operator_out.count(instance);
#endif
    }

#ifndef FIXED
    /* Keyed on the two fields themselves, as the position tables are: an
     * instance worked out from them would be a test and a table of p4c's
     * on every copy, and a field to reset and copy (docs/p4.md, rule 6). */
    table egress_rewrite {
        key = {
            standard_metadata.egress_port : exact @name("port");
            standard_metadata.egress_rid  : exact @name("rid");
        }
        actions = { rewrite_dst; @defaultonly NoAction; }
        const default_action = NoAction();
        size = EGRESS_TABLE_SIZE;
    }

    /* Where the copy's operator stands in the operator set of the epoch
     * that serves the event, and in the previous epoch's list
     * (testbed.semantics.plan).  Where ingress wrote the Windows header of
     * the newest window's operator (the plain build), the action moves
     * it back to this operator's own windows, in one assignment and no
     * test. */
    action set_position(bit<32> position) {
#ifdef EGRESS_DECIDES
        hdr.scratch.position = position;
#else
        /* one assignment: p4c would fold a field set first into it anyway */
        hdr.windows.halves = WINDOWS_BACK(hdr.windows.halves,
                                           BACK_OF(meta.verdict.newest_op, position, N_OPS));
#endif
    }

    table operator_position {
        key = {
            meta.win.opset                : exact @name("opset");
            standard_metadata.egress_port : exact @name("port");
            standard_metadata.egress_rid  : exact @name("rid");
        }
        actions = { set_position; @defaultonly NoAction; }
        const default_action = NoAction();
        size = POSITION_TABLE_SIZE;
    }
#else
    /* Every copy, addressed and given its own windows by one table: keyed
     * on the (operator set, newest operator) that chose its port or group
     * as well as on the replica, its entry knows how far back the
     * operator's windows lie.  The newest window's operator's entry
     * (back 0) takes rewrite_dst, the header as ingress wrote it; the
     * others' take rewrite_back, which moves it back by a constant (back
     * in the window's and the span's place at once, from the control
     * plane), with no lookup of a position nor arithmetic on it
     * (docs/p4.md, "An eighth step").  Every operator a copy goes to owns
     * one of the event's windows in this build, so each has an entry;
     * split by key, its index is the newest operator, 0 back. */
    action rewrite_back(mac_addr_t mac, ipv4_addr_t ip, bit<32> instance, bit<128> windows_back) {
        hdr.net.eth_dst = mac;
        hdr.net.ip_dst = ip;
        stream_out.count(STREAM_KEY);
        operator_out.count(instance);
        hdr.windows.halves = hdr.windows.halves - ((bit<256>)windows_back << 128);
    }

    table operator_back {
        key = {
            meta.win.opset                : exact @name("opset");
            meta.verdict.newest_op        : exact @name("newest_op");
            standard_metadata.egress_port : exact @name("port");
            standard_metadata.egress_rid  : exact @name("rid");
        }
        actions = { rewrite_dst; rewrite_back; @defaultonly NoAction; }
        const default_action = NoAction();
        size = BACK_TABLE_SIZE;
    }
#endif

#ifndef FIXED
    action set_previous_position(bit<32> position) {
        hdr.scratch.old_position = position;
    }

    table previous_position {
        key = {
            STREAM_KEY                    : exact @name("stream");
            standard_metadata.egress_port : exact @name("port");
            standard_metadata.egress_rid  : exact @name("rid");
        }
        actions = { set_previous_position; @defaultonly NoAction; }
        const default_action = NoAction();
        size = POSITION_TABLE_SIZE;
    }
#endif

    apply {
#ifdef EGRESS_DECIDES
        bool sent = false;
#ifdef BATCHES
        bool batched = hdr.batch.isValid();
#else
        bool batched = false;
#endif
        if (hdr.event.isValid() || batched) {
            if (egress_rewrite.apply().hit) {
#ifdef BATCHES
                /* Each position table is applied here once, for a single
                 * event and a batch alike. */
                bool position_hit = false;
                bool old_position_hit = false;
                if (batched || (!SPLIT_BY_KEY && meta.copy.active != 0)) {
                    position_hit = operator_position.apply().hit;
                }
                if (batched || meta.copy.old_active != 0) {
                    old_position_hit = previous_position.apply().hit;
                }
#endif

#ifdef CEP
                if (standard_metadata.instance_type == INSTANCE_INGRESS_CLONE) {
                    /* The clone for the sinks (cep.p4): this sink's complex events. */
                    CEP_EGRESS
                } else
#endif
#ifdef BATCHES
                if (batched) {
                    /* Only the events whose windows are this operator's. */
                    meta.batch.kept = 0;
                    batched_event_t ev;
                    bit<32> back;
                    bool known;
                    bit<32> position;
                    bool mine;
                    FOR_EACH_SLOT(BATCH_KEEP)
                    if (meta.batch.kept != 0) {
                        sent = true;
                        bit<16> payload = BATCH_HEADER_BYTES
                                          + meta.batch.kept * (EVENT_BYTES + WINDOWS_HEADER_BYTES);
                        hdr.batch.count = meta.batch.kept;
                        hdr.batch.flags = FLAG_WINDOWS;
                        /* the UDP checksum, 0 since rewrite_dst */
                        hdr.net.udp = BATCH_UDP_PORT ++ UDP_DST_PORT(hdr.net)
                                      ++ (UDP_HEADER_BYTES + payload) ++ 16w0;
                        IP_TOTAL_LEN(hdr.net) = IPV4_HEADER_BYTES + UDP_HEADER_BYTES + payload;
                        /* Nothing but the headers above leaves: bytes past the
                         * batch's UDP length are not carried on. */
                        truncate((bit<32>)(ETHERNET_HEADER_BYTES + IP_TOTAL_LEN(hdr.net)));
                    }
                } else
#endif
                {
                    stream_out.count(STREAM_KEY);
                    operator_out.count(meta.copy.instance);
                    sent = true;

                    /* The windows of the event this operator owns: round robin
                     * puts the newest of them (newest_op - position) mod N
                     * windows back from the event's newest, and every N-th
                     * one before it as far as the event's windows reach. */
                    /* Each half of the Windows header is written once, on
                     * every path: each field bmv2 writes, zero or not,
                     * costs as much as forwarding a byte of payload many
                     * times over (docs/p4.md, "What an event costs").  The
                     * differential tests compare every byte.  Made here,
                     * before the first test: after the last it would be
                     * one more table of p4c's (else in ingress). */
                    WINDOWS_HEADER_ON
#ifdef BATCHES
                    if (SPLIT_BY_KEY) {
                        /* Split by key: the one copy carries every window of the event. */
                        hdr.windows.halves = WINDOWS_OF(meta.verdict.window, meta.copy.active, 1);
                    } else if (meta.copy.active == 0) {
#else
                    /* The event's one copy, first, as most copies are:
                     * sent by unicast to its newest window's operator, which
                     * stands 0 windows back, it gets the header the lookup
                     * below would give, without the lookup.  Split by key,
                     * it carries every window of the event.  After it, the
                     * table's hit itself, not a flag: each flag is a field
                     * to reset and two writes per copy. */
                    if (meta.verdict.active == 1 && meta.copy.old_active == 0) {
                        if (SPLIT_BY_KEY) {
                            hdr.windows.halves = WINDOWS_OF(meta.verdict.window, meta.copy.active, 1);
                        } else {
                            hdr.windows.halves = WINDOWS_OF(meta.verdict.window, meta.copy.active, N_OPS);
                        }
                    } else if (meta.copy.active == 0) {
#endif
                        /* only windows of the previous epoch hold the event */
                        hdr.windows.halves = WINDOWS_OF(0, 0, N_OPS);
#ifdef BATCHES
                    } else if (position_hit) {
#else
                    } else if (operator_position.apply().hit) {
#endif
                        COPY_BACK(hdr.scratch.back, meta.verdict.newest_op, hdr.scratch.position, N_OPS)
                        if (hdr.scratch.back < meta.copy.active) {
                            hdr.windows.halves = WINDOWS_OF(meta.verdict.window - (bit<64>)hdr.scratch.back,
                                                             meta.copy.active - hdr.scratch.back, N_OPS);
                        } else {
                            hdr.windows.halves = WINDOWS_OF(0, 0, N_OPS);
                        }
                    } else {
                        hdr.windows.halves = WINDOWS_OF(0, 0, N_OPS);
                    }
                    if (meta.copy.old_active != 0) {
#ifdef BATCHES
                        if (old_position_hit) {
#else
                        if (previous_position.apply().hit) {
#endif
                            PREVIOUS_WINDOWS
                        } else {
                            PREVIOUS_HALF(OLD_WINDOWS_OF(0, 0))
                        }
                    }
                }
            }
        }
        if (!sent) {
            mark_to_drop(standard_metadata);
        }
#else
        /* Ingress drops every frame that is not an event, and wrote each
         * copy's Windows header as the newest window's operator gets it
         * (COPY_WINDOWS, forwarding.p4): the one copy of most events leaves
         * with it as it is, and no test here asks what the frame is.  In
         * the build without changes, the one copy that unicast sent to its
         * port comes without it (ONE_COPY_OR_MANY, forwarding.p4), the
         * packet ingress had, its hdr.scratch and verdict with it: it is
         * made here, off the ingress thread, the splitter's busiest
         * (docs/p4.md, "The one copy's Windows header, made in egress"). */
#ifdef FIXED
        switch (operator_back.apply().action_run) {
            rewrite_dst: {
                if (!hdr.windows.isValid()) {
                    WINDOWS_HEADER_ON
                    hdr.windows.halves = WINDOWS_OF(NEWEST_WINDOW, meta.verdict.active,
                                                     COPY_STRIDE);
                }
            }
            rewrite_back: {
            }
            default: {
                mark_to_drop(standard_metadata);
            }
        }
#else
        if (egress_rewrite.apply().hit) {
            if (meta.verdict.active != 1 || meta.copy.old_active != 0) {
                /* An operator of the previous epoch's alone may own none
                 * of the event's windows in force, or have no position.
                 * Two assignments of the zero half, not one test of
                 * `!hit || NOT_OWN_SPAN`: p4c would keep that hit in
                 * metadata temporaries, reset on every packet. */
                if (operator_position.apply().hit) {
                    if (NOT_OWN_SPAN(hdr.windows.halves)) {
                        hdr.windows.halves = WINDOWS_OF(0, 0, N_OPS);
                    }
                } else {
                    hdr.windows.halves = WINDOWS_OF(0, 0, N_OPS);
                }
                if (meta.copy.old_active != 0) {
                    if (previous_position.apply().hit) {
                        PREVIOUS_WINDOWS
                    } else {
                        PREVIOUS_HALF(OLD_WINDOWS_OF(0, 0))
                    }
                }
            }
        } else {
            mark_to_drop(standard_metadata);
        }
#endif
#endif
    }
}

#endif
