package plan

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// Topology asks for all members in one domain of a node label.
type Topology struct {
	// Key is the node label key; "" means no constraint.
	Key string
	// Required: no placement across domains. Otherwise one domain is tried
	// first (largest free capacity first) and the constraint is relaxed when
	// no single domain fits.
	Required bool
}

// Request is everything the planner needs for one gang.
type Request struct {
	// Gang names the gang in messages ("namespace/name").
	Gang string
	// MinMember is the quorum, counting Placed members.
	MinMember int
	// Pending are the members without a node. The planner tries to place all
	// of them; a plan that places at least MinMember-len(Placed) succeeds.
	// Members of one shape are placed in this order: give them in the
	// order the scheduler will try them (SortPending).
	Pending []*v1.Pod
	// Placed are the nodes of members already bound or reserved. They stay
	// where they are and are already part of the node snapshot.
	Placed []string
	// Nodes is the snapshot.
	Nodes []fwk.NodeInfo
	// Held are pods other gangs' plans intend to put on a node but have not
	// reserved yet; their requests count as used.
	Held map[string][]fwk.PodInfo
	// Topology is the gang's domain constraint.
	Topology Topology
	// Filter checks the profile's other filters; nil checks resources only.
	Filter Filter
	// Devices counts DRA devices; nil: resources are the nodes'
	// allocatable alone.
	Devices Devices
	// Removed are pods the nodes above no longer hold (victims, pods
	// terminating) that a Filter built on the scheduler's snapshot still
	// sees; Compute hands them to a Filter that implements Remover.
	Removed []PodOnNode
	// Parallelize runs fn for i in [0, pieces), possibly in parallel; nil runs
	// it sequentially.
	Parallelize func(ctx context.Context, pieces int, fn func(i int))
}

// Plan is a placement for a gang.
type Plan struct {
	// Assignments maps each placed pending member to its node.
	Assignments map[types.UID]string
	// Domain is the topology domain used ("" without a constraint, or when a
	// preferred constraint was relaxed).
	Domain string
	// Relaxed is true when a preferred constraint could not be met.
	Relaxed bool
	// Unplaced are pending members left out because the quorum was met
	// without them.
	Unplaced []types.UID
	// Ordered: the members interfere with each other's filters, and the
	// plan holds when they are reserved in Order, each on its node.
	Ordered bool
	// Order is the order the planner placed the members in (Ordered
	// plans only), and Shape each placed member's shape: members of one
	// shape are interchangeable, so the one the scheduler tries first may
	// take the first slot of its shape (see lifecycle.Gang.PlannedNode).
	Order []types.UID
	Shape map[types.UID]int
}

// NoPlacementError says why no plan exists. Message is meant for people: it is
// the one gang-level reason shown on every member.
type NoPlacementError struct {
	Gang    string
	Message string
	// Fits is how many members the best attempt placed (placed ones
	// included); Wanted is the quorum.
	Fits, Wanted int
}

func (e *NoPlacementError) Error() string { return e.Message }

// node is the planner's working copy of one node.
type node struct {
	info   fwk.NodeInfo
	name   string
	domain string
	free   vec
	pods   int // free pod slots
}

type planner struct {
	ctx    context.Context
	req    Request
	dims   *dims
	shapes []*Shape
	nodes  []*node
	// interfering: some shape's members interfere with each other's
	// filters, so the gang is packed member by member (packSession).
	interfering bool
	// checked[s][n]: the filters were asked about shape s on node n;
	// feasible[s][n]: they said yes (as the snapshot is). The filters are
	// asked lazily (see pack).
	checked  [][]bool
	feasible [][]bool
}

// Compute finds a placement for every pending member of the gang, or explains
// why there is none. It never changes the NodeInfos it is given.
func Compute(ctx context.Context, req Request) (*Plan, error) {
	if r, ok := req.Filter.(Remover); ok && len(req.Removed) > 0 {
		req.Filter = r.Without(req.Removed)
	}
	p := &planner{ctx: ctx, req: req, dims: newDims()}
	p.shapes = groupShapes(req.Pending, req.Devices)
	for _, s := range p.shapes {
		p.dims.addRequest(s.PodInfo.CalculateResource().Resource)
		if req.Devices != nil {
			for name := range req.Devices.Request(s.Pod) {
				p.dims.add(name)
			}
		}
		p.interfering = p.interfering || (s.Interfering && req.Filter != nil)
	}
	p.dims.sorted()
	for _, s := range p.shapes {
		s.request = p.vectorOf(s.Pod, p.dims.vector(s.PodInfo.CalculateResource().Resource))
	}
	p.buildNodes()
	p.evaluate()
	plan, err := p.solve()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("planning gang %s: %w", p.req.Gang, err)
	}
	return plan, err
}

