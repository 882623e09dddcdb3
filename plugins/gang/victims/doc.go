// Package victims is the whole-gang victim search of muster's preemption:
// which lower-priority work to evict, in whole units, so that a gang (or a
// pod alone) fits by the placement plan. It reads only snapshot objects
// (fwk.NodeInfo, pods, PodDisruptionBudgets) and plans with plugins/gang/plan,
// never a framework handle, so the scheduler plugin (which evicts what it
// finds) and `muster fit` (which only reports it) run the same search on
// their own snapshots.
//
// Units: every bound pod of a gang cluster-wide (a muster PodGroup, a native
// PodGroup, a Volcano or KAI gang), a pod that belongs to no gang, or one
// extra of an elastic muster gang (taking it leaves the gang whole). Only
// units whose every pod has a strictly lower priority than the preemptor are
// victims. The order, cheapest first, and the search (gallop from a resource
// lower bound, bisect, give back) are documented on Cheaper and Search.
package victims
