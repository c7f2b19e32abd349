/*
 * Headers and metadata of the splitter program.
 *
 * Wire format (testbed/dataplane/wire.py, docs/wire.md): Ethernet / IPv4 without
 * options / UDP to port EVENT_UDP_PORT / a 32-byte event header.
 */
#ifndef SPLITTER_HEADERS_P4
#define SPLITTER_HEADERS_P4

/* Whether egress decides which copies leave, and what they carry: in the
 * batch build (a batch's copy may keep none of its events for the operator,
 * and carries no Windows header of the frame's own) and the CEP build (the
 * clone for the sinks may have no complex event, and carries none).  In the
 * plain build and the build without changes, only events reach egress, and
 * every copy that egress_rewrite addresses leaves with the event's Windows
 * header: so those two make what every copy has in common in ingress, once
 * per event, and count a copy in the rewrite's action. */
#if defined(BATCHES) || defined(CEP)
#define EGRESS_DECIDES
#endif

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<9>  port_t;        /* v1model egress_spec / egress_port */

/* The frame's headers up to UDP, as one header: bmv2 pays for each header
 * on every frame, whether it is valid or not (marking it valid when it is
 * extracted, some 800 instructions, and invalid when the frame's header
 * vector is reused, some 650, besides each emit; docs/p4.md, rule 8).  The parser
 * extracts it whole and selects on its fields with masks, so a frame that
 * is not IPv4, has options or is not UDP still has it valid, with bytes
 * that mean something else: only hdr.event (or hdr.batch) says that the
 * frame is one of ours, and a heartbeat is asked of the fields (IS_UDP).
 * A field the program writes is a field of its own (a slice's write costs
 * more than the field); runs of the others are joined into one.  bmv2
 * extracts, copies into every replica and emits a header field by field,
 * and sums each copy's IPv4 checksum field by field (docs/p4.md, rule 6).
 * The bytes are the wire's either way. */
header net_t {
    mac_addr_t  eth_dst;
    bit<64>     eth_src_type;          /* source MAC (48), EtherType (16) */
    bit<80>     ip_head;               /* version (4), IHL (4), DSCP and ECN (8), total length (16),
                                          identification (16), flags (3), fragment offset (13), TTL (8), protocol (8) */
    bit<16>     ip_checksum;
    ipv4_addr_t ip_src;
    ipv4_addr_t ip_dst;
    bit<64>     udp;                   /* source port (16), destination port (16), length (16), checksum (16) */
}

/* The parts of net_t's joined fields.  A total length or a UDP length grows
 * by an addition to the whole field (it cannot carry: a frame is far below
 * 64 KiB), and the UDP length and checksum change in one write. */
#define IP_TOTAL_LEN(NET) NET.ip_head[63:48]
#define IP_TOTAL_LEN_UNIT 80w0x1000000000000
#define UDP_DST_PORT(NET) NET.udp[47:32]
#define UDP_LENGTH(NET) NET.udp[31:16]
#define UDP_LENGTH_UNIT 64w0x10000
#define UDP_NO_CHECKSUM 64w0xFFFFFFFFFFFF0000
/* The parser's masks of them: IPv4 without options, a whole UDP datagram,
 * and a destination port (constants.p4). */
#define IP_HEAD_UDP ((((bit<80>)IPV4_NO_OPTIONS) << 64) | (bit<80>)IPV4_WHOLE_UDP)
#define IP_HEAD_UDP_MASK ((((bit<80>)IPV4_NO_OPTIONS_MASK) << 64) | (bit<80>)IPV4_WHOLE_UDP_MASK)
#define UDP_TO(PORT) (((bit<64>)(PORT)) << 32)
#define UDP_TO_MASK (((bit<64>)UDP_DST_PORT_MASK) << 32)

/* A whole IPv4 datagram without options, UDP: the parser's test, and the
 * heartbeat's in ingress. */
#define IS_UDP(NET)                                                             \
    ((NET).isValid()                                                            \
     && ((NET).eth_src_type & ETHERTYPE_MASK) == ETHERTYPE_IPV4                 \
     && ((NET).ip_head & IP_HEAD_UDP_MASK) == IP_HEAD_UDP)

