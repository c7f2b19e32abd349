/*
 * Parser, deparser and the checksum controls.
 *
 * A frame is an event only when it is a whole IPv4 datagram without
 * options (not a fragment: a later fragment has no UDP header, only bytes
 * that may look like one), UDP, and sent to EVENT_UDP_PORT, with the whole
 * 32-byte event header present; anything
 * else leaves hdr.event invalid and ingress counts and drops it
 * (non_event).  A frame too short for a header it extracts stops the
 * parser with error.PacketTooShort, which v1model passes on to ingress with
 * the headers extracted so far: again no valid event.  Any frame shorter
 * than Ethernet, IPv4 and UDP together is one of them, whatever it carries,
 * as they are one header here (net_t, headers.p4).
 */
#ifndef SPLITTER_PARSER_P4
#define SPLITTER_PARSER_P4

parser MyParser(packet_in packet,
                out headers_t hdr,
                inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    /* One extract up to UDP, and one select on its fields (headers.p4, net_t). */
    state start {
        packet.extract(hdr.net);
        transition select(hdr.net.eth_src_type, hdr.net.ip_head, hdr.net.udp) {
            (ETHERTYPE_IPV4 &&& ETHERTYPE_MASK, IP_HEAD_UDP &&& IP_HEAD_UDP_MASK,
             UDP_TO(EVENT_UDP_PORT) &&& UDP_TO_MASK): parse_event;
#ifdef BATCHES
            (ETHERTYPE_IPV4 &&& ETHERTYPE_MASK, IP_HEAD_UDP &&& IP_HEAD_UDP_MASK,
             UDP_TO(BATCH_UDP_PORT) &&& UDP_TO_MASK): parse_batch;
#endif
            default: accept;
        }
    }

#ifdef BATCHES
    /* A batch: its header, then `count` events.  A count out of 1 ..
     * MAX_BATCH stops here, and a frame too short for its events stops with
     * PacketTooShort; ingress then finds the batch malformed (non_event). */
    state parse_batch {
        packet.extract(hdr.batch);
        meta.batch.to_parse = hdr.batch.count;
        transition select(hdr.batch.count) {
            0: accept;
            1 .. MAX_BATCH: parse_batched_event;
            default: accept;
        }
    }

    state parse_batched_event {
        packet.extract(hdr.events.next);
        meta.batch.to_parse = meta.batch.to_parse - 1;
        transition select(meta.batch.to_parse) {
            0: batch_parsed;
            default: parse_batched_event;
        }
    }

    /* Once per pass, after the last event: one stream per batch, or ingress
     * finds it malformed.  The unrouted-drop counter's index is set here:
     * p4c would fold an ingress assignment into each of its uses, and give
     * every one a temporary (docs/p4.md, rule 5). */
    state batch_parsed {
        meta.batch.unrouted = (bit<32>)hdr.events[0].stream * DROP_SLOTS + DROP_UNKNOWN_STREAM;
        transition accept;
    }
#endif

    state parse_event {
        packet.extract(hdr.event);
        transition accept;
    }
}

/* The incoming IPv4 checksum is not verified: the splitter decides on the
 * event header alone, as the pipeline model does, and rewrites the
 * checksum of every copy it sends. */
control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* Every copy that leaves has a new destination IP (egress_rewrite), so
 * its IPv4 header checksum is computed afresh.  The UDP checksum is set to
 * 0 ("none") by the rewrite instead of being recomputed. */
control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        /* Every frame that leaves has hdr.net valid (ingress drops the
         * others), so the update asks nothing first. */
        update_checksum(
            true,
            { hdr.net.ip_head,
              hdr.net.ip_src,
              hdr.net.ip_dst },
            hdr.net.ip_checksum,
            HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.net);
        packet.emit(hdr.event);
        packet.emit(hdr.windows);   /* valid on copies only (egress.p4) */
#ifdef CEP
        packet.emit(hdr.cep);       /* valid on complex event frames only (cep.p4) */
        packet.emit(hdr.cep_events);
#endif
#ifdef BATCHES
        packet.emit(hdr.batch);
        /* Each kept event of a batch copy, then its Windows header; egress
         * invalidates the events this copy does not carry. */
        packet.emit(hdr.events[0]);  packet.emit(hdr.events_windows[0]);
        packet.emit(hdr.events[1]);  packet.emit(hdr.events_windows[1]);
        packet.emit(hdr.events[2]);  packet.emit(hdr.events_windows[2]);
        packet.emit(hdr.events[3]);  packet.emit(hdr.events_windows[3]);
        packet.emit(hdr.events[4]);  packet.emit(hdr.events_windows[4]);
        packet.emit(hdr.events[5]);  packet.emit(hdr.events_windows[5]);
        packet.emit(hdr.events[6]);  packet.emit(hdr.events_windows[6]);
        packet.emit(hdr.events[7]);  packet.emit(hdr.events_windows[7]);
        packet.emit(hdr.events[8]);  packet.emit(hdr.events_windows[8]);
        packet.emit(hdr.events[9]);  packet.emit(hdr.events_windows[9]);
        packet.emit(hdr.events[10]); packet.emit(hdr.events_windows[10]);
        packet.emit(hdr.events[11]); packet.emit(hdr.events_windows[11]);
        packet.emit(hdr.events[12]); packet.emit(hdr.events_windows[12]);
        packet.emit(hdr.events[13]); packet.emit(hdr.events_windows[13]);
        packet.emit(hdr.events[14]); packet.emit(hdr.events_windows[14]);
        packet.emit(hdr.events[15]); packet.emit(hdr.events_windows[15]);
#endif
    }
}

#endif
