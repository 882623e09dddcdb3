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

// Domain is a set of nodes one allocation of a claim the members share can
// serve: every member must go there.
type Domain struct {
	// Name names the domain in messages (the device pool).
	Name string
	// Reaches says whether a node is in it.
	Reaches func(*v1.Node) bool
}

// SharedDevices is implemented by a Devices that knows the claims gang
// members share (a pod names the claim instead of a template): allocated
// once, for the first member reserved, such a claim's devices reach some
// nodes only (a multi-node NVLink domain), and a plan spread over two of
// them leaves the members outside the first one's unschedulable.
type SharedDevices interface {
	// Domains lists the node sets the shared claims of pod that are not
	// allocated yet could be allocated for; nil when pod has none.
	Domains(pod *v1.Pod) []Domain
}

// deviceDomains is the domains the gang's shared claims confine it to, or
// nil.
func (p *planner) deviceDomains() []Domain {
	sd, ok := p.req.Devices.(SharedDevices)
	if !ok {
		return nil
	}
	for _, s := range p.shapes {
		if d := sd.Domains(s.Pod); d != nil {
			return d
		}
	}
	return nil
}

// domainSets turns the device domains into node sets to plan in, each
// split by the topology domains when the gang requires one.
func (p *planner) domainSets(domains []Domain) []domainSet {
	var sets []domainSet
	for _, d := range domains {
		byTopo := map[string][]int{}
		for i, n := range p.nodes {
			if node := n.info.Node(); node != nil && d.Reaches(node) {
				key := ""
				if p.req.Topology.Required {
					key = n.domain
				}
				byTopo[key] = append(byTopo[key], i)
			}
		}
		for key, idx := range byTopo {
			name := d.Name
			if key != "" {
				name += "/" + key
			}
			sets = append(sets, domainSet{name: name, nodes: idx, capacity: p.capacity(idx)})
		}
	}
	return sets
}

// Pinner is implemented by a Devices that knows which members' claims are
// allocated already: such a member may go only where its devices are,
// unlike the members of its spec whose claims are not, so it is planned
// as a shape of its own.
type Pinner interface {
	// Pinned identifies where pod's allocated claims confine it; "" when
	// they do not.
	Pinned(pod *v1.Pod) string
}
