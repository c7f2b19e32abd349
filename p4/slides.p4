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
 * division; likewise "advanced mod N", only when advanced >= 2N.  The
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
 * In the build without changes only time windows come here: a count
 * stream is tracked in window_spec's action (counts.p4).
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
 * slides_back, one slide fewer begun.  SLIDE and N_OPS are the epoch's own.  The
 * variables are named by the caller, so the old epoch's walk needs no
 * copies of the new one's. */
#define STEP_BACK(START, NEWEST, SLIDE, N_OPS)               \
    if (s.x < START) {                                       \
        START = START - SLIDE;                               \
        s.slides_back = s.slides_back + 1;                   \
        if (NEWEST == 0) {                                   \
            NEWEST = N_OPS - 1;                              \
        } else {                                             \
            NEWEST = NEWEST - 1;                             \
        }                                                    \
    }

/* Whether the stream's first event is this one.  BoundaryCheck reads
 * initialized for it before the configuration is looked up.  The build
 * without changes has no BoundaryCheck, and reads begun instead, as its
 * first step: begun is 0 until the first event and every write of it is 1
 * or more, so the read that the tracker needs anyway answers both, one
 * register read fewer per event.  It still writes initialized. */
#ifdef FIXED
#define STREAM_NEW (s.begun_now == 0)
#else
#define STREAM_NEW (s.initialized == 0)
#endif

/* An event in no window of either epoch (NO_WINDOW).  Most events lie in
 * exactly the whole windows that window_spec counts: in no partial one
 * (offset >= extra), all of them begun, and at least one; the tracker
 * asks that in one test (NO_PARTIAL_WINDOW) before the three steps that
 * would each be a test. */
#ifdef FIXED
#define NO_WINDOW (verdict.active == 0)
#else
#define NO_WINDOW (verdict.active == 0 && verdict.old_active == 0)
#endif
#define NO_PARTIAL_WINDOW (s.offset >= s.extra && s.begun_now >= verdict.active && !NO_WINDOW)

/* An event that moves the tracker on (or stays in the newest slide): not
 * late, at or past the newest slide's start, and, during a transition, not
 * one of the previous epoch's alone. */
#ifdef FIXED
#define IN_ORDER ((s.kind & KIND_LATE) == 0 && s.x >= s.start)
#else
#define IN_ORDER (f.old_only == 0 && (s.kind & KIND_LATE) == 0 && s.x >= s.start)
#endif

/* Reads and advances the window state of one stream and fills the
 * verdict: a drop code, or (newest_op, active) for the epoch in force and,
 * during a transition, (old_newest, old_active) for the previous one.  The
 * registers are in state.p4.  Its working values are the fields of s, a
 * header that is never valid, and of f, which start at 0 (headers.p4 says
 * why: a local would be a metadata field that bmv2 resets per packet).
 * Whether the event is late is a bit of s.kind (KIND_LATE), which the
 * window_spec action's write of the kind clears. */