/* One stream event (P4SS Listing 1, widened to 64-bit timestamps/values). */
header event_t {
    bit<16> stream;      /* event type = stream id: indexes every register */
    bit<16> flags;       /* reserved */
    bit<32> seq;         /* per-stream sequence number set by the source */
    bit<64> ts;          /* event timestamp, in the stream's time units */
    bit<64> group_key;   /* grouping key for the operators' queries */
    bit<64> value;       /* signed on the operator side; opaque here */
}

/* The Windows header that follows the event in every copy: the windows of
 * the event that this copy's operator owns (docs/wire.md, "Windows header").
 * They are window - k * stride for k * stride < span, per epoch.  A batch's
 * events carry it field by field; a single event's copy carries the same
 * bytes as copy_windows_t (below). */
header windows_t {
    bit<64> window;      /* this copy's newest window, epoch in force (global id) */
    bit<32> span;        /* windows of the event from it back to the event's oldest; 0: none */
    bit<16> stride;      /* N of the epoch in force */
    bit<16> epoch;       /* configuration epoch, low 16 bits */
    bit<64> old_window;  /* the same for the previous epoch, during a transition */
    bit<32> old_span;
    bit<16> old_stride;
    bit<16> reserved;
}

#ifdef BATCHES
/* A batch frame (UDP to BATCH_UDP_PORT) starts with this header; `count`
 * events follow, and on a copy each kept event is followed by its Windows
 * header (docs/wire.md, "Batches"). */
header batch_t {
    bit<16> count;       /* events in the frame, 1 .. MAX_BATCH */
    bit<16> flags;       /* FLAG_WINDOWS on a copy */
}
#endif

#ifdef CEP
/* A complex event frame (UDP to CEP_UDP_PORT) starts with this header;
 * `count` complex events follow (docs/wire.md, "Complex events"). */
header cep_t {
    bit<16> count;
    bit<16> flags;
}

header complex_event_t {
    bit<16> pattern;     /* the pattern's id */
    bit<16> reserved;
    bit<32> match_no;    /* its number among the pattern's matches, from 1 */
    bit<16> stream;      /* the completing event's stream, seq and ts */
    bit<16> reserved2;
    bit<32> seq;
    bit<64> ts;
    bit<64> value;       /* the return value */
}
#endif

/* Values that every packet writes before it reads them live in headers
 * that are never valid, not in metadata.  bmv2 sets every metadata field
 * to 0 when a packet enters ingress and copies it into every replica, at
 * some 600 instructions a field (docs/p4.md, "What an event costs"); an
 * invalid header's fields it neither resets nor copies, and a write to one
 * still sticks.  None of them is ever made valid, so none is emitted.  A
 * value that must start at 0, must reach a replica's egress, or is a
 * table's key (bmv2 matches an invalid header's field as 0) stays in
 * metadata_t. */

/* The epoch before the one in force, as action data of previous_spec: what
 * the slide tracker needs for that epoch's last windows during a transition
 * (docs/p4.md, "Reconfiguration").  Its N is metadata (prev_params_t): the
 * egress needs it too. */
header prev_spec_t {
    bit<64> slide;
    bit<32> full;
    bit<64> extra;
    bit<64> size;
    bit<64> tail;          /* transition_end = boundary + tail */
}

/* The stream's window spec, and the working values of BoundaryCheck
 * (epochs.p4), the slide tracker (slides.p4, eventstarts.p4) and the
 * egress: one header, since bmv2 marks each header invalid on every packet
 * and every copy (docs/p4.md, rule 4). */
