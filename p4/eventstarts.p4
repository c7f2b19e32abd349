/*
 * Windows that start at events (docs/windows.md, "Where windows start";
 * S4's rule, `starts: event`): a time stream's next window opens at the
 * first in-order event at or past the newest start + slide, at that event's
 * timestamp.  Window ids, the round robin and begun then advance by one,
 * however long the gap before the event was: no division is ever needed.
 *
 * The starts are no grid, so the windows still open are found from their
 * own starts: slide_start holds the newest one and start_back1..3 the three
 * before it (MAX_EVENT_WINDOWS = 4 in testbed.semantics.windows; validation
 * refuses specs with more windows per event).  Every window lasts `size`
 * and the starts grow, so an older window holds x only if each newer one
 * does: the count of those that hold x is the verdict's c.
 *
 * Such a stream takes no lateness and no change (validation refuses both),
 * so this path has no late walk back and no transition.  The stream's first
 * event has set slide_start (the origin), newest_op, begun and
 * newest_window in SlideTracker before this runs.
 *
 * testbed/dataplane/model/slides.py (SlideTracker._track_event_starts) is
 * the same algorithm in Python.
 */
#ifndef SPLITTER_EVENTSTARTS_P4
#define SPLITTER_EVENTSTARTS_P4

/* Adds one to ACTIVE if the window at START, the I-th newest, has begun and
 * has not ended at x. */
#define HOLDS(I, START)                                      \
    if (begun_now > I && x - START < win.size) {             \
        active = active + 1;                                 \
    }

control EventStartTracker(in bit<64> x, in bit<32> idx, in window_params_t win,
                          in bit<64> start_in, in bit<32> newest_in, in bit<32> begun_in,
                          in bit<64> window_in, inout verdict_t verdict) {
    apply {
        bit<64> start = start_in;
        bit<32> newest = newest_in;
        bit<32> begun_now = begun_in;
        bit<64> window = window_in;
        bit<64> back1;
        bit<64> back2;
        bit<64> back3;
        start_back1.read(back1, idx);
        start_back2.read(back2, idx);
        start_back3.read(back3, idx);

        if (x < start) {
            verdict.drop_code = DROP_BEFORE_ORIGIN;
        } else {
            if (x - start >= win.slide) {
                /* the event opens a window at its own timestamp; the
                 * starts of the older ones move back one register */
                back3 = back2;
                back2 = back1;
                back1 = start;
                start_back3.write(idx, back3);
                start_back2.write(idx, back2);
                start_back1.write(idx, back1);
                start = x;
                if (newest + 1 >= win.n_ops) {
                    newest = 0;
                } else {
                    newest = newest + 1;
                }
                if (begun_now < win.cap) {
                    begun_now = begun_now + 1;
                }
                window = window + 1;
                slide_start.write(idx, start);
                newest_op.write(idx, newest);
                begun.write(idx, begun_now);
                next_start.write(idx, start + win.slide);
                newest_window.write(idx, window);
            }
            bit<32> active = 0;
            HOLDS(0, start)
            HOLDS(1, back1)
            HOLDS(2, back2)
            HOLDS(3, back3)
            if (active == 0) {
                verdict.drop_code = DROP_NO_WINDOW;
            }
            verdict.newest_op = newest;
            verdict.active = active;
            verdict.window = window;
        }
    }
}

#endif
