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
    net_t      net;
    event_t    event;
}

/* As the splitter's parser takes an event (p4/parser.p4): one extract up
 * to UDP and one select, on the protocol and the port alone. */
parser EventParser(packet_in packet, out event_headers_t hdr, inout FLOOR_META meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.net);
        transition select(hdr.net.eth_src_type, hdr.net.ip_head, hdr.net.udp) {
            (ETHERTYPE_IPV4 &&& ETHERTYPE_MASK, (bit<80>)IPV4_WHOLE_UDP &&& 0xFF,
             UDP_TO(EVENT_UDP_PORT) &&& UDP_TO_MASK): parse_event;
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
        packet.emit(hdr.net);
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
