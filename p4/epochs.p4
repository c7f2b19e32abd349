/*
 * Which configuration serves an event.
 *
 * Each stream has two banks of configuration (window_spec, operator_count,
 * unicast, multicast are keyed by bank).  The control plane installs a
 * change in the bank not in force and sets `armed`; the first in-order event
 * that reaches the slide after the newest one flips the bank, so the change
 * takes effect exactly at a window boundary whatever the traffic does
 * (docs/windows.md, "Reconfiguration"; docs/p4.md).  This runs before the
 * configuration is looked up, so it reads the window kind from the register
 * the stream's first event set rather than from window_spec.
 *
 * testbed/dataplane/model.py (SplitterPipeline._at_boundary) is the same test.
 */
#ifndef SPLITTER_EPOCHS_P4
#define SPLITTER_EPOCHS_P4

control BoundaryCheck(in event_t event, in bit<32> idx, out epoch_t sel) {
    apply {
        bit<1>  is_armed;
        bit<1>  is_time;
        epoch.read(sel.number, idx);
        armed.read(is_armed, idx);
        initialized.read(sel.initialized, idx);
        in_transition.read(sel.in_transition, idx);
        time_axis.read(is_time, idx);

        sel.switching = 0;
        if (is_armed == 1 && sel.initialized == 1 && sel.in_transition == 0) {
            bit<64> next;
            bit<64> newest;   /* the stream's newest position: its event count or timestamp */
            next_start.read(next, idx);
            if (is_time == 0) {
                event_count.read(newest, idx);
                if (newest >= next) {
                    sel.switching = 1;
                }
            } else {
                last_ts.read(newest, idx);
                if (event.ts >= newest && event.ts >= next) {
                    sel.switching = 1;
                }
            }
        }
        sel.number = sel.number + (bit<32>)sel.switching;
        sel.bank = (bit<1>)sel.number;
    }
}

#endif
