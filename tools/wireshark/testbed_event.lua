-- Wireshark / tshark dissector for the testbed's event header.
--
-- Every event travels as Ethernet / IPv4 / UDP to port 50000 / event header
-- (docs/wire.md; the Scapy layer is testbed.dataplane.wire.Event).  The
-- header is 32 bytes in network byte order:
--
--   stream 16 | flags 16 | seq 32 | ts 64 | key 64 | value 64 (signed)
--
-- Copies the splitter sends set flags bit 0 and carry a 32-byte Windows
-- header after it (docs/wire.md, "Windows header"):
--
--   window 64 | span 32 | stride 16 | epoch 16 | old_window 64 | old_span 32 | old_stride 16 | reserved 16
--
-- A batch (UDP port 50002) holds up to 16 events behind a 4-byte header
-- (count 16 | flags 16); each event is dissected as above.
--
-- Complex events (UDP port 50003, docs/wire.md "Complex events") come
-- behind a 4-byte header (count 16 | flags 16), 32 bytes each:
--
--   pattern 16 | reserved 16 | match 32 | stream 16 | reserved 16 | seq 32 | ts 64 | value 64 (signed)
--
-- Load it for one command:   tshark -X lua_script:tools/wireshark/testbed_event.lua -r pcaps/w1-eth1.pcap
-- or install it for good:    cp tools/wireshark/testbed_event.lua ~/.local/lib/wireshark/plugins/
-- Display filters then work on its fields: event.stream == 291 && event.seq < 10

local event = Proto("event", "Testbed stream event")

local EVENT_UDP_PORT = 50000
local BATCH_UDP_PORT = 50002
local BATCH_LEN = 4
local MAX_BATCH = 16
local EVENT_LEN = 32
local WINDOWS_LEN = 32
local FLAG_WINDOWS = 1

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
local w = {
    window     = ProtoField.uint64("event.windows.window", "Newest window", base.DEC, nil, nil,
                                   "this copy's newest window in the epoch that served the event"),
    span       = ProtoField.uint32("event.windows.span", "Span", base.DEC, nil, nil,
                                   "windows from it back to the event's oldest; 0: none"),
    stride     = ProtoField.uint16("event.windows.stride", "Stride", base.DEC, nil, nil, "N of that epoch"),
    epoch      = ProtoField.uint16("event.windows.epoch", "Epoch", base.DEC),
    old_window = ProtoField.uint64("event.windows.old_window", "Previous epoch: newest window", base.DEC),
    old_span   = ProtoField.uint32("event.windows.old_span", "Previous epoch: span", base.DEC),
    old_stride = ProtoField.uint16("event.windows.old_stride", "Previous epoch: stride", base.DEC),
}
event.fields = { f.stream, f.flags, f.seq, f.ts, f.key, f.value,
                 w.window, w.span, w.stride, w.epoch, w.old_window, w.old_span, w.old_stride }

local short_frame = ProtoExpert.new("event.short", "Event header truncated",
                                    expert.group.MALFORMED, expert.severity.ERROR)
event.experts = { short_frame }

-- One event header at the start of ``buffer`` (and its Windows header when
-- its flags say so): adds them under ``tree``, returns the bytes read, or 0.
local function add_event(buffer, pinfo, tree)
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
    local flags = buffer(2, 2):uint()
    if flags % (2 * FLAG_WINDOWS) >= FLAG_WINDOWS and buffer:len() >= EVENT_LEN + WINDOWS_LEN then
        local h = buffer(EVENT_LEN, WINDOWS_LEN)
        local wt = tree:add(event, h, "Windows")
        wt:add(w.window, h(0, 8))
        wt:add(w.span, h(8, 4))
        wt:add(w.stride, h(12, 2))
        wt:add(w.epoch, h(14, 2))
        wt:add(w.old_window, h(16, 8))
        wt:add(w.old_span, h(24, 4))
        wt:add(w.old_stride, h(28, 2))
        return EVENT_LEN + WINDOWS_LEN
    end
    return EVENT_LEN
end

function event.dissector(buffer, pinfo, tree)
    pinfo.cols.protocol = "EVENT"
    local read = add_event(buffer, pinfo, tree)
    if read == 0 then
        return 0
    end
    pinfo.cols.info = string.format("event stream=%d seq=%d ts=%s key=%s value=%s", buffer(0, 2):uint(),
                                    buffer(4, 4):uint(), tostring(buffer(8, 8):uint64()),
                                    tostring(buffer(16, 8):uint64()), tostring(buffer(24, 8):int64()))
    if read > EVENT_LEN then
        local h = buffer(EVENT_LEN, WINDOWS_LEN)
        pinfo.cols.info:append(string.format(" window=%s span=%d stride=%d epoch=%d",
                                             tostring(h(0, 8):uint64()), h(8, 4):uint(), h(12, 2):uint(),
                                             h(14, 2):uint()))
    end
    return read
end