header scratch_t {
    /* The window spec: window_spec's action data (forwarding.p4).  Every
     * action writes every field its kind of window reads. */
    /* WINDOW_COUNT, WINDOW_TIME or WINDOW_TIME_EVENT_STARTS, and KIND_LATE
     * once the tracker finds the event late: the action's write of the
     * kind clears it, so it starts at 0 without being a metadata field
     * that every frame pays to reset (rule 4). */
    bit<8>  kind;
    bit<64> slide;         /* delta (events) or tau (time units) */
    bit<64> extra;         /* size mod slide */
    bit<32> cap;           /* ceil(size / slide), plus the late slides: where begun saturates */
    bit<8>  fixed_origin;  /* time windows: 1 = use origin, 0 = first event's ts */
    bit<64> origin;
    bit<64> lateness;      /* time windows: how far behind the newest ts an event may be */
    bit<64> size;          /* windows that start at events: how long each lasts */
    /* The working values */
    bit<1>  in_transition; /* windows of the previous epoch may hold events */
    bit<1>  initialized;   /* the stream has had an event: read once, for the slide tracker too */
    bit<1>  is_armed;      /* BoundaryCheck: a change waits for the boundary */
    bit<1>  is_time;       /* ... on a time stream */
    bit<1>  bank;          /* the fixed build's bank (BANK_KEY): never written, so bank 0 throughout */
    bit<3>  spare;
    bit<64> next;          /* the next slide's start: BoundaryCheck's read, the tracker's write */
    bit<64> newest_pos;    /* BoundaryCheck: the stream's newest position (count or timestamp) */
    bit<64> x;             /* the event's coordinate on the axis */
    bit<64> b;             /* the boundary where the epoch in force began */
    bit<64> previous_ts;
    bit<64> start;         /* the newest slide's start */
    bit<32> begun_now;
    bit<32> obegun;        /* the previous epoch's: windows begun, */
    bit<64> start_o;       /* newest slide's start */
    bit<32> newest_o;      /* and operator */
    bit<64> d;             /* distance past the boundary */
    bit<64> k;             /* ... in the previous epoch's slides */
    bit<64> p;             /* ... and the offset in the last of them */
    bit<64> held;
    bit<64> offset;        /* the event's offset in its slide */
    bit<64> advanced;      /* slides the event advanced */
    bit<64> rest;
    bit<64> n_ops;
    bit<64> step;
    bit<64> laps;
    bit<64> wide_cap;      /* cap, 64 bits wide */
    bit<64> back1;         /* windows that start at events: the three starts before the newest */
    bit<64> back2;
    bit<64> back3;
    bit<32> active;
    bit<32> position;      /* egress: where that operator stands in the epoch's operator set */
    bit<32> old_position;  /* ... and in the previous epoch's */
    bit<32> back;          /* egress: windows back from the event's newest to this operator's */
    bit<64> window;        /* the newest window's id, where it is no metadata (VERDICT_WINDOW) */
    bit<32> drop_slot;     /* stream_drops' index: stream * DROP_SLOTS + drop code (rule 5, docs/p4.md) */
    bit<32> slides_back;   /* slides a late event lies behind the newest (STEP_BACK) */
#ifdef FIXED
    bit<64> cell;          /* a count stream's count_state cell (counts.p4) */
    bit<32> n_operators;   /* N, and BY_KEY_N split by key (N_OPS, below) */
    bit<32> key_op;        /* split by key: the key's operator (split_by_key, forwarding.p4) */
#endif
}

/* The Windows header of a single event's copy: windows_t's 32 bytes in one
 * field (egress.p4, WINDOWS_OF), since setValid zeroes every field of a
 * header, and bmv2 pays some 660 instructions for each field it writes
 * (docs/p4.md, "What an event costs"): one field instead of eight.  Its
 * halves are the epoch in force's windows and the previous epoch's.  The
 * first is written whole, which zeroes the second; the second is or'd in
 * once, after it, where a transition needs it, over the 0 of setValid. */
header copy_windows_t {
    bit<256> halves;     /* window, span, stride, epoch; old_window, old_span, old_stride, reserved */
}

/* One half of a copy's Windows header (copy_windows_t), as one value: the
 * newest window of the event that the copy's operator owns, how many of the
 * event's windows are its own, and the stride between them; the epoch in
 * force (0 in the fixed build, which has only one); and the same for the
 * previous epoch, whose N is its stride. */
#ifdef FIXED
#define EPOCH_BITS 16w0
#else
#define EPOCH_BITS ((bit<16>)meta.epoch.number)
#endif
/* Shifts and ors, not concatenation: p4c masks each step of a
 * concatenation twice, and bmv2 evaluates every mask. */
