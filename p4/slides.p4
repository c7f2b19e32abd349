/*
 * The slide tracker: per-stream window state and the (w, c) decision.
 *
 * Count and time windows share one axis (docs/windows.md): the coordinate
 * x of an event is its arrival index k (count windows) or its timestamp t
 * (time windows, with the slide grid anchored at the origin).  Window j
 * covers [start0 + j*slide, start0 + j*slide + size).  Per stream the
 * tracker keeps the start of the newest slide, the operator w of the
 * newest window and how many windows have begun (saturating at cap).  An
 * event at offset p inside its slide lies in
 *
 *     c = min(begun, full + (p < extra ? 1 : 0))
 *
 * windows, whose operators are the c operators that end at w round robin.
 *
 * v1model has no run-time division, so when an event lands two or more
 * slides past the newest one (a gap in time), the number of slides it
 * advanced and the new offset come from a 64-step shift-and-subtract
 * division; likewise "advanced mod N", only when advanced >= N.  The
 * common cases (same slide, next slide) use one comparison each.
 *
 * A change armed by the control plane (epochs.p4) begins a new epoch at the
 * boundary: the old epoch's newest slide is frozen in old_start/old_newest/
 * old_begun, and until the transition ends an event also lies in the old
 * epoch's last windows (verdict.old_newest, old_active).
 *
 * A late time event (behind the newest timestamp by at most the stream's
 * lateness) advances nothing: it lies in the newest slide or at most
 * LATE_STEPS slides before it, found by as many compare-and-subtract steps,
 * and goes to the windows of that slide.  In-order events never take that
 * path, so their cost is unchanged.
 *
 * testbed/dataplane/model.py (SplitterPipeline.ingress) is the same algorithm in
 * Python; the two must agree on every register write and every decision.
 */
#ifndef SPLITTER_SLIDES_P4
#define SPLITTER_SLIDES_P4

/* One step of restoring division: does divisor * 2^I still fit into the
 * rest?  (rest >> I) >= divisor tests rest >= divisor << I without the
 * left shift overflowing 64 bits. */
#define DIV_STEP(I)                                          \
    if ((remainder >> I) >= divisor) {                       \
        remainder = remainder - (divisor << I);              \
        quotient = quotient | ((bit<64>)1 << I);             \
    }

/* 64-bit unsigned quotient and remainder, dividend / divisor, by shifting
 * and subtracting (testbed.dataplane.model.shift_subtract_divmod). */
control ShiftSubtractDivide(in bit<64> dividend, in bit<64> divisor,
                            out bit<64> quotient, out bit<64> remainder) {
    apply {
        quotient = 0;
        remainder = dividend;
        DIV_STEP(63) DIV_STEP(62) DIV_STEP(61) DIV_STEP(60)
        DIV_STEP(59) DIV_STEP(58) DIV_STEP(57) DIV_STEP(56)
        DIV_STEP(55) DIV_STEP(54) DIV_STEP(53) DIV_STEP(52)
        DIV_STEP(51) DIV_STEP(50) DIV_STEP(49) DIV_STEP(48)
        DIV_STEP(47) DIV_STEP(46) DIV_STEP(45) DIV_STEP(44)
        DIV_STEP(43) DIV_STEP(42) DIV_STEP(41) DIV_STEP(40)
        DIV_STEP(39) DIV_STEP(38) DIV_STEP(37) DIV_STEP(36)
        DIV_STEP(35) DIV_STEP(34) DIV_STEP(33) DIV_STEP(32)
        DIV_STEP(31) DIV_STEP(30) DIV_STEP(29) DIV_STEP(28)
        DIV_STEP(27) DIV_STEP(26) DIV_STEP(25) DIV_STEP(24)
        DIV_STEP(23) DIV_STEP(22) DIV_STEP(21) DIV_STEP(20)
        DIV_STEP(19) DIV_STEP(18) DIV_STEP(17) DIV_STEP(16)
        DIV_STEP(15) DIV_STEP(14) DIV_STEP(13) DIV_STEP(12)
        DIV_STEP(11) DIV_STEP(10) DIV_STEP(9)  DIV_STEP(8)
        DIV_STEP(7)  DIV_STEP(6)  DIV_STEP(5)  DIV_STEP(4)
        DIV_STEP(3)  DIV_STEP(2)  DIV_STEP(1)  DIV_STEP(0)
    }
}

/* One step back from a slide to the one before it, for a late event:
 * its START, its NEWEST operator (round robin, backwards) and, counted in
 * back, one slide fewer begun.  SLIDE and N_OPS are the epoch's own.  The
 * variables are named by the caller, so the old epoch's walk needs no
 * copies of the new one's (every local is a field bmv2 resets per packet). */
#define STEP_BACK(START, NEWEST, SLIDE, N_OPS)               \
    if (x < START) {                                         \
        START = START - SLIDE;                               \
        back = back + 1;                                     \
        if (NEWEST == 0) {                                   \
            NEWEST = N_OPS - 1;                              \
        } else {                                             \
            NEWEST = NEWEST - 1;                             \
        }                                                    \
    }

