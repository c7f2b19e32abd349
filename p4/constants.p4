/*
 * Named constants of the splitter program.
 *
 * The values are shared with the Python side: testbed/dataplane/wire.py (the
 * event UDP port) and testbed/dataplane/contract.py (N_STREAMS, N_PORTS,
 * DROP_SLOTS and DROP_CODES).  tests/integration/test_bmv2.py checks that the compiled program agrees.
 */
#ifndef SPLITTER_CONSTANTS_P4
#define SPLITTER_CONSTANTS_P4

/* ---- wire format ------------------------------------------------------ */
/* What the parser selects on, as values and masks of the joined fields
 * (headers.p4) */
const bit<64> ETHERTYPE_IPV4      = 0x0800;          /* the EtherType, ... */
const bit<64> ETHERTYPE_MASK      = 0xFFFF;          /* ... after the source MAC */
const bit<16> IPV4_NO_OPTIONS     = 0x4500;          /* version 4, IHL 5: options are not parsed */
const bit<16> IPV4_NO_OPTIONS_MASK = 0xFF00;         /* (not DSCP and ECN) */
const bit<48> IPV4_WHOLE_UDP      = 0x000000000011;  /* protocol 17 (UDP), more fragments 0, offset 0: */
const bit<48> IPV4_WHOLE_UDP_MASK = 0x00003FFF00FF;  /* a whole datagram (not the id, DF or TTL) */
const bit<32> UDP_DST_PORT_MASK   = 0xFFFF;          /* the destination port, after the source */
const bit<16> EVENT_UDP_PORT = 50000;    /* UDP destination port that marks an event */
const bit<16> BATCH_UDP_PORT = 50002;    /* UDP destination port that marks a batch of events */
const bit<16> HEARTBEAT_UDP_PORT = 50001; /* an operator host's heartbeat: counted per port, dropped */
const bit<16> FLAG_WINDOWS = 0x0001;     /* event.flags of a copy: a windows header follows */
const bit<16> WINDOWS_HEADER_BYTES = 32; /* what a copy grows by (IPv4 and UDP lengths) */

/* A batch carries 1 .. MAX_BATCH events (testbed.semantics.limits.MAX_BATCH);
 * ingress and egress unroll their per-event steps that many times. */
#define MAX_BATCH 16
/* The metadata that a batch's resubmissions keep (@field_list). */
#define BATCH_FIELDS 1
const bit<16> BATCH_HEADER_BYTES = 4;
const bit<16> ETHERNET_HEADER_BYTES = 14;
const bit<16> IPV4_HEADER_BYTES = 20;
const bit<16> UDP_HEADER_BYTES = 8;
const bit<16> EVENT_BYTES = 32;

#ifdef CEP
/* ---- the CEP stage (cep.p4, testbed.semantics.cep) ---------------------- */
const bit<16> CEP_UDP_PORT = 50003;      /* complex event frames to a sink */
const bit<16> CEP_HEADER_BYTES = 4;
const bit<16> COMPLEX_EVENT_BYTES = 32;
const bit<32> CEP_WINDOWS = 4;           /* window operator slots */
const bit<32> CEP_DEPTH = 32;            /* values a window holds at most */
const bit<32> CEP_RING_CELLS = 128;      /* CEP_WINDOWS * CEP_DEPTH */
const bit<32> CEP_PATTERNS = 4;          /* pattern slots */
const bit<32> CEP_COMPARISONS = 8;       /* comparisons per pattern: the symbol's bits */
const bit<32> CEP_COMPARISON_CELLS = 32; /* CEP_PATTERNS * CEP_COMPARISONS */
const int CEP_TRANSITION_TABLE_SIZE = 8192;  /* states (32) x symbols (256) per pattern */
const bit<32> CEP_SESSION = 250;         /* the mirror session that clones to the sinks' group */
/* The metadata an I2E clone for the sinks keeps (@field_list). */
#define CEP_FIELDS 2
const bit<32> INSTANCE_INGRESS_CLONE = 1;    /* standard_metadata.instance_type of an I2E clone */
const bit<64> CEP_SIGN = 0x8000000000000000; /* flips a signed value into unsigned order */
/* Which field a window holds (cep_window_field). */
const bit<8> CEP_FIELD_VALUE = 1;
const bit<8> CEP_FIELD_KEY   = 2;
const bit<8> CEP_FIELD_TS    = 3;
const bit<8> CEP_FIELD_SEQ   = 4;
/* What a comparison or a return value reads (cep_compare_operand, cep_return_operand). */
const bit<8> CEP_OPERAND_VALUE    = 1;
const bit<8> CEP_OPERAND_KEY      = 2;
const bit<8> CEP_OPERAND_TS       = 3;
const bit<8> CEP_OPERAND_SEQ      = 4;
const bit<8> CEP_OPERAND_SUM      = 5;
const bit<8> CEP_OPERAND_MIN      = 6;
const bit<8> CEP_OPERAND_MAX      = 7;
const bit<8> CEP_OPERAND_COUNT    = 8;
const bit<8> CEP_OPERAND_COUNT_IF = 9;
/* Comparison operators (cep_compare_op, cep_window_test). */
const bit<8> CEP_OP_LT = 1;
const bit<8> CEP_OP_LE = 2;
const bit<8> CEP_OP_EQ = 3;
const bit<8> CEP_OP_NE = 4;
const bit<8> CEP_OP_GE = 5;
const bit<8> CEP_OP_GT = 6;
#endif