func (p *planner) buildNodes() {
	// One allocation for the nodes and one for their free vectors: a plan
	// at 5000 nodes built them one by one, and the collector paid for it.
	nodes := make([]node, 0, len(p.req.Nodes))
	width := len(p.dims.names)
	frees := make(vec, len(p.req.Nodes)*width)
	for _, ni := range p.req.Nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		k := len(nodes)
		w := node{info: ni, name: n.Name, free: frees[k*width : (k+1)*width : (k+1)*width]}
		p.dims.freeInto(w.free, ni)
		p.deviceFree(&w)
		w.pods = ni.GetAllocatable().GetAllowedPodNumber() - len(ni.GetPods())
		if p.req.Topology.Key != "" {
			w.domain = n.Labels[p.req.Topology.Key]
		}
		for _, h := range p.req.Held[n.Name] {
			w.free.sub(p.vectorOf(h.GetPod(), p.dims.vector(h.CalculateResource().Resource)))
			w.pods--
		}
		nodes = append(nodes, w)
	}
	// The snapshot's order is kept: every choice below breaks ties by node
	// name itself (packing order, domains), so no sort of all nodes is
	// needed here.
	p.nodes = make([]*node, len(nodes))
	for i := range nodes {
		p.nodes[i] = &nodes[i]
	}
}

// evaluate prepares the filter answers. The filters (the profile's other
// Filter plugins) are the planner's main cost: asked about every node they
// made a plan at 5000 nodes cost as much CPU per pod as the default
// profile's filtering (BENCHMARKS.md). So they are asked lazily, for the
// nodes packing reaches, in packing order (ensure).
func (p *planner) evaluate() {
	p.checked = make([][]bool, len(p.shapes))
	p.feasible = make([][]bool, len(p.shapes))
	for si := range p.shapes {
		p.checked[si] = make([]bool, len(p.nodes))
		p.feasible[si] = make([]bool, len(p.nodes))
	}
}

// ensure asks the filters about shape si on the nodes idx (every node when
// idx is nil) that were not asked yet, in parallel when it may.
func (p *planner) ensure(si int, idx []int) {
	var todo []int
	if idx == nil {
		for ni := range p.nodes {
			if !p.checked[si][ni] {
				todo = append(todo, ni)
			}
		}
	} else {
		for _, ni := range idx {
			if !p.checked[si][ni] {
				todo = append(todo, ni)
			}
		}
	}
	if len(todo) == 0 || p.ctx.Err() != nil {
		return
	}
	s := p.shapes[si]
	check := func(k int) {
		ni := todo[k]
		n := p.nodes[ni]
		p.checked[si][ni] = true
		if fitCount(n.free, s.request, 1) == 0 || n.pods <= 0 {
			// Resources alone rule the node out: no need to ask the
			// filters (they would say the same, at a price).
			return
		}
		if p.req.Filter != nil && !p.req.Filter.Check(p.ctx, s, n.info) {
			return
		}
		p.feasible[si][ni] = true
	}
	if p.req.Parallelize != nil && len(todo) > 1 {
		p.req.Parallelize(p.ctx, len(todo), check)
		return
	}
	for k := range todo {
		check(k)
	}
}

// filtered counts the nodes that resources would allow some shape on but
// the other filters refuse for every shape. It asks the filters about every
// node: only a refusal's message needs it.
func (p *planner) filtered() int {
	for si := range p.shapes {
		p.ensure(si, nil)
	}
	n := 0
	for ni := range p.nodes {
		any := false
		for si := range p.shapes {
			any = any || p.feasible[si][ni]
		}
		if !any && p.resourcesAllowSome(ni) {
			n++
		}
	}
	return n
}

