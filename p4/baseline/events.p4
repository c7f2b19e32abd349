/*
 * What the baseline programs that read events share: the splitter's header
 * types and constants, a parser that takes an event frame as far as its
 * event header, and a deparser that puts it back unchanged.
 *
 * Included by forward_events.p4 and cep_floor.p4; each defines FLOOR_META
 * (its metadata struct) and its own ingress.  The splitter's own parser
 * (p4/parser.p4) also sorts out batches, heartbeats and fragments; these do
 * not, so that what they cost is the least any program reading an event
 * pays on bmv2.
 */
#ifndef BASELINE_EVENTS_P4
#define BASELINE_EVENTS_P4
#include <core.p4>
#include <v1model.p4>

#define CEP    /* for CEP_SIGN and CEP_DEPTH; this build has no CEP stage of the splitter's */
#include "../constants.p4"
#include "../headers.p4"

struct event_headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    event_t    event;
}

parser EventParser(packet_in packet, out event_headers_t hdr, inout FLOOR_META meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.src_addr_type) {
            ETHERTYPE_IPV4 &&& ETHERTYPE_MASK: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.id_frag_ttl_protocol) {
            IPV4_WHOLE_UDP &&& 0xFF: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.ports) {
            (bit<32>)EVENT_UDP_PORT &&& UDP_DST_PORT_MASK: parse_event;
            default: accept;
        }
    }
    state parse_event {
        packet.extract(hdr.event);
        transition accept;
    }
}

control EventVerifyChecksum(inout event_headers_t hdr, inout FLOOR_META meta) {
    apply { }
}

/* Headers are forwarded as they came: no checksum to mend. */
control EventComputeChecksum(inout event_headers_t hdr, inout FLOOR_META meta) {
    apply { }
}

control EventEgress(inout event_headers_t hdr, inout FLOOR_META meta,
                    inout standard_metadata_t standard_metadata) {
    apply { }
}

control EventDeparser(packet_out packet, in event_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.event);
    }
}

/* The one table of p4/baseline/forward.p4, under the same names, so that
 * testbed.targets.bmv2.process fills it alike (FORWARD_TABLE, FORWARD_ACTION). */
#define FORWARD_BY_PORT                                                        \
    action to_port(bit<9> port) {                                              \
        standard_metadata.egress_spec = port;                                  \
    }                                                                          \
    action drop() {                                                            \
        mark_to_drop(standard_metadata);                                       \
    }                                                                          \
    table forward {                                                            \
        key = { standard_metadata.ingress_port : exact @name("port"); }        \
        actions = { to_port; @defaultonly drop; }                              \
        const default_action = drop();                                         \
        size = 512;                                                            \
    }

#endif