/* Reads and advances the window state of one stream and fills the
 * verdict: a drop code, or (newest_op, active) for the epoch in force and,
 * during a transition, (old_newest, old_active) for the previous one.  The
 * registers are in state.p4. */
control SlideTracker(in event_t event, in bit<32> idx, in window_params_t win, in prev_params_t prev,
                     in epoch_t sel, inout verdict_t verdict) {
    ShiftSubtractDivide() slides_div;     /* offset / slide, after a gap in time */
    ShiftSubtractDivide() operators_div;  /* advanced mod N, when advanced >= N */
    ShiftSubtractDivide() old_div;        /* distance past the boundary / old slide */
    EventStartTracker() event_starts;     /* windows that start at events */

    apply {
        bit<64> x = 0;        /* the event's coordinate on the axis */
        bit<1>  late = 0;     /* behind the newest timestamp, within the lateness */
        bit<32> back = 0;     /* slides a late event lies behind the newest */
        bit<64> b;            /* the boundary where the epoch in force began */

        /* The verdict starts at 0, drop_code DROP_NONE among it: bmv2
         * zeroes all metadata when a packet (or a batch's next pass) enters
         * ingress, and the ingress applies this only while nothing has
         * set a drop code. */

        /* -- the coordinate; time windows also check the order ---------- */
        if (win.kind == WINDOW_COUNT) {
            event_count.read(x, idx);
            event_count.write(idx, x + 1);
        } else {
            bit<64> previous_ts;
            last_ts.read(previous_ts, idx);
            x = event.ts;
            if (sel.initialized == 1 && x < previous_ts) {
                if (previous_ts - x > win.lateness) {
                    verdict.drop_code = DROP_TOO_LATE;
                } else {
                    late = 1;
                }
            } else {
                last_ts.write(idx, x);
            }
        }

        if (verdict.drop_code == DROP_NONE) {
            /* -- current state; the first event of a stream sets it up --- */
            bit<64> start;
            bit<32> newest;
            bit<32> begun_now;
            bit<64> window;       /* global id of the newest window */
            if (sel.initialized == 0) {
                /* the first slide starts at the first event, or at the
                 * stream's fixed origin (time windows) */
                start = x;
                initialized.write(idx, 1);
                if (win.kind == WINDOW_COUNT) {
                    time_axis.write(idx, 0);
                } else {
                    time_axis.write(idx, 1);
                    if (win.fixed_origin != 0) {
                        start = win.origin;
                    }
                }
                slide_start.write(idx, start);
                newest_op.write(idx, 0);
                begun.write(idx, 1);
                next_start.write(idx, start + win.slide);
                newest_window.write(idx, 0);
                newest = 0;
                begun_now = 1;
                window = 0;
            } else {
                slide_start.read(start, idx);
                newest_op.read(newest, idx);
                begun.read(begun_now, idx);
                newest_window.read(window, idx);
            }

            /* -- windows that start at events: their own tracker, which
             *    has no late path and no transition (no lateness, no
             *    change) ---------------------------------------------- */
            if (win.event_starts == 1) {
                /* an else, not a return: p4c would make a return a flag
                 * field and a test of it before every later statement */
                event_starts.apply(x, idx, win, start, newest, begun_now, window, verdict);
            } else {
                /* -- an armed change takes effect: freeze the old epoch's newest
                 *    slide and begin the new one at the boundary -------------- */
                if (sel.switching == 1) {
                    next_start.read(b, idx);
                    old_start.write(idx, start);
                    old_newest.write(idx, newest);
                    old_begun.write(idx, begun_now);
                    old_window.write(idx, window);
                    boundary.write(idx, b);
                    transition_end.write(idx, b + prev.tail);
                    epoch.write(idx, sel.number);   /* the epoch after the stored one */
                    armed.write(idx, 0);
                    in_transition.write(idx, 1);
                    slide_start.write(idx, b);
                    newest_op.write(idx, 0);
                    begun.write(idx, 1);
                    next_start.write(idx, b + win.slide);
                    /* window ids go on across epochs */
                    window = window + 1;
                    newest_window.write(idx, window);
                    start = b;
                    newest = 0;
                    begun_now = 1;
                }

                /* -- the previous epoch's windows, during a transition -------- */
                bit<1> old_only = 0;
                /* sel itself, not a local copy: each local is a field to reset */
                if (sel.in_transition == 1 || sel.switching == 1) {
                    bit<32> obegun;
                    boundary.read(b, idx);
                    old_begun.read(obegun, idx);
                    if (x < b) {
                        /* a late event before the boundary: old windows only,
                         * back from the old epoch's frozen newest slide */
                        old_only = 1;
                        {
                            bit<64> start_o;
                            bit<32> newest_o;
                            old_start.read(start_o, idx);
                            old_newest.read(newest_o, idx);
                            STEP_BACK(start_o, newest_o, prev.slide, prev.n_ops)
                            STEP_BACK(start_o, newest_o, prev.slide, prev.n_ops)
                            STEP_BACK(start_o, newest_o, prev.slide, prev.n_ops)
                            STEP_BACK(start_o, newest_o, prev.slide, prev.n_ops)
                            if (back >= obegun) {
                                verdict.drop_code = DROP_BEFORE_ORIGIN;
                            } else {
                                /* counted in place, not in a local: each
                                 * local is a field bmv2 resets per packet */
                                verdict.old_active = prev.full;
                                if (x - start_o < prev.extra) {
                                    verdict.old_active = verdict.old_active + 1;
                                }
                                if (obegun - back < verdict.old_active) {
                                    verdict.old_active = obegun - back;
                                }
                                if (verdict.old_active == 0) {
                                    verdict.drop_code = DROP_NO_WINDOW;
                                }
                                old_window.read(verdict.old_window, idx);
                                verdict.old_newest = newest_o;
                                verdict.old_window = verdict.old_window - (bit<64>)back;
                                verdict.newest_op = 0;
                                verdict.active = 0;
                            }
                        }
                    } else {
                        /* old windows that began before the boundary and have
                         * not ended: what the old spec counts at x, less the
                         * k + 1 windows it would have opened at or after it */
                        bit<64> d = x - b;
                        /* verdict.old_active, 0 until here, takes the count
                         * itself: a local for it would be one more field
                         * to reset per packet */
                        if (d < prev.size) {
                            bit<64> k = 0;
                            bit<64> p = d;
                            if (d >= prev.slide) {
                                old_div.apply(d, prev.slide, k, p);
                            }
                            bit<64> held = (bit<64>)prev.full;
                            if (p < prev.extra) {
                                held = held + 1;
                            }
                            if (held > k + 1) {
                                if (held - (k + 1) > (bit<64>)obegun) {
                                    verdict.old_active = obegun;
                                } else {
                                    verdict.old_active = (bit<32>)(held - (k + 1));
                                }
                            }
                        }
                        old_newest.read(verdict.old_newest, idx);
                        old_window.read(verdict.old_window, idx);
                        if (late == 0) {
                            /* into b, no longer needed: one field fewer */
                            transition_end.read(b, idx);
                            if (x >= b) {
                                in_transition.write(idx, 0);
                            }
                        }
                    }
                }

                bit<64> offset = 0;
                if (old_only == 1) {
                    /* decided above */
                } else if (late == 1) {
                    /* -- back to the late event's own slide; nothing advances - */
                    STEP_BACK(start, newest, win.slide, win.n_ops)
                    STEP_BACK(start, newest, win.slide, win.n_ops)
                    STEP_BACK(start, newest, win.slide, win.n_ops)
                    STEP_BACK(start, newest, win.slide, win.n_ops)   /* LATE_STEPS times */
                    if (back >= begun_now) {
                        verdict.drop_code = DROP_BEFORE_ORIGIN;
                    } else {
                        begun_now = begun_now - back;
                        window = window - (bit<64>)back;
                        offset = x - start;
                    }
                } else if (x < start) {
                    verdict.drop_code = DROP_BEFORE_ORIGIN;
                } else {
                    offset = x - start;
                    /* -- a new slide (or several, after a gap) has begun ------ */
                    if (offset >= win.slide) {
                        bit<64> advanced;
                        if (offset - win.slide < win.slide) {
                            advanced = 1;
                            offset = offset - win.slide;
                        } else {
                            bit<64> rest;
                            slides_div.apply(offset, win.slide, advanced, rest);
                            offset = rest;
                        }
                        slide_start.write(idx, x - offset);
                        next_start.write(idx, x - offset + win.slide);

                        bit<64> n_ops = (bit<64>)win.n_ops;
                        bit<64> step;
                        if (advanced < n_ops) {
                            step = advanced;
                        } else {
                            bit<64> laps;
                            operators_div.apply(advanced, n_ops, laps, step);
                        }
                        step = step + (bit<64>)newest;   /* where newest moves: no field of its own */
                        if (step >= n_ops) {
                            step = step - n_ops;
                        }
                        newest = (bit<32>)step;
                        newest_op.write(idx, newest);
                        window = window + advanced;
                        newest_window.write(idx, window);

                        bit<64> cap = (bit<64>)win.cap;
                        if (advanced >= cap) {
                            begun_now = win.cap;
                        } else if ((bit<64>)begun_now + advanced >= cap) {
                            begun_now = win.cap;
                        } else {
                            begun_now = begun_now + (bit<32>)advanced;
                        }
                        begun.write(idx, begun_now);
                    }
                }

                /* -- how many windows of the epoch in force hold the event ---- */
                if (verdict.drop_code == DROP_NONE && old_only == 0) {
                    /* counted in place, not in a local of its own */
                    verdict.active = win.full;
                    if (offset < win.extra) {
                        verdict.active = verdict.active + 1;
                    }
                    if (begun_now < verdict.active) {
                        verdict.active = begun_now;
                    }
                    if (verdict.active == 0 && verdict.old_active == 0) {
                        verdict.drop_code = DROP_NO_WINDOW;
                    }
                    verdict.newest_op = newest;
                    verdict.window = window;
                }
            }
        }
    }
}

#endif
