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

/* Not in the fixed build (splitter_fixed.p4), where nothing is armed. */
#ifndef FIXED
control BoundaryCheck(in event_t event, in bit<16> idx, inout epoch_t sel, inout scratch_t s) {
    apply {
        /* Read before the stream's configuration is known, so only what
         * every event needs: time_axis and the positions only when a change
         * is armed.  switching and the epoch's increment are written only
         * when the event switches: bmv2 zeroes all metadata per packet, and
         * every write costs as much as a field's reset (docs/p4.md, "What an
         * event costs"). */
        epoch.read(sel.number, idx);
        armed.read(s.is_armed, idx);
        initialized.read(s.initialized, idx);
        in_transition.read(s.in_transition, idx);
        /* here, with the reads, and again where the epoch moves on: straight-
         * line code after the test below would be one more table of p4c's */
        sel.bank = (bit<1>)sel.number;

        if (s.is_armed == 1 && s.initialized == 1 && s.in_transition == 0) {
            time_axis.read(s.is_time, idx);
            next_start.read(s.next, idx);
            if (s.is_time == 0) {
                event_count.read(s.newest_pos, idx);
                if (s.newest_pos >= s.next) {
                    sel.switching = 1;
                    sel.number = sel.number + 1;
                    sel.bank = (bit<1>)sel.number;
                }
            } else {
                last_ts.read(s.newest_pos, idx);
                if (event.ts >= s.newest_pos && event.ts >= s.next) {
                    sel.switching = 1;
                    sel.number = sel.number + 1;
                    sel.bank = (bit<1>)sel.number;
                }
            }
        }
    }
}

#endif  /* FIXED */

#endif