/* ---- sizes -------------------------------------------------------------- */
/* Registers and per-stream counters are indexed by the 16-bit stream id. */
const bit<32> N_STREAMS = 65536;
/* bmv2's default port space. */
const bit<32> N_PORTS = 512;
/* Operator instances are 16-bit ids: a host's port, or a shared host's
 * instance (testbed.semantics.instances); operator_out is indexed by them. */
const bit<32> N_INSTANCES = 65536;
/* stream_drops index = stream * DROP_SLOTS + drop code. */
const bit<32> DROP_SLOTS = 8;
const bit<32> DROP_COUNTER_SIZE = 524288;  /* N_STREAMS * DROP_SLOTS */

/* Table capacities (exact-match entries). */
const int STREAM_TABLE_SIZE    = 131072; /* window_spec, operator_count: one per stream and bank */
const int PREVIOUS_TABLE_SIZE  = 65536;  /* previous_spec: one per stream */
/* Keyed by operator set, which streams with the same operators share
 * (issue 43): bmv2 allocates an exact-match table's entries as they are
 * added, not up front. */
const int UNICAST_TABLE_SIZE   = 262144; /* N per operator set */
const int MULTICAST_TABLE_SIZE = 262144; /* fewer than 3N per operator set (docs/windows.md) */
const int TRANSITION_TABLE_SIZE = 65536; /* per changing stream: N_old * old windows * (new (w, c) pairs + 1) */
const int EGRESS_TABLE_SIZE    = 65536;  /* one per operator instance */
const int POSITION_TABLE_SIZE  = 262144; /* operator_position: N per operator set; previous_position: N per changing stream */
const int BACK_TABLE_SIZE      = 1048576; /* operator_back: N times the most windows of an event, per operator set */

/* ---- drop codes (testbed.dataplane.contract.DROP_CODES) ----------------- */
const bit<32> DROP_NONE           = 0;
const bit<32> DROP_NO_WINDOW      = 1;  /* falls in a gap between windows (size < slide) */
const bit<32> DROP_BEFORE_ORIGIN  = 2;  /* time window: timestamp before the origin */
const bit<32> DROP_TOO_LATE       = 3;  /* time window: more than the lateness behind the newest ts */
const bit<32> DROP_UNKNOWN_STREAM = 4;  /* no window_spec/operator_count/unicast/multicast entry */

/* ---- late events ------------------------------------------------------- */
/* A late event lies at most this many slides before the newest one
 * (testbed.semantics.windows.MAX_LATE_SLIDES): the slide tracker unrolls as
 * many compare-and-subtract steps to find its slide. */
#define LATE_STEPS 4

/* ---- window kinds (set by the window_spec actions) ---------------------- */
const bit<8> WINDOW_COUNT = 0;
const bit<8> WINDOW_TIME  = 1;
const bit<8> WINDOW_TIME_EVENT_STARTS = 2;   /* time windows that start at events (eventstarts.p4) */
/* Or'd into the kind by the slide tracker: a time event behind the newest
 * timestamp, within the lateness.  Only a time stream with lateness has it,
 * so the tests of the kind against WINDOW_COUNT and
 * WINDOW_TIME_EVENT_STARTS need not mask it. */
const bit<8> KIND_LATE = 4;

#endif
