/*
 * The splitter for a run in which no stream changes: p4/splitter.p4 built
 * with FIXED defined.  A topology that schedules no change of spec or N
 * and has no failover or elastic policy runs on this build
 * (testbed.targets.bmv2.toolchain.splitter_program); the control plane
 * refuses to arm a change on it.  It leaves out what only a change needs:
 * the boundary check before the configuration is looked up (four register
 * reads per event), the previous epoch's spec and windows, the handover
 * table and the egress's previous position, and the metadata all of that
 * keeps.  bmv2 resets every metadata field of every frame, so each of them
 * is paid on every event of a run that never changes (docs/p4.md, "A build
 * without changes").  Without changes, a count stream needs less state
 * than the tracker keeps: it is tracked in window_spec's action, on two
 * registers (counts.p4).  And the one copy of an event sent by unicast
 * gets its Windows header in egress (forwarding.p4, ONE_COPY_OR_MANY).
 * Every decision it makes is the plain build's on the same events.
 */
#define FIXED
#include "splitter.p4"
