/*
 * Per-stream state: every register of the splitter, indexed by stream id.
 *
 * They are declared at the top level because two controls share them: the
 * boundary check (epochs.p4) reads them before the stream's configuration is
 * looked up, to decide which bank serves the event, and the slide tracker
 * (slides.p4) reads and writes them.  testbed.dataplane.contract.REGISTERS
 * lists them with their widths.
 */
#ifndef SPLITTER_STATE_P4
#define SPLITTER_STATE_P4

/* ---- window state (S4 keeps the same, per stream) ---------------------- */
register<bit<1>, bit<16>>(N_STREAMS)  initialized;
register<bit<64>, bit<16>>(N_STREAMS) event_count;  /* count windows: arrival index of the next event */
register<bit<64>, bit<16>>(N_STREAMS) last_ts;      /* time windows: newest accepted timestamp */
register<bit<64>, bit<16>>(N_STREAMS) slide_start;  /* axis coordinate where the newest slide starts */
register<bit<32>, bit<16>>(N_STREAMS) newest_op;    /* operator of the newest window (q mod N) */
register<bit<32>, bit<16>>(N_STREAMS) begun;        /* windows begun in the epoch, saturating at cap */
register<bit<64>, bit<16>>(N_STREAMS) newest_window;/* global id of the newest window (at slide_start) */

#ifdef FIXED
/* ---- count windows in the build without changes (counts.p4): the events
 * of the newest slide so far [39:0] and the newest window's operator
 * [63:40]; newest_window above holds the newest window's id ----------- */
register<bit<64>, bit<16>>(N_STREAMS) count_state;
#endif

/* ---- windows that start at events (eventstarts.p4) --------------------- */
register<bit<64>, bit<16>>(N_STREAMS) start_back1;  /* start of the window before the newest */
register<bit<64>, bit<16>>(N_STREAMS) start_back2;  /* ... and of the one before that */
register<bit<64>, bit<16>>(N_STREAMS) start_back3;  /* ... and of the one before that */

/* ---- reconfiguration at run time --------------------------------------- */
register<bit<64>, bit<16>>(N_STREAMS) next_start;   /* where the slide after the newest starts */
register<bit<1>, bit<16>>(N_STREAMS)  time_axis;    /* set by the first event: 1 for time windows */
register<bit<32>, bit<16>>(N_STREAMS) epoch;        /* epochs begun after the first; low bit = bank in force */
register<bit<1>, bit<16>>(N_STREAMS)  armed;        /* written by the control plane: flip at the next boundary */
register<bit<1>, bit<16>>(N_STREAMS)  in_transition;/* the previous epoch's windows may hold events */
register<bit<64>, bit<16>>(N_STREAMS) boundary;     /* where the epoch in force began */
register<bit<64>, bit<16>>(N_STREAMS) transition_end; /* in-order coordinate that ends the transition */
register<bit<64>, bit<16>>(N_STREAMS) old_start;    /* the previous epoch's newest slide, frozen */
register<bit<32>, bit<16>>(N_STREAMS) old_newest;   /* ... its newest window's operator */
register<bit<32>, bit<16>>(N_STREAMS) old_begun;    /* ... and how many of its windows had begun */
register<bit<64>, bit<16>>(N_STREAMS) old_window;   /* ... and its newest window's global id */

#endif
