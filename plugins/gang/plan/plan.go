package plan

import (
	"container/heap"
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Filter brings the verdict of the profile's other Filter plugins into the
// planner.
type Filter interface {
	// Check reports whether one more member of shape s passes every filter on
	// ni. added are members of s the planner already put on ni in this
	// simulation (ni includes them); it is empty on the first call per node.
	Check(ctx context.Context, s *Shape, ni fwk.NodeInfo, added []fwk.PodInfo) bool
}

// FilterFunc adapts a function to Filter.
type FilterFunc func(ctx context.Context, s *Shape, ni fwk.NodeInfo, added []fwk.PodInfo) bool

// Check implements Filter.
func (f FilterFunc) Check(ctx context.Context, s *Shape, ni fwk.NodeInfo, added []fwk.PodInfo) bool {
	return f(ctx, s, ni, added)
}

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
	// checked[s][n]: the filters were asked about shape s on node n;
	// feasible[s][n]: they said yes (as the snapshot is). simCap[s][n] caps
	// self-interfering shapes. The filters are asked lazily (see pack).
	checked  [][]bool
	feasible [][]bool
	simCap   [][]int
}

// Compute finds a placement for every pending member of the gang, or explains
// why there is none. It never changes the NodeInfos it is given.
func Compute(ctx context.Context, req Request) (*Plan, error) {
	p := &planner{ctx: ctx, req: req, dims: newDims()}
	p.shapes = GroupShapes(req.Pending)
	for _, s := range p.shapes {
		p.dims.addRequest(s.PodInfo.CalculateResource().Resource)
	}
	p.dims.sorted()
	for _, s := range p.shapes {
		s.request = p.dims.vector(s.PodInfo.CalculateResource().Resource)
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
		w.pods = ni.GetAllocatable().GetAllowedPodNumber() - len(ni.GetPods())
		if p.req.Topology.Key != "" {
			w.domain = n.Labels[p.req.Topology.Key]
		}
		for _, h := range p.req.Held[n.Name] {
			w.free.sub(p.dims.vector(h.CalculateResource().Resource))
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
// profile's filtering (BENCHMARKS.md, issue 18). So they are asked lazily,
// for the nodes packing reaches, in packing order (ensure). Only
// self-interfering shapes are evaluated on every node up front, as their
// per-node cap (simulate) decides the packing order.
func (p *planner) evaluate() {
	p.checked = make([][]bool, len(p.shapes))
	p.feasible = make([][]bool, len(p.shapes))
	p.simCap = make([][]int, len(p.shapes))
	for si, s := range p.shapes {
		p.checked[si] = make([]bool, len(p.nodes))
		p.feasible[si] = make([]bool, len(p.nodes))
		p.simCap[si] = make([]int, len(p.nodes))
		if s.SelfInterfering && p.req.Filter != nil {
			p.ensure(si, nil)
		}
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
		limit := len(s.Members)
		if fitCount(n.free, s.request, limit) == 0 || n.pods <= 0 {
			// Resources alone rule the node out: no need to ask the
			// filters (they would say the same, at a price).
			return
		}
		if p.req.Filter != nil && !p.req.Filter.Check(p.ctx, s, n.info, nil) {
			return
		}
		p.feasible[si][ni] = true
		p.simCap[si][ni] = limit
		if s.SelfInterfering && p.req.Filter != nil {
			p.simCap[si][ni] = p.simulate(p.ctx, s, n, limit)
		}
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

// simulate adds copies of the representative to a clone of the node until
// the filters refuse one; the count caps the shape on that node.
func (p *planner) simulate(ctx context.Context, s *Shape, n *node, limit int) int {
	clone := n.info.Snapshot()
	var added []fwk.PodInfo
	for i := 1; i < limit; i++ {
		cp := s.Pod.DeepCopy()
		cp.Name = fmt.Sprintf("%s-plan-%d", s.Pod.Name, i)
		cp.UID = types.UID(fmt.Sprintf("%s-plan-%d", s.Pod.UID, i))
		cp.Spec.NodeName = n.name
		pi, _ := framework.NewPodInfo(cp)
		clone.AddPodInfo(pi)
		added = append(added, pi)
		if !p.req.Filter.Check(ctx, s, clone, added) {
			return i
		}
	}
	return limit
}

// candidates lists the node sets to try, best first.
func (p *planner) candidates() ([]domainSet, error) {
	all := make([]int, len(p.nodes))
	for i := range all {
		all[i] = i
	}
	topo := p.req.Topology
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
	// Largest free capacity first, then by name for determinism.
	sort.Slice(sets, func(i, j int) bool {
		if sets[i].capacity != sets[j].capacity {
			return sets[i].capacity > sets[j].capacity
		}
		return sets[i].name < sets[j].name
	})
	if !topo.Required {
		sets = append(sets, domainSet{nodes: all, relaxed: true})
	}
	return sets, nil
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
				c += min(fitCount(p.nodes[ni].free, s.request, p.simCap[si][ni]), p.nodes[ni].pods)
			}
		}
		total += min(c, len(s.Members))
	}
	return total
}

// pack places shapes on the given nodes: the biggest shape first, each on the
// nodes with the least room for it first (best fit), so large members are not
// left with fragments.
func (p *planner) pack(idx []int) (map[types.UID]string, int) {
	// What this packing took from a node, copied on first use: a gang
	// touches a few of the nodes, and copying thousands of them per
	// attempt showed in the profile.
	taken := map[int]*node{}
	room := func(ni int) *node {
		if n, ok := taken[ni]; ok {
			return n
		}
		return p.nodes[ni]
	}
	take := func(ni int, req vec) {
		n, ok := taken[ni]
		if !ok {
			c := *p.nodes[ni]
			c.free = append(vec(nil), c.free...)
			n = &c
			taken[ni] = n
		}
		n.free.sub(req)
		n.pods--
	}
	order := make([]int, len(p.shapes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return p.size(p.shapes[order[a]]) > p.size(p.shapes[order[b]])
	})
	out := map[types.UID]string{}
	placed := 0
	for _, si := range order {
		s := p.shapes[si]
		// A node's cap: what the filters allow once asked (simulated for a
		// self-interfering shape, asked about every node up front), else
		// the members themselves. Sorting by it before the filters are
		// asked gives the order an eager evaluation would: the filters
		// only remove nodes from it.
		capOf := func(ni int) int {
			if p.checked[si][ni] {
				return p.simCap[si][ni]
			}
			return len(s.Members)
		}
		var cands candHeap
		cands.nodes = p.nodes
		for _, ni := range idx {
			if p.checked[si][ni] && !p.feasible[si][ni] {
				continue
			}
			n := room(ni)
			if c := min(fitCount(n.free, s.request, capOf(ni)), n.pods); c > 0 {
				cands.c = append(cands.c, cand{ni, c})
			}
		}
		// Best fit first, then by name: a heap, as a gang usually needs the
		// first few of thousands of nodes, which a full sort would order.
		heap.Init(&cands)
		next := 0
		batch := make([]int, 0, lazyBatch)
		for cands.Len() > 0 && next < len(s.Members) {
			// Ask the filters about the next nodes in this order, a batch
			// at a time (in parallel), as far as the members need.
			batch = batch[:0]
			for want := max(lazyBatch, len(s.Members)-next); cands.Len() > 0 && len(batch) < want; {
				batch = append(batch, heap.Pop(&cands).(cand).ni)
			}
			p.ensure(si, batch)
			for _, ni := range batch {
				if next == len(s.Members) {
					break
				}
				if !p.feasible[si][ni] {
					continue
				}
				n := room(ni)
				fit := min(fitCount(n.free, s.request, p.simCap[si][ni]), n.pods)
				for k := 0; k < fit && next < len(s.Members); k++ {
					out[s.Members[next].UID] = p.nodes[ni].name
					take(ni, s.request)
					next++
					placed++
				}
			}
		}
	}
	return out, placed
}

type cand struct{ ni, fit int }

// candHeap orders a shape's candidate nodes for packing: the least room
// for the shape first (best fit), then by node name.
type candHeap struct {
	c     []cand
	nodes []*node
}

func (h *candHeap) Len() int { return len(h.c) }
func (h *candHeap) Less(i, j int) bool {
	if h.c[i].fit != h.c[j].fit {
		return h.c[i].fit < h.c[j].fit
	}
	return h.nodes[h.c[i].ni].name < h.nodes[h.c[j].ni].name
}
func (h *candHeap) Swap(i, j int) { h.c[i], h.c[j] = h.c[j], h.c[i] }
func (h *candHeap) Push(x any)    { h.c = append(h.c, x.(cand)) }
func (h *candHeap) Pop() any {
	last := h.c[len(h.c)-1]
	h.c = h.c[:len(h.c)-1]
	return last
}

// lazyBatch is how many nodes pack has the filters check at once: enough to
// keep the parallel workers busy, few enough that a gang finding room on its
// first nodes does not pay for many more.
const lazyBatch = 16

// size ranks shapes for packing: the sum of each request as a share of the
// largest free amount of that resource on any node.
func (p *planner) size(s *Shape) float64 {
	total := 0.0
	for i, r := range s.request {
		maxFree := int64(0)
		for _, n := range p.nodes {
			maxFree = max(maxFree, n.free[i])
		}
		if maxFree > 0 {
			total += float64(r) / float64(maxFree)
		} else if r > 0 {
			total += 1
		}
	}
	return total
}

func (p *planner) solve() (*Plan, error) {
	sets, err := p.candidates()
	if err != nil {
		return nil, err
	}
	need := p.req.MinMember - len(p.req.Placed)
	bestPlaced, bestSet := -1, domainSet{}
	for _, set := range sets {
		out, placed := p.pack(set.nodes)
		if placed >= need {
			plan := &Plan{Assignments: out, Domain: set.name, Relaxed: set.relaxed && p.req.Topology.Key != ""}
			for _, pod := range p.req.Pending {
				if _, ok := out[pod.UID]; !ok {
					plan.Unplaced = append(plan.Unplaced, pod.UID)
				}
			}
			return plan, nil
		}
		if placed > bestPlaced {
			bestPlaced, bestSet = placed, set
		}
	}
	if bestPlaced < 0 {
		bestPlaced = 0
	}
	return nil, p.explain(bestPlaced, bestSet)
}

func (p *planner) fail(fits int, msg string) *NoPlacementError {
	return &NoPlacementError{Gang: p.req.Gang, Message: fmt.Sprintf("gang %s: %s", p.req.Gang, msg), Fits: fits, Wanted: p.req.MinMember}
}

// explain builds the one message a person reads: what the gang needs, how far
// the best attempt got, and the free amounts of the resource that ran out.
func (p *planner) explain(placed int, set domainSet) error {
	wanted := p.req.MinMember
	fits := placed + len(p.req.Placed)
	members := len(p.req.Pending)
	if len(p.nodes) == 0 {
		return p.fail(fits, fmt.Sprintf("no nodes to place %d members on", members))
	}
	r := p.bottleneck(set.nodes)
	var b strings.Builder
	if r >= 0 {
		name := p.dims.names[r]
		total, per := int64(0), int64(-1)
		for _, s := range p.shapes {
			total += s.request[r] * int64(len(s.Members))
			if per == -1 || per == s.request[r] {
				per = s.request[r]
			} else {
				per = -2
			}
		}
		fmt.Fprintf(&b, "needs %s %s for %d members", format(name, total), name, members)
		if per > 0 && len(p.shapes) == 1 && members > 1 {
			fmt.Fprintf(&b, " (%s per member)", format(name, per))
		}
	} else {
		fmt.Fprintf(&b, "needs room for %d members", members)
	}
	if p.req.Topology.Key != "" && p.req.Topology.Required {
		fmt.Fprintf(&b, " in one %s domain", p.req.Topology.Key)
		if set.name != "" {
			fmt.Fprintf(&b, "; best domain %s", set.name)
		}
	}
	fmt.Fprintf(&b, "; best placement fits %d of %d members", fits, wanted)
	if r >= 0 {
		name := p.dims.names[r]
		fmt.Fprintf(&b, " (free %s per node: %s)", name, p.freeList(set.nodes, r))
		if placed == 0 && p.noNodeFitsOne(set.nodes) {
			b.WriteString("; no node has room for one member")
		}
	}
	if n := p.filtered(); n > 0 {
		fmt.Fprintf(&b, "; %d of %d nodes rejected by other filters", n, len(p.nodes))
	}
	return p.fail(fits, b.String())
}

// bottleneck is the requested resource with the least room relative to the
// request across the nodes: the one to name in the message.
func (p *planner) bottleneck(idx []int) int {
	best, bestRatio := -1, 0.0
	for i := range p.dims.names {
		need, have := int64(0), int64(0)
		for _, s := range p.shapes {
			need += s.request[i] * int64(len(s.Members))
		}
		if need == 0 {
			continue
		}
		for _, ni := range idx {
			have += max(p.nodes[ni].free[i], 0)
		}
		// Fragmentation: enough in total but not on any single node still
		// names the resource that cannot be split.
		ratio := float64(have) / float64(need)
		for _, s := range p.shapes {
			if s.request[i] > 0 {
				fitsSomewhere := false
				for _, ni := range idx {
					fitsSomewhere = fitsSomewhere || p.nodes[ni].free[i] >= s.request[i]
				}
				if !fitsSomewhere {
					ratio = -1
				}
			}
		}
		if best == -1 || ratio < bestRatio {
			best, bestRatio = i, ratio
		}
	}
	return best
}

func (p *planner) freeList(idx []int, r int) string {
	vals := make([]int64, 0, len(idx))
	for _, ni := range idx {
		vals = append(vals, max(p.nodes[ni].free[r], 0))
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] > vals[j] })
	const maxShown = 8
	parts := make([]string, 0, maxShown+1)
	for i, v := range vals {
		if i == maxShown {
			parts = append(parts, fmt.Sprintf("… %d more", len(vals)-maxShown))
			break
		}
		parts = append(parts, format(p.dims.names[r], v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

func (p *planner) noNodeFitsOne(idx []int) bool {
	for _, ni := range idx {
		for _, s := range p.shapes {
			if fitCount(p.nodes[ni].free, s.request, 1) > 0 {
				return false
			}
		}
	}
	return true
}