#define WINDOWS_OF(WINDOW, SPAN, STRIDE) \
    (((bit<256>)(bit<64>)(WINDOW) << 192) | ((bit<256>)(bit<32>)(SPAN) << 160) \
     | ((bit<256>)(bit<16>)(STRIDE) << 144) | ((bit<256>)EPOCH_BITS << 128))
#define OLD_WINDOWS_OF(WINDOW, SPAN) \
    (((bit<256>)(bit<64>)(WINDOW) << 64) | ((bit<256>)(bit<32>)(SPAN) << 32) \
     | ((bit<256>)(bit<16>)meta.prev.n_ops << 16))
/* The previous epoch's half, or'd into the 0 that setValid left. */
#define PREVIOUS_HALF(OLD) hdr.windows.halves = hdr.windows.halves | (OLD);

/* How many windows back from the event's newest the newest of a copy's
 * operator lies, (NEWEST - POSITION) mod N_OPS for two values below N_OPS,
 * as one expression: the difference wraps, its top bit set, exactly when
 * NEWEST < POSITION, and only then is N_OPS added back. */
#define BACK_OF(NEWEST, POSITION, N_OPS) \
    (((NEWEST) - (POSITION)) + ((N_OPS) & (32w0 - (((NEWEST) - (POSITION)) >> 31))))
/* A half of the Windows header moved BACK windows back from the event's
 * newest: window and span less BACK at once, as one product and one
 * difference, for bmv2 pays for every operator of an expression
 * (docs/p4.md, rule 7).  Stride and epoch are kept.  NOT_OWN_SPAN asks of
 * the result whether the operator owns none of the event's windows: then
 * BACK >= span, and the span less BACK is 0 or has wrapped. */
#define WINDOWS_BACK(HALF, BACK) \
    ((HALF) - (bit<256>)(BACK) * 256w0x1000000010000000000000000000000000000000000000000)
#define NOT_OWN_SPAN(HALF) ((HALF)[191:160] - 32w1 >= 32w0x80000000)

struct headers_t {
    net_t      net;
    event_t    event;
    copy_windows_t windows;
    /* never valid (above) */
#ifndef FIXED
    prev_spec_t   prev;
#endif
    scratch_t     scratch;
#ifdef BATCHES
    batch_t    batch;
    event_t[MAX_BATCH]   events;          /* a batch's events, in frame order */
    windows_t[MAX_BATCH] events_windows;  /* on a copy: events_windows[i] follows events[i] */
#endif
#ifdef CEP
    cep_t cep;
    complex_event_t[4] cep_events;        /* one per pattern slot (CEP_PATTERNS) */
#endif
}

/* The parallelism of the event's stream, as action data of operator_count.
 * (Whether its windows start at events is hdr.spec.kind: a field of its
 * own here would be reset on every frame.) */
struct window_params_t {
#ifndef FIXED
    bit<32> n_ops;         /* N, the number of operators of the stream */
    bit<1>  by_key;        /* 1: split by key (split_by_key), 0: by windows */
#endif
    bit<32> opset;         /* the operator set: unicast, multicast, operator_position and operator_back key on it */
}

/* N, and whether the stream is split by key.  The build without changes
 * keeps both in one field of hdr.scratch, N with BY_KEY_N or'd in split
 * by key: operator_count's action writes it on every event, and only the
 * copy that unicast sends reads it in egress (its own packet, with its
 * hdr.scratch), so it needs no metadata field, which every frame pays to
 * reset (rule 4), and set_operator_count clears no flag.  N_UNSPLIT is
 * the field as it is, N where the stream is not split by key: the
 * multicast path, and the tests that also ask SPLIT_BY_KEY.  Elsewhere a
 * replica's egress reads N, and they stay in meta.win.  Inside the tracker
 * (slides.p4) they are its parameters win and s.  COPY_STRIDE is the
 * stride of the windows in a copy's Windows header: N, or 1 split by key. */
