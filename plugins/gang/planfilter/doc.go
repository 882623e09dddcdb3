// Package planfilter runs a scheduler profile's PreFilter and Filter
// plugins for the whole-gang planner (plugins/gang/plan): the one judgement
// of "may this member go to that node" that the gang plugin and muster fit
// share.
//
// Filter adapts any Runner (a framework.Framework: the scheduler's own
// profile in the plugin) to plan.Filter: the profile's PreFilter plugins
// run once per member shape, its Filter plugins once per shape and node,
// and, for gangs whose members interfere with each other, once per member
// with the members planned before it added through the PreFilter
// extensions, as the scheduler's filters see reserved members.
//
// Profile builds such a Runner offline, from a KubeSchedulerConfiguration
// and a snapshot of nodes and pods (Snapshot), with kube-scheduler's in-tree
// plugins: what muster fit judges with, so that it reads the same
// configuration the scheduler runs with. Plugins that cannot run on a
// snapshot (out-of-tree ones, such as MusterGang itself, whose judgement is
// the planner) are left out and named.
package planfilter
