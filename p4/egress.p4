/*
 * Egress: address every copy to the operator host behind its port.
 *
 * The rewrite is keyed on standard_metadata.egress_port, the port this
 * copy leaves on, so it is right for unicast and for each replica of a
 * multicast group alike.  A copy for a port without an entry is dropped.
 * stream_out / operator_out count the copies that actually leave.
 */
#ifndef SPLITTER_EGRESS_P4
#define SPLITTER_EGRESS_P4

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    counter(N_STREAMS, CounterType.packets_and_bytes) stream_out;   /* copies sent, per stream */
    counter(N_PORTS, CounterType.packets_and_bytes) operator_out;   /* copies sent, per egress port */

    /* Destination MAC and IP of the operator host; the UDP checksum covers
     * the destination IP, so it is switched off (0) rather than left stale.
     * The IPv4 checksum is recomputed in MyComputeChecksum. */
    action rewrite_dst(mac_addr_t mac, ipv4_addr_t ip) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.checksum = 0;
    }

    table egress_rewrite {
        key = { standard_metadata.egress_port : exact @name("port"); }
        actions = { rewrite_dst; @defaultonly NoAction; }
        const default_action = NoAction();
        size = EGRESS_TABLE_SIZE;
    }

    apply {
        bool sent = false;
        if (hdr.event.isValid()) {
            if (egress_rewrite.apply().hit) {
                stream_out.count((bit<32>)hdr.event.stream);
                operator_out.count((bit<32>)standard_metadata.egress_port);
                sent = true;
            }
        }
        if (!sent) {
            mark_to_drop(standard_metadata);
        }
    }
}

#endif