#ifdef FIXED
#define BY_KEY_N 32w0x80000000
#define N_OPS_OF(WIN, S) ((S).n_operators & 32w0x7FFFFFFF)
#define SPLIT_BY_KEY_OF(WIN, S) ((S).n_operators >= BY_KEY_N)
#define N_UNSPLIT hdr.scratch.n_operators
#else
#define N_OPS_OF(WIN, S) (WIN).n_ops
#define SPLIT_BY_KEY_OF(WIN, S) ((WIN).by_key == 1)
#define N_UNSPLIT meta.win.n_ops
#endif
#define N_OPS N_OPS_OF(meta.win, hdr.scratch)
#define COPY_STRIDE (SPLIT_BY_KEY ? 32w1 : N_UNSPLIT)

/* A drop, by the slide tracker (slides.p4, eventstarts.p4).  In the build
 * without changes a count of 0 is what tells ingress that an event goes
 * nowhere, in one test (forwarding.p4), so a drop zeroes it too; the
 * tracker writes the count before any test that drops. */
#ifdef FIXED
#define DROP_AS(CODE) verdict.drop_code = CODE; verdict.active = 0;
#else
#define DROP_AS(CODE) verdict.drop_code = CODE;
#endif
#define SPLIT_BY_KEY SPLIT_BY_KEY_OF(meta.win, hdr.scratch)

/* N of the epoch before the one in force (previous_spec's action data; the
 * rest of it is prev_spec_t): the egress needs it. */
struct prev_params_t {
    bit<32> n_ops;
}
/* The previous epoch as the slide tracker takes it: the fixed build
 * (splitter_fixed.p4) has none, nor the header that would hold its spec,
 * which bmv2 would mark invalid on every packet and every copy. */
#ifdef FIXED
#define PREVIOUS_EPOCH
#else
#define PREVIOUS_EPOCH hdr.prev, meta.prev.n_ops, meta.epoch,
#endif

/* What the slide tracker decides for one event.  The tracker reads the
 * newest window's operator and id into newest_op and window and moves them
 * there, so the verdict is made in place, without a copy. */
struct verdict_t {
    bit<32> drop_code;     /* DROP_NONE or why the event reaches no operator */
    bit<32> newest_op;     /* w: operator of the newest window holding the event */
    bit<32> active;        /* c: number of windows holding the event (clamped to N later) */
#ifdef EGRESS_DECIDES
    bit<64> window;        /* global id of the newest window holding the event (VERDICT_WINDOW) */
#endif
#ifndef FIXED
    bit<32> old_newest;    /* during a transition: the same for the previous epoch's windows */
    bit<32> old_active;    /*   (0: none of them holds the event) */
    bit<64> old_window;    /* ... and of the previous epoch's newest holding it */
#endif
}

/* Which configuration serves the event (BoundaryCheck, epochs.p4). */
struct epoch_t {
#ifndef FIXED
    bit<1> bank;           /* the bank whose window_spec/operator_count/unicast/multicast apply */
    bit<1> switching;      /* this event crosses an armed change's boundary */
    bit<32> number;        /* the epoch that serves the event (its low bit is the bank) */
#endif
}

/* What every copy needs for its Windows header where egress writes it
 * (EGRESS_DECIDES): the window counts before forwarding clamps them to N
 * (the operator's positions are hdr.scratch's), and the copy's instance
 * for its counters.  Elsewhere the header itself carries the count of the
 * epoch in force from ingress (COPY_WINDOWS, forwarding.p4), and only the
 * previous epoch's stays metadata. */
struct copy_meta_t {
#ifdef EGRESS_DECIDES
    bit<32> active;
#endif
#ifndef FIXED
    bit<32> old_active;
#endif
#ifdef EGRESS_DECIDES
    bit<32> instance;      /* egress: the copy's operator instance (egress_rewrite's action data) */
#endif
}

/* The slide tracker's values that start at 0 (slides.p4), as bmv2 gives
 * every metadata field: so they cost no write unless they change.  Whether
 * the event is late is a bit of hdr.scratch.kind (KIND_LATE) instead. */
struct tracker_flags_t {
#ifndef FIXED
    bit<1>  old_only;      /* only the previous epoch's windows hold the event */
#endif
}

