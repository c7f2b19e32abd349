/*
 * Plain forwarding that reads the event: p4/baseline/forward.p4 with the
 * parser and deparser of an event frame (events.p4).  Against forward.p4 it
 * measures what taking an event apart costs on bmv2; it is the floor under
 * cep_floor.p4, which does the same and keeps a window and a pattern.
 */
struct no_meta_t { }
#define FLOOR_META no_meta_t
#include "events.p4"

control ForwardIngress(inout event_headers_t hdr, inout no_meta_t meta,
                       inout standard_metadata_t standard_metadata) {
    FORWARD_BY_PORT

    apply {
        forward.apply();
    }
}

V1Switch(EventParser(), EventVerifyChecksum(), ForwardIngress(), EventEgress(),
         EventComputeChecksum(), EventDeparser()) main;
