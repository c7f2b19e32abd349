/*
 * Plain forwarding: the baseline the splitter's latency is measured against.
 *
 * It does what every switch program does at least once per frame and
 * nothing more: parse the Ethernet header, look the ingress port up in one
 * exact-match table, and send the frame unchanged out of the port found.
 * The splitter (p4/splitter.p4) does the same I/O plus its window state,
 * five tables and the replication engine, so the time a frame spends in
 * simple_switch running this program is the part of the splitter's time
 * that is bmv2's own.  The control plane fills `forward`
 * (testbed.targets.bmv2.process.Bmv2Process with `forward=`).
 */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t ethernet;
}

struct metadata_t { }

parser FwdParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control FwdVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FwdIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    action to_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    table forward {
        key = { standard_metadata.ingress_port : exact @name("port"); }
        actions = { to_port; @defaultonly drop; }
        const default_action = drop();
        size = 512;
    }

    apply {
        forward.apply();
    }
}

control FwdEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply { }
}

control FwdComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FwdDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(FwdParser(), FwdVerifyChecksum(), FwdIngress(), FwdEgress(), FwdComputeChecksum(), FwdDeparser()) main;
