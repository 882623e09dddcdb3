package dashboard

import (
	"time"

	"k8s.io/client-go/tools/cache"
)

// Admission queues (Kueue) decide when a workload may start, before any
// gang exists: a job waiting for quota is suspended and has no pods, so no
// PodGroup either. The page shows each queued workload as a row all the
// same, with the queue's own words, and a ganged workload's row with its
// queue state. The dashboard package knows no queue system: a QueueSource
// (the CLI's, over Kueue's Workloads) turns their objects into entries.

// QueueEntry is what an admission queue says about one workload.
type QueueEntry struct {
	// The workload the queue entry is for (its job).
	APIVersion, Kind, Namespace, Name string
	// State is the queue's (Pending, Admitted, Evicted, Inactive,
	// Finished, ...); Admitted is true once the workload may start.
	State    string
	Admitted bool
	// Summary is the line describe prints ("waiting for quota in
	// ClusterQueue gpus: needs 32 nvidia.com/gpu (Kueue: ...)").
	Summary string
	// Finished entries are left out.
	Finished bool
	// Created is when the queue took the workload in.
	Created time.Time
}

// QueueSource watches an admission queue.
type QueueSource struct {
	// Informers are started with the others; Entries is called from the
	// first one's store at every snapshot.
	Informers []cache.SharedIndexInformer
	// Entry reads one object of the first informer; false skips it.
	Entry func(obj any) (QueueEntry, bool)
}

// applyQueue sets each workload's queue state, and adds the queued
// workloads that have no gang yet as rows of their own.
func applyQueue(s *Snapshot, entries []QueueEntry, wlIndex map[workloadKey]int) {
	for _, e := range entries {
		if e.Finished {
			continue
		}
		k := workloadKey{e.APIVersion, e.Kind, e.Namespace, e.Name}
		i, ok := wlIndex[k]
		if !ok {
			if e.Admitted {
				continue // admitted and without a gang: nothing for muster to place
			}
			i = len(s.Workloads)
			wlIndex[k] = i
			s.Workloads = append(s.Workloads, WorkloadView{Kind: e.Kind, APIVersion: e.APIVersion, Namespace: e.Namespace, Name: e.Name, Created: e.Created, Queued: true})
		}
		w := &s.Workloads[i]
		w.Queue, w.QueueSummary, w.Queued = e.State, e.Summary, w.Queued || !e.Admitted
	}
}