// resourcesAllowSome is true when some shape would fit by resources alone,
// i.e. a filter other than resources excluded the node.
func (p *planner) resourcesAllowSome(ni int) bool {
	n := p.nodes[ni]
	for _, s := range p.shapes {
		if n.pods > 0 && fitCount(n.free, s.request, 1) > 0 {
			return true
		}
	}
	return false
}

// candidates lists the node sets to try, best first.
func (p *planner) candidates() ([]domainSet, error) {
	all := make([]int, len(p.nodes))
	for i := range all {
		all[i] = i
	}
	topo := p.req.Topology
	if domains := p.deviceDomains(); domains != nil {
		sets := p.domainSets(domains)
		if len(sets) == 0 {
			return nil, p.fail(0, "its members share a ResourceClaim that no free device can satisfy")
		}
		sortSets(sets)
		return sets, nil
	}
	if topo.Key == "" {
		return []domainSet{{nodes: all}}, nil
	}
	byDomain := map[string][]int{}
	for i, n := range p.nodes {
		if n.domain != "" {
			byDomain[n.domain] = append(byDomain[n.domain], i)
		}
	}
	// Members already placed pin the domain.
	pinned := map[string]bool{}
	for _, name := range p.req.Placed {
		for _, n := range p.nodes {
			if n.name == name {
				pinned[n.domain] = true
			}
		}
	}
	var sets []domainSet
	for d, idx := range byDomain {
		if len(pinned) > 0 && !pinned[d] {
			continue
		}
		sets = append(sets, domainSet{name: d, nodes: idx, capacity: p.capacity(idx)})
	}
	if len(byDomain) == 0 && topo.Required {
		return nil, p.fail(0, fmt.Sprintf("needs all %d members in one %s domain, but no node carries the label %s", len(p.req.Pending), topo.Key, topo.Key))
	}
	if topo.Required && len(pinned) > 1 {
		return nil, p.fail(0, fmt.Sprintf("members are already placed in %d %s domains; the constraint needs one", len(pinned), topo.Key))
	}
	sortSets(sets)
	if !topo.Required {
		sets = append(sets, domainSet{nodes: all, relaxed: true})
	}
	return sets, nil
}

// sortSets orders domains largest free capacity first, then by name for
// determinism.
func sortSets(sets []domainSet) {
	sort.Slice(sets, func(i, j int) bool {
		if sets[i].capacity != sets[j].capacity {
			return sets[i].capacity > sets[j].capacity
		}
		return sets[i].name < sets[j].name
	})
}

type domainSet struct {
	name     string
	nodes    []int
	capacity int
	relaxed  bool
}

// capacity is how many pending members could go to the nodes, shape by shape
// and each alone: an upper bound used only to order domains.
func (p *planner) capacity(idx []int) int {
	total := 0
	for si, s := range p.shapes {
		p.ensure(si, idx)
		c := 0
		for _, ni := range idx {
			if p.feasible[si][ni] {
				c += min(fitCount(p.nodes[ni].free, s.request, len(s.Members)), p.nodes[ni].pods)
			}
		}
		total += min(c, len(s.Members))
	}
	return total
}

func (p *planner) solve() (*Plan, error) {
	sets, err := p.candidates()
	if err != nil {
		return nil, err
	}
	need := p.req.MinMember - len(p.req.Placed)
	best, bestSet := packing{placed: -1}, domainSet{}
	for _, set := range sets {
		var res packing
		if p.interfering {
			res = p.packSession(set.nodes)
		} else {
			res = p.pack(set.nodes)
		}
		if res.placed >= need {
			plan := &Plan{Assignments: res.out, Domain: set.name, Relaxed: set.relaxed && p.req.Topology.Key != "", Ordered: p.interfering}
			if p.interfering {
				plan.Order, plan.Shape = res.order, res.shape
			}
			for _, pod := range p.req.Pending {
				if _, ok := res.out[pod.UID]; !ok {
					plan.Unplaced = append(plan.Unplaced, pod.UID)
				}
			}
			return plan, nil
		}
		if res.placed > best.placed {
			best, bestSet = res, set
		}
	}
	best.placed = max(best.placed, 0)
	return nil, p.explain(best, bestSet)
}
