package plan

import (
	v1 "k8s.io/api/core/v1"
)

// Devices counts what a node's allocatable does not: the DRA devices pods
// take through their ResourceClaims, and the extended resources a
// DeviceClass maps to devices on nodes that publish them as
// ResourceSlices (DRA-backed extended resources). The planner adds them to
// its resource vectors, so two members planned on one node never count the
// same device twice: asked per shape, the DRA Filter judges each member as
// if it were alone on the node.
type Devices interface {
	// Request is what pod's unallocated claims take, per dimension. The
	// dimensions are Devices' own names (never a resource name a node's
	// allocatable carries).
	Request(pod *v1.Pod) map[v1.ResourceName]int64
	// Free is how much of dimension name node has left; ok is false when
	// the dimension is not Devices' to count on node (an ordinary resource,
	// or an extended resource the node's allocatable carries).
	Free(node *v1.Node, name v1.ResourceName) (free int64, ok bool)
}

// vectorOf is pod's request vector in p's dimensions: its resources and
// the devices its claims take.
func (p *planner) vectorOf(pod *v1.Pod, base vec) vec {
	if p.req.Devices == nil {
		return base
	}
	for name, q := range p.req.Devices.Request(pod) {
		if i, ok := p.dims.index[name]; ok {
			base[i] += q
		}
	}
	return base
}

// deviceFree overrides the free amounts of w with what Devices counts.
func (p *planner) deviceFree(w *node) {
	if p.req.Devices == nil {
		return
	}
	n := w.info.Node()
	for i, name := range p.dims.names {
		if f, ok := p.req.Devices.Free(n, name); ok {
			w.free[i] = f
		}
	}
}