control SlideTracker(in event_t event, in bit<16> idx, in window_params_t win,
#ifndef FIXED
                     in prev_spec_t prev, in bit<32> prev_n_ops, in epoch_t sel,
#endif
                     inout verdict_t verdict, inout tracker_flags_t f, inout scratch_t s) {
    ShiftSubtractDivide() slides_div;     /* offset / slide, after a gap in time */
    ShiftSubtractDivide() operators_div;  /* advanced mod N, when advanced >= 2N */
#ifndef FIXED
    ShiftSubtractDivide() old_div;        /* distance past the boundary / old slide */
#endif
    EventStartTracker() event_starts;     /* windows that start at events */

    apply {
        /* The verdict starts at 0, drop_code DROP_NONE among it: bmv2
         * zeroes all metadata when a packet (or a batch's next pass) enters
         * ingress, and the ingress applies this only while nothing has
         * set a drop code. */

        /* -- the coordinate; time windows also check the order ---------- */
#ifdef FIXED
        /* count windows are tracked in window_spec's action (counts.p4) */
        {
            begun.read(s.begun_now, idx);   /* STREAM_NEW, below */
#else
        if (s.kind == WINDOW_COUNT) {
            event_count.read(s.x, idx);
            event_count.write(idx, s.x + 1);
        } else {
#endif
            last_ts.read(s.previous_ts, idx);
            s.x = event.ts;
            if (!STREAM_NEW && s.x < s.previous_ts) {
                if (s.previous_ts - s.x > s.lateness) {
                    DROP_AS(DROP_TOO_LATE)
                } else {
                    s.kind = s.kind | KIND_LATE;
                }
            } else {
                last_ts.write(idx, s.x);
            }
        }

        if (verdict.drop_code == DROP_NONE) {
            /* -- current state; the first event of a stream sets it up --- */
            if (STREAM_NEW) {
                /* The first slide starts at the first event, or at the
                 * stream's fixed origin (time windows).  The next slide's
                 * start is set in each branch and the register written from
                 * the field: an expression there would be a temporary of
                 * p4c's, in metadata, that every packet pays to reset
                 * (headers.p4).  So in the new-slide step. */
                s.start = s.x;
                initialized.write(idx, 1);
#ifdef FIXED
                {   /* time windows only (counts.p4) */
#else
                if (s.kind == WINDOW_COUNT) {
                    time_axis.write(idx, 0);
                    s.next = s.x + s.slide;
                } else {
#endif
                    time_axis.write(idx, 1);
                    if (s.fixed_origin != 0) {
                        s.start = s.origin;
                        s.next = s.origin + s.slide;
                    } else {
                        s.next = s.x + s.slide;
                    }
                }
                slide_start.write(idx, s.start);
                newest_op.write(idx, 0);
                begun.write(idx, 1);
                next_start.write(idx, s.next);
                newest_window.write(idx, 0);
                /* the newest window, 0 and on operator 0: the verdict's
                 * operator as bmv2 zeroed it (rule 3, docs/p4.md), and the
                 * window's id, which need not be metadata (VERDICT_WINDOW) */
                VERDICT_WINDOW = 0;
                s.begun_now = 1;
                s.offset = s.x - s.start;
            } else {
                slide_start.read(s.start, idx);
                newest_op.read(verdict.newest_op, idx);
#ifndef FIXED
                begun.read(s.begun_now, idx);
#endif
                newest_window.read(VERDICT_WINDOW, idx);
                /* the event's offset in the newest slide, here with the
                 * reads: on its own it would be one more table of p4c's per
                 * event.  Wherever start moves, the offset follows. */
                s.offset = s.x - s.start;
            }

            /* -- windows that start at events: their own tracker, which
             *    has no late path and no transition (no lateness, no
             *    change) ---------------------------------------------- */
            if (s.kind == WINDOW_TIME_EVENT_STARTS) {
                /* an else, not a return: p4c would make a return a flag
                 * field and a test of it before every later statement */
                event_starts.apply(idx, win, s, verdict);
            } else {
#ifndef FIXED
                /* -- an armed change takes effect: freeze the old epoch's newest
                 *    slide and begin the new one at the boundary -------------- */
                if (sel.switching == 1) {
                    next_start.read(s.b, idx);
                    old_start.write(idx, s.start);
                    old_newest.write(idx, verdict.newest_op);
                    old_begun.write(idx, s.begun_now);
                    old_window.write(idx, VERDICT_WINDOW);
                    boundary.write(idx, s.b);
                    transition_end.write(idx, s.b + prev.tail);
                    epoch.write(idx, sel.number);   /* the epoch after the stored one */
                    armed.write(idx, 0);
                    in_transition.write(idx, 1);
                    slide_start.write(idx, s.b);
                    newest_op.write(idx, 0);
                    begun.write(idx, 1);
                    next_start.write(idx, s.b + s.slide);
                    /* window ids go on across epochs */
                    VERDICT_WINDOW = VERDICT_WINDOW + 1;
                    newest_window.write(idx, VERDICT_WINDOW);
                    s.start = s.b;
                    s.offset = s.x - s.b;
                    verdict.newest_op = 0;
                    s.begun_now = 1;
                }

                /* -- the previous epoch's windows, during a transition -------- */
                if (s.in_transition == 1 || sel.switching == 1) {
                    boundary.read(s.b, idx);
                    old_begun.read(s.obegun, idx);
                    if (s.x < s.b) {
                        /* a late event before the boundary: old windows only,
                         * back from the old epoch's frozen newest slide */
                        f.old_only = 1;
                        s.slides_back = 0;   /* hdr.scratch is not reset (headers.p4) */
                        old_start.read(s.start_o, idx);
                        old_newest.read(s.newest_o, idx);
                        STEP_BACK(s.start_o, s.newest_o, prev.slide, prev_n_ops)
                        STEP_BACK(s.start_o, s.newest_o, prev.slide, prev_n_ops)
                        STEP_BACK(s.start_o, s.newest_o, prev.slide, prev_n_ops)
                        STEP_BACK(s.start_o, s.newest_o, prev.slide, prev_n_ops)
                        if (s.slides_back >= s.obegun) {
                            verdict.drop_code = DROP_BEFORE_ORIGIN;
                        } else {
                            /* counted in place, not in a local: each
                             * local is a field bmv2 resets per packet */
                            verdict.old_active = prev.full;
                            if (s.x - s.start_o < prev.extra) {
                                verdict.old_active = verdict.old_active + 1;
                            }
                            if (s.obegun - s.slides_back < verdict.old_active) {
                                verdict.old_active = s.obegun - s.slides_back;
                            }
                            if (verdict.old_active == 0) {
                                verdict.drop_code = DROP_NO_WINDOW;
                            }
                            old_window.read(verdict.old_window, idx);
                            verdict.old_newest = s.newest_o;
                            verdict.old_window = verdict.old_window - (bit<64>)s.slides_back;
                            verdict.newest_op = 0;
                            verdict.active = 0;
                        }
                    } else {
                        /* old windows that began before the boundary and have
                         * not ended: what the old spec counts at x, less the
                         * k + 1 windows it would have opened at or after it */
                        s.d = s.x - s.b;
                        /* verdict.old_active, 0 until here, takes the count itself */
                        if (s.d < prev.size) {
                            s.k = 0;
                            s.p = s.d;
                            if (s.d >= prev.slide) {
                                old_div.apply(s.d, prev.slide, s.k, s.p);
                            }
                            s.held = (bit<64>)prev.full;
                            if (s.p < prev.extra) {
                                s.held = s.held + 1;
                            }
                            if (s.held > s.k + 1) {
                                if (s.held - (s.k + 1) > (bit<64>)s.obegun) {
                                    verdict.old_active = s.obegun;
                                } else {
                                    verdict.old_active = (bit<32>)(s.held - (s.k + 1));
                                }
                            }
                        }
                        old_newest.read(verdict.old_newest, idx);
                        old_window.read(verdict.old_window, idx);
                        if ((s.kind & KIND_LATE) == 0) {
                            /* into b, no longer needed */
                            transition_end.read(s.b, idx);
                            if (s.x >= s.b) {
                                in_transition.write(idx, 0);
                            }
                        }
                    }
                }

#endif
                /* The common case first, in one test: an event in order, at
                 * or past the newest slide's start (each `if` is a condition
                 * bmv2 evaluates per event; docs/p4.md, rule 6). */
                if (IN_ORDER) {
                    /* -- a new slide (or several, after a gap) has begun ------ */
                    if (s.offset >= s.slide) {
                        if (s.offset - s.slide < s.slide) {
                            /* The next slide, the common case: one of each,
                             * counted on the values in place.  newest < N and
                             * begun <= cap hold on every path that writes them. */
                            s.offset = s.offset - s.slide;
                            s.start = s.start + s.slide;
                            s.next = s.start + s.slide;
                            VERDICT_WINDOW = VERDICT_WINDOW + 1;
                            verdict.newest_op = verdict.newest_op + 1;
                            if (verdict.newest_op >= N_OPS_OF(win, s)) {
                                verdict.newest_op = verdict.newest_op - N_OPS_OF(win, s);
                            }
                            if (s.begun_now < s.cap) {
                                s.begun_now = s.begun_now + 1;
                            }
                        } else {
                            /* A gap: the slides passed by division, and the
                             * operators moved on by as many, mod N. */
                            slides_div.apply(s.offset, s.slide, s.advanced, s.rest);
                            s.offset = s.rest;
                            s.start = s.x - s.rest;
                            s.next = s.start + s.slide;
                            VERDICT_WINDOW = VERDICT_WINDOW + s.advanced;
                            s.n_ops = (bit<64>)N_OPS_OF(win, s);
                            if (s.advanced < s.n_ops) {
                                s.step = s.advanced;
                            } else if (s.advanced - s.n_ops < s.n_ops) {
                                /* one lap: no division for it */
                                s.step = s.advanced - s.n_ops;
                            } else {
                                operators_div.apply(s.advanced, s.n_ops, s.laps, s.step);
                            }
                            s.step = s.step + (bit<64>)verdict.newest_op;   /* where newest moves */
                            if (s.step >= s.n_ops) {
                                verdict.newest_op = (bit<32>)(s.step - s.n_ops);
                            } else {
                                verdict.newest_op = (bit<32>)s.step;
                            }
                            s.wide_cap = (bit<64>)s.cap;
                            if (s.advanced >= s.wide_cap) {
                                s.begun_now = s.cap;
                            } else if ((bit<64>)s.begun_now + s.advanced >= s.wide_cap) {
                                s.begun_now = s.cap;
                            } else {
                                s.begun_now = s.begun_now + (bit<32>)s.advanced;
                            }
                        }
                        /* every value set in each branch above: a register
                         * write of an expression would be a temporary of
                         * p4c's, in metadata (headers.p4) */
                        slide_start.write(idx, s.start);
                        next_start.write(idx, s.next);
                        newest_op.write(idx, verdict.newest_op);
                        newest_window.write(idx, VERDICT_WINDOW);
                        begun.write(idx, s.begun_now);
                    }
#ifndef FIXED
                } else if (f.old_only == 1) {
                    /* decided above */
#endif
                } else if ((s.kind & KIND_LATE) != 0) {
                    /* -- back to the late event's own slide; nothing advances - */
                    s.slides_back = 0;   /* hdr.scratch is not reset (headers.p4) */
                    STEP_BACK(s.start, verdict.newest_op, s.slide, N_OPS_OF(win, s))
                    STEP_BACK(s.start, verdict.newest_op, s.slide, N_OPS_OF(win, s))
                    STEP_BACK(s.start, verdict.newest_op, s.slide, N_OPS_OF(win, s))
                    STEP_BACK(s.start, verdict.newest_op, s.slide, N_OPS_OF(win, s))   /* LATE_STEPS times */
                    if (s.slides_back >= s.begun_now) {
                        DROP_AS(DROP_BEFORE_ORIGIN)
                    } else {
                        s.begun_now = s.begun_now - s.slides_back;
                        VERDICT_WINDOW = VERDICT_WINDOW - (bit<64>)s.slides_back;
                        s.offset = s.x - s.start;
                    }
                } else {
                    /* before the stream's origin (s.x < s.start) */
                    DROP_AS(DROP_BEFORE_ORIGIN)
                }

                /* -- how many windows of the epoch in force hold the event ---- */
#ifdef FIXED
                if (verdict.drop_code == DROP_NONE) {
#else
                if (verdict.drop_code == DROP_NONE && f.old_only == 0) {
#endif
                    /* The newest window and its operator are the verdict's
                     * already: the tracker reads and moves them in place, so
                     * no copy is made of either.  The count, in place too,
                     * from the whole windows window_spec put there. */
                    if (!NO_PARTIAL_WINDOW) {
                        if (s.offset < s.extra) {
                            verdict.active = verdict.active + 1;
                        }
                        if (s.begun_now < verdict.active) {
                            verdict.active = s.begun_now;
                        }
                        if (NO_WINDOW) {
                            verdict.drop_code = DROP_NO_WINDOW;
                        }
                    }
                }
            }
        }
    }
}

#endif