#ifdef BATCHES
/* What ingress decides for one event of a batch, and egress needs for its
 * Windows header (testbed.dataplane.model.metadata.CopyMeta). */
struct batched_event_t {
    bit<1>  assigned;    /* 1: the event has windows (counted in stream_in) */
    bit<1>  by_key;      /* its stream is split by key */
    bit<32> newest;      /* the verdict's newest_op, active, ... */
    bit<32> active;
    bit<32> old_newest;
    bit<32> old_active;
    bit<64> window;
    bit<64> old_window;
    bit<32> epoch;       /* the epoch that served it */
    bit<32> n_ops;       /* N of that epoch */
    bit<32> old_n_ops;   /* N of the epoch before, when old windows hold the event */
    bit<32> key_op;      /* split by key: the key's operator */
}

/* The same, packed into one field (batches.p4, PACK and UNPACK): bmv2
 * zeroes every metadata field of every packet it receives, batched or not,
 * so sixteen records must cost sixteen fields, not 192. */
typedef bit<386> event_record_t;

/* Windows lo .. hi (global ids) of one epoch, the newest on operator hi_op:
 * the range that covers a batch's windows (testbed.dataplane.model.batches.WindowRange). */
struct window_range_t {
    bit<1>  valid;
    bit<64> lo;
    bit<64> hi;
    bit<32> hi_op;
    bit<32> n_ops;
}

struct batch_meta_t {
    bit<16> to_parse;      /* parser: events still to extract */
    bit<32> count;         /* events of the batch (0: not a well-formed batch) */
    @field_list(BATCH_FIELDS) bit<8> at;            /* the event this pass takes */
    @field_list(BATCH_FIELDS) bit<1> any_assigned;  /* some event so far has windows */
    bit<32> final_epoch;   /* the stream's epoch after the batch */
    bit<1>  whole;         /* the first pass took the whole batch: every event has e0's record */
    bit<16> kept;          /* egress: events this copy carries */
    /* The drop counter's index for an event left unrouted (stream *
     * DROP_SLOTS + DROP_UNKNOWN_STREAM), which the unrolled steps share.  The
     * parser sets it: p4c would fold an ingress assignment into each use and
     * give every one a temporary of its own. */
    bit<32> unrouted;
    window_range_t cover;      /* windows of the final epoch */
    window_range_t old_cover;  /* windows of the epoch before it */
    /* Each event's record, kept across the batch's resubmissions. */
    @field_list(BATCH_FIELDS) event_record_t e0;  @field_list(BATCH_FIELDS) event_record_t e1;
    @field_list(BATCH_FIELDS) event_record_t e2;  @field_list(BATCH_FIELDS) event_record_t e3;
    @field_list(BATCH_FIELDS) event_record_t e4;  @field_list(BATCH_FIELDS) event_record_t e5;
    @field_list(BATCH_FIELDS) event_record_t e6;  @field_list(BATCH_FIELDS) event_record_t e7;
    @field_list(BATCH_FIELDS) event_record_t e8;  @field_list(BATCH_FIELDS) event_record_t e9;
    @field_list(BATCH_FIELDS) event_record_t e10; @field_list(BATCH_FIELDS) event_record_t e11;
    @field_list(BATCH_FIELDS) event_record_t e12; @field_list(BATCH_FIELDS) event_record_t e13;
    @field_list(BATCH_FIELDS) event_record_t e14; @field_list(BATCH_FIELDS) event_record_t e15;
}
#endif

#ifdef CEP
/* The CEP stage's working fields (cep.p4), shared by its unrolled steps,
 * and what the clone for the sinks keeps: which pattern slots matched and
 * each match's id, number and return value. */