-- A batch (docs/wire.md, "Batches"): UDP port 50002, a 4-byte header
--   count 16 | flags 16
-- then ``count`` events, each followed by its Windows header in a copy.
local batch = Proto("eventbatch", "Testbed event batch")
local b = {
    count = ProtoField.uint16("eventbatch.count", "Events", base.DEC, nil, nil, "events that follow, 1 to 16"),
    flags = ProtoField.uint16("eventbatch.flags", "Flags", base.HEX, nil, nil,
                              "bit 0: each event carries its Windows header"),
}
batch.fields = { b.count, b.flags }
local bad_batch = ProtoExpert.new("eventbatch.malformed", "Batch count disagrees with its length",
                                  expert.group.MALFORMED, expert.severity.ERROR)
batch.experts = { bad_batch }

function batch.dissector(buffer, pinfo, tree)
    pinfo.cols.protocol = "EVENTBATCH"
    local subtree = tree:add(batch, buffer(0, math.min(buffer:len(), BATCH_LEN)))
    if buffer:len() < BATCH_LEN then
        subtree:add_proto_expert_info(bad_batch)
        return 0
    end
    local count = buffer(0, 2):uint()
    local each = EVENT_LEN
    if buffer(2, 2):uint() % (2 * FLAG_WINDOWS) >= FLAG_WINDOWS then
        each = EVENT_LEN + WINDOWS_LEN
    end
    subtree:add(b.count, buffer(0, 2))
    subtree:add(b.flags, buffer(2, 2))
    pinfo.cols.info = string.format("batch of %d events", count)
    if count < 1 or count > MAX_BATCH or buffer:len() < BATCH_LEN + count * each then
        subtree:add_proto_expert_info(bad_batch)
        return BATCH_LEN
    end
    for i = 0, count - 1 do
        add_event(buffer(BATCH_LEN + i * each, each):tvb(), pinfo, tree)
    end
    return BATCH_LEN + count * each
end

-- Complex events for a sink (docs/wire.md, "Complex events").
local CEP_UDP_PORT = 50003
local CEP_LEN = 4
local COMPLEX_EVENT_LEN = 32
local MAX_PATTERNS = 4
local cep = Proto("complexevents", "Testbed complex events")
local ce = Proto("complexevent", "Testbed complex event")
local c = {
    count = ProtoField.uint16("complexevents.count", "Complex events", base.DEC, nil, nil,
                              "complex events that follow, 1 to 4"),
    flags = ProtoField.uint16("complexevents.flags", "Flags", base.HEX),
}
local e = {
    pattern = ProtoField.uint16("complexevent.pattern", "Pattern", base.DEC, nil, nil, "the pattern's id"),
    match   = ProtoField.uint32("complexevent.match", "Match", base.DEC, nil, nil,
                                "its number among the pattern's matches, from 1"),
    stream  = ProtoField.uint16("complexevent.stream", "Stream", base.DEC, nil, nil, "the completing event's"),
    seq     = ProtoField.uint32("complexevent.seq", "Sequence number", base.DEC, nil, nil, "the completing event's"),
    ts      = ProtoField.uint64("complexevent.ts", "Timestamp", base.DEC, nil, nil, "the completing event's"),
    value   = ProtoField.int64("complexevent.value", "Value", base.DEC, nil, nil, "the pattern's return value"),
}
cep.fields = { c.count, c.flags }
ce.fields = { e.pattern, e.match, e.stream, e.seq, e.ts, e.value }
local bad_cep = ProtoExpert.new("complexevents.malformed", "Complex event count disagrees with its length",
                                expert.group.MALFORMED, expert.severity.ERROR)
cep.experts = { bad_cep }

function cep.dissector(buffer, pinfo, tree)
    pinfo.cols.protocol = "COMPLEXEVENTS"
    local subtree = tree:add(cep, buffer(0, math.min(buffer:len(), CEP_LEN)))
    if buffer:len() < CEP_LEN then
        subtree:add_proto_expert_info(bad_cep)
        return 0
    end
    local count = buffer(0, 2):uint()
    subtree:add(c.count, buffer(0, 2))
    subtree:add(c.flags, buffer(2, 2))
    pinfo.cols.info = string.format("%d complex events", count)
    if count < 1 or count > MAX_PATTERNS or buffer:len() < CEP_LEN + count * COMPLEX_EVENT_LEN then
        subtree:add_proto_expert_info(bad_cep)
        return CEP_LEN
    end
    for i = 0, count - 1 do
        local h = buffer(CEP_LEN + i * COMPLEX_EVENT_LEN, COMPLEX_EVENT_LEN)
        local t = tree:add(ce, h)
        t:add(e.pattern, h(0, 2))
        t:add(e.match, h(4, 4))
        t:add(e.stream, h(8, 2))
        t:add(e.seq, h(12, 4))
        t:add(e.ts, h(16, 8))
        t:add(e.value, h(24, 8))
        t:append_text(string.format(", pattern %d, match %d", h(0, 2):uint(), h(4, 4):uint()))
    end
    return CEP_LEN + count * COMPLEX_EVENT_LEN
end

DissectorTable.get("udp.port"):add(EVENT_UDP_PORT, event)
DissectorTable.get("udp.port"):add(CEP_UDP_PORT, cep)
DissectorTable.get("udp.port"):add(BATCH_UDP_PORT, batch)
