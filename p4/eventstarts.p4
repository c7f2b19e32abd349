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
 * newest_window in SlideTracker before this runs; this takes the values the
 * tracker read (s: the newest start, operator, begun and window) and
 * advances them in place.
 *
 * testbed/dataplane/model/slides.py (SlideTracker._track_event_starts) is
 * the same algorithm in Python.
 */
#ifndef SPLITTER_EVENTSTARTS_P4
#define SPLITTER_EVENTSTARTS_P4

/* Adds one to ACTIVE if the window at START, the I-th newest, has begun and
 * has not ended at x. */
#define HOLDS(I, START)                                      \
    if (s.begun_now > I && s.x - START < s.size) {         \
        s.active = s.active + 1;                             \
    }

control EventStartTracker(in bit<16> idx, in window_params_t win,
                          inout scratch_t s, inout verdict_t verdict) {
    apply {
        start_back1.read(s.back1, idx);
        start_back2.read(s.back2, idx);
        start_back3.read(s.back3, idx);

        if (s.x < s.start) {
            DROP_AS(DROP_BEFORE_ORIGIN)
        } else {
            if (s.x - s.start >= s.slide) {
                /* the event opens a window at its own timestamp; the
                 * starts of the older ones move back one register */
                s.back3 = s.back2;
                s.back2 = s.back1;
                s.back1 = s.start;
                start_back3.write(idx, s.back3);
                start_back2.write(idx, s.back2);
                start_back1.write(idx, s.back1);
                s.start = s.x;
                /* the next start in each branch, not in the write: an
                 * expression there is a temporary of p4c's, in metadata
                 * that every packet pays to reset (docs/p4.md, rule 5) */
                if (verdict.newest_op + 1 >= N_OPS_OF(win, s)) {
                    verdict.newest_op = 0;
                    s.next = s.x + s.slide;
                } else {
                    verdict.newest_op = verdict.newest_op + 1;
                    s.next = s.x + s.slide;
                }
                if (s.begun_now < s.cap) {
                    s.begun_now = s.begun_now + 1;
                }
                VERDICT_WINDOW = VERDICT_WINDOW + 1;
                slide_start.write(idx, s.start);
                newest_op.write(idx, verdict.newest_op);
                begun.write(idx, s.begun_now);
                next_start.write(idx, s.next);
                newest_window.write(idx, VERDICT_WINDOW);
            }
            s.active = 0;
            HOLDS(0, s.start)
            HOLDS(1, s.back1)
            HOLDS(2, s.back2)
            HOLDS(3, s.back3)
            if (s.active == 0) {
                verdict.drop_code = DROP_NO_WINDOW;
            }
            verdict.active = s.active;
        }
    }
}

#endif