struct cep_meta_t {
    bit<8>  size;
    bit<16> stream;
    bit<8>  wfield;
    bit<64> raw;
    bit<64> x;
    bit<64> old;
    bit<8>  head;
    bit<8>  count;
    bit<64> sum;
    bit<64> least;
    bit<64> most;
    bit<8>  passing;
    bit<8>  op;
    bit<64> constant;
    bit<32> cell;
    bit<1>  on;
    bit<8>  operand;
    bit<32> wi;          /* the window slot an operand reads */
    bit<1>  is_signed;
    bit<8>  symbol;
    bit<8>  state;
    bit<8>  next;
    bit<1>  emit;
    bit<8>  mine;
    @field_list(CEP_FIELDS) bit<8>  matched;
    @field_list(CEP_FIELDS) bit<16> id_0;
    @field_list(CEP_FIELDS) bit<16> id_1;
    @field_list(CEP_FIELDS) bit<16> id_2;
    @field_list(CEP_FIELDS) bit<16> id_3;
    @field_list(CEP_FIELDS) bit<32> match_0;
    @field_list(CEP_FIELDS) bit<32> match_1;
    @field_list(CEP_FIELDS) bit<32> match_2;
    @field_list(CEP_FIELDS) bit<32> match_3;
    @field_list(CEP_FIELDS) bit<64> value_0;
    @field_list(CEP_FIELDS) bit<64> value_1;
    @field_list(CEP_FIELDS) bit<64> value_2;
    @field_list(CEP_FIELDS) bit<64> value_3;
}
#endif

/* The event's stream, every stream table's key: a field of its own only in
 * the batch build, where a pass's event is not the frame's event header;
 * elsewhere the header's field itself (each field of metadata costs its
 * reset per packet and its copy per replica). */
#ifdef BATCHES
#define STREAM_KEY meta.stream
#else
#define STREAM_KEY hdr.event.stream
#endif

/* What every copy of a single event has in common: its Windows header
 * (zeroed by setValid, its halves written per copy in egress.p4), the flag
 * that says it follows, the lengths grown by it, and the UDP checksum
 * switched off (0): it covers the destination IP, which egress rewrites
 * (rewrite_dst), and is not recomputed.  The IPv4 checksum is, in
 * MyComputeChecksum.  Made in ingress, a
 * multicast copies it into every replica for less than writing it there
 * again (EGRESS_DECIDES above). */
#define WINDOWS_HEADER_ON                                                      \
    hdr.windows.setValid();                                                   \
    hdr.event.flags = hdr.event.flags | FLAG_WINDOWS;                         \
    hdr.net.ip_head = hdr.net.ip_head + IP_TOTAL_LEN_UNIT * (bit<80>)WINDOWS_HEADER_BYTES; \
    hdr.net.udp = (hdr.net.udp & UDP_NO_CHECKSUM) + UDP_LENGTH_UNIT * (bit<64>)WINDOWS_HEADER_BYTES;

/* The id of the newest window that holds the event, which the trackers
 * read from newest_window and move: a replica's egress reads it where
 * egress writes the Windows header (EGRESS_DECIDES), so it is metadata
 * there; elsewhere ingress writes it into the header once per event, and
 * it is a working value of hdr.scratch, which no packet resets or copies
 * (rule 4, docs/p4.md).  VERDICT_WINDOW names it inside the trackers
 * (their parameters verdict and s), NEWEST_WINDOW outside. */
#ifdef EGRESS_DECIDES
#define VERDICT_WINDOW verdict.window
#define NEWEST_WINDOW meta.verdict.window
#else
#define VERDICT_WINDOW s.window
#define NEWEST_WINDOW hdr.scratch.window
#endif

/* The bank that window_spec and operator_count key on: BoundaryCheck's, or
 * in the fixed build a field that is never written, so bank 0 throughout,
 * without a metadata field to reset per packet. */
#ifdef FIXED
#define BANK_KEY hdr.scratch.bank
#else
#define BANK_KEY meta.epoch.bank
#endif

struct metadata_t {
#ifdef BATCHES
    bit<16>         stream;   /* the event's stream: every table's key */
#endif
#ifdef CEP
    cep_meta_t      cep;
#endif
#ifdef BATCHES
    batch_meta_t    batch;
#endif
    window_params_t win;
#ifndef FIXED
    prev_params_t   prev;
#endif
    epoch_t         epoch;
    verdict_t       verdict;
    copy_meta_t     copy;
    tracker_flags_t flags;
}

#endif
