// Package lifecycle keeps what the MusterGang plugin remembers about each
// gang between scheduling cycles: its plan and the capacity the plan holds,
// its cached "no placement" verdicts, the members reserved and those
// waiting at Permit, the Permit barrier, a preemption whose victims are
// still going, and the bookkeeping of the status writer and the eviction
// loop.
//
// A Tracker owns that state behind one lock. Its methods say what happens
// to a gang (a member reserved, the gang released, a plan stored, a verdict
// cached, a member forgotten); each takes the lock for the step it names.
// A decision that must not interleave with any other step on the state,
// such as computing a plan from the capacity other gangs hold and storing
// it, takes the lock explicitly with Lock and makes its steps on the
// returned Gang until Gang.Unlock.
//
// While it holds its lock the tracker calls the scheduler through Cluster
// (activating pods, the waiting pods' Allow and Reject, dropping in-memory
// nominations), as the plugin did before the state had a type of its own:
// Permit counts the quorum and allows the waiting members under the same
// lock that every rejection holds, so that a barrier is released whole or
// rejected whole. Package gang's documentation gives the order of every lock
// the plugin and the tracker hold (the section "Locks").
package lifecycle
