// Package plan computes a placement for a whole gang on a snapshot of nodes
// before any member is reserved.
//
// The planner works on plain snapshot objects (fwk.NodeInfo and pods); it
// never sees a framework handle. Whatever the scheduler profile's other
// Filter plugins decide is brought in through the Filter interface, which the
// planner asks at most once per distinct pod shape and node (plus a few
// incremental checks for shapes whose members interfere with each other),
// never once per member and node, and only about the nodes packing reaches
// in its best-fit order: a refusal, a topology domain ranking or a
// self-interfering shape asks about every node.
package plan
