-- Wireshark / tshark dissector for the testbed's event header.
--
-- Every event travels as Ethernet / IPv4 / UDP to port 50000 / event header
-- (docs/wire.md; the Scapy layer is testbed.dataplane.wire.Event).  The
-- header is 32 bytes in network byte order:
--
--   stream 16 | flags 16 | seq 32 | ts 64 | key 64 | value 64 (signed)
--
-- Load it for one command:   tshark -X lua_script:tools/wireshark/testbed_event.lua -r pcaps/w1-eth1.pcap
-- or install it for good:    cp tools/wireshark/testbed_event.lua ~/.local/lib/wireshark/plugins/
-- Display filters then work on its fields: event.stream == 291 && event.seq < 10

local event = Proto("event", "Testbed stream event")

local EVENT_UDP_PORT = 50000
local EVENT_LEN = 32

local f = {
    stream = ProtoField.uint16("event.stream", "Stream", base.DEC, nil, nil,
                               "event type = stream id; the splitter's registers are indexed by it"),
    flags  = ProtoField.uint16("event.flags", "Flags", base.HEX, nil, nil, "reserved, 0"),
    seq    = ProtoField.uint32("event.seq", "Sequence number", base.DEC, nil, nil,
                               "per-stream sequence number set by the source"),
    ts     = ProtoField.uint64("event.ts", "Timestamp", base.DEC, nil, nil, "in the stream's time units"),
    key    = ProtoField.uint64("event.key", "Key", base.DEC, nil, nil, "grouping key of the queries"),
    value  = ProtoField.int64("event.value", "Value", base.DEC, nil, nil, "the value operators compute on"),
}
event.fields = { f.stream, f.flags, f.seq, f.ts, f.key, f.value }

local short_frame = ProtoExpert.new("event.short", "Event header truncated",
                                    expert.group.MALFORMED, expert.severity.ERROR)
event.experts = { short_frame }

function event.dissector(buffer, pinfo, tree)
    pinfo.cols.protocol = "EVENT"
    local subtree = tree:add(event, buffer(0, math.min(buffer:len(), EVENT_LEN)))
    if buffer:len() < EVENT_LEN then
        subtree:add_proto_expert_info(short_frame)
        return 0
    end
    local stream = buffer(0, 2):uint()
    local seq = buffer(4, 4):uint()
    subtree:add(f.stream, buffer(0, 2))
    subtree:add(f.flags, buffer(2, 2))
    subtree:add(f.seq, buffer(4, 4))
    subtree:add(f.ts, buffer(8, 8))
    subtree:add(f.key, buffer(16, 8))
    subtree:add(f.value, buffer(24, 8))
    subtree:append_text(string.format(", stream %d, seq %d", stream, seq))
    pinfo.cols.info = string.format("event stream=%d seq=%d ts=%s key=%s value=%s", stream, seq,
                                    tostring(buffer(8, 8):uint64()), tostring(buffer(16, 8):uint64()),
                                    tostring(buffer(24, 8):int64()))
    return EVENT_LEN
end

DissectorTable.get("udp.port"):add(EVENT_UDP_PORT, event)
