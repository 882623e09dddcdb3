package plan

import (
	"container/heap"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// packing is one attempt's result on a set of nodes.
type packing struct {
	out    map[types.UID]string
	placed int
	// blocked: a member found room by resources but the filters refused
	// it on every such node once the members before it were placed
	// (packSession only).
	blocked bool
	// order and shape: the members in the order placed, and the index of
	// each one's shape (packSession only).
	order []types.UID
	shape map[types.UID]int
}

// taken holds what one packing attempt took from nodes, copied on first
// use: a gang touches a few of the nodes, and copying thousands of them per
// attempt showed in the profile.
type taken struct {
	nodes []*node
	n     map[int]*node
}

func newTaken(nodes []*node) *taken { return &taken{nodes: nodes, n: map[int]*node{}} }

// room is node ni as this attempt left it.
func (t *taken) room(ni int) *node {
	if n, ok := t.n[ni]; ok {
		return n
	}
	return t.nodes[ni]
}

func (t *taken) take(ni int, req vec) {
	n, ok := t.n[ni]
	if !ok {
		c := *t.nodes[ni]
		c.free = append(vec(nil), c.free...)
		n = &c
		t.n[ni] = n
	}
	n.free.sub(req)
	n.pods--
}

// packOrder is the order shapes are packed in: the biggest first.
func (p *planner) packOrder() []int {
	order := make([]int, len(p.shapes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return p.size(p.shapes[order[a]]) > p.size(p.shapes[order[b]])
	})
	return order
}

// pack places shapes on the given nodes: the biggest shape first, each on the
// nodes with the least room for it first (best fit), so large members are not
// left with fragments. Each node is judged by the filters once per shape, as
// the snapshot is: the members of such gangs do not interfere.
func (p *planner) pack(idx []int) packing {
	t := newTaken(p.nodes)
	res := packing{out: map[types.UID]string{}}
	for _, si := range p.packOrder() {
		s := p.shapes[si]
		// Sorting by room before the filters are asked gives the order an
		// eager evaluation would: the filters only remove nodes from it.
		cands := p.nodeCands(si, idx, t)
		next := 0
		batch := make([]int, 0, lazyBatch)
		for cands.Len() > 0 && next < len(s.Members) {
			// Ask the filters about the next nodes in this order, a batch
			// at a time (in parallel), as far as the members need.
			batch = batch[:0]
			for want := max(lazyBatch, len(s.Members)-next); cands.Len() > 0 && len(batch) < want; {
				batch = append(batch, heap.Pop(cands).(cand).ni)
			}
			p.ensure(si, batch)
			for _, ni := range batch {
				if next == len(s.Members) {
					break
				}
				if !p.feasible[si][ni] {
					continue
				}
				fit := min(fitCount(t.room(ni).free, s.request, len(s.Members)), t.room(ni).pods)
				for k := 0; k < fit && next < len(s.Members); k++ {
					res.out[s.Members[next].UID] = p.nodes[ni].name
					t.take(ni, s.request)
					next++
					res.placed++
				}
			}
		}
	}
	return res
}

// nodeCands are the nodes of idx with room for a member of shape si and
// not refused by the filters yet, best fit first.
func (p *planner) nodeCands(si int, idx []int, t *taken) *candHeap {
	s := p.shapes[si]
	cands := &candHeap{nodes: p.nodes}
	for _, ni := range idx {
		if p.checked[si][ni] && !p.feasible[si][ni] {
			continue
		}
		n := t.room(ni)
		if c := min(fitCount(n.free, s.request, len(s.Members)), n.pods); c > 0 {
			cands.c = append(cands.c, cand{ni, c})
		}
	}
	// Best fit first, then by name: a heap, as a gang usually needs the
	// first few of thousands of nodes, which a full sort would order.
	heap.Init(cands)
	return cands
}

// packSession places the members of a gang whose members interfere with
// each other's filters (pod affinity or anti-affinity, hard topology
// spread, host ports) one at a time, each on the first node in best-fit
// order whose filters pass with the members before it counted on their
// nodes (Filter.Session) — the judgement the scheduler's filters make when
// it reserves the members one after the other. A node refused for one
// member may take a later one (a spread constraint whose other domains
// filled up), so each member is judged on the nodes from the start. The
// filters' verdict on the snapshot alone does not rule a node out either
// (a required affinity is met once a member is placed), resources do.
func (p *planner) packSession(idx []int) packing {
	t := newTaken(p.nodes)
	sess := p.req.Filter.Session(p.ctx)
	// infos are the nodes with this attempt's members added: what the
	// filters see.
	infos := map[int]fwk.NodeInfo{}
	info := func(ni int) fwk.NodeInfo {
		if c, ok := infos[ni]; ok {
			return c
		}
		return p.nodes[ni].info
	}
	res := packing{out: map[types.UID]string{}, shape: map[types.UID]int{}}
	for _, si := range p.packOrder() {
		s := p.shapes[si]
		order := p.sessionOrder(si, idx, t)
		for _, m := range s.Members {
			if p.ctx.Err() != nil {
				return res
			}
			ni, roomy := p.firstFit(sess, s, order, t, info)
			if ni < 0 {
				res.blocked = res.blocked || roomy
				break
			}
			bound := m.DeepCopy()
			bound.Spec.NodeName = p.nodes[ni].name
			pi, err := framework.NewPodInfo(bound)
			if err != nil {
				// An affinity term that does not parse: the real Filter
				// refuses the member anyway.
				res.blocked = true
				break
			}
			sess.Place(p.ctx, s, pi, info(ni))
			c, ok := infos[ni]
			if !ok {
				c = p.nodes[ni].info.Snapshot()
				infos[ni] = c
			}
			c.AddPodInfo(pi)
			res.out[m.UID] = p.nodes[ni].name
			res.order = append(res.order, m.UID)
			res.shape[m.UID] = si
			t.take(ni, s.request)
			res.placed++
		}
	}
	return res
}

// sessionOrder is the best-fit order of the nodes of idx with room for one
// member of shape si, as the snapshot is.
func (p *planner) sessionOrder(si int, idx []int, t *taken) []int {
	cands := p.nodeCands(si, idx, t)
	order := make([]int, 0, cands.Len())
	for cands.Len() > 0 {
		order = append(order, heap.Pop(cands).(cand).ni)
	}
	return order
}

// firstFit is the first node of order with room for one more member of s
// that the session's filters accept, or -1; roomy reports whether some node
// had the room (so the filters, not resources, refused the member). The
// first node is asked alone (members of a shape often share a node), the
// rest in parallel batches whose first success in order wins.
func (p *planner) firstFit(sess Session, s *Shape, order []int, t *taken, info func(int) fwk.NodeInfo) (int, bool) {
	roomy := false
	var batch []int
	ok := make([]bool, lazyBatch)
	for i := 0; i < len(order); {
		batch = batch[:0]
		want := lazyBatch
		if i == 0 {
			want = 1
		}
		for ; i < len(order) && len(batch) < want; i++ {
			if n := t.room(order[i]); n.pods > 0 && fitCount(n.free, s.request, 1) > 0 {
				batch = append(batch, order[i])
			}
		}
		if len(batch) == 0 {
			continue
		}
		roomy = true
		check := func(k int) { ok[k] = sess.Fits(p.ctx, s, info(batch[k])) }
		if p.req.Parallelize != nil && len(batch) > 1 {
			p.req.Parallelize(p.ctx, len(batch), check)
		} else {
			for k := range batch {
				check(k)
			}
		}
		for k, ni := range batch {
			if ok[k] {
				return ni, true
			}
		}
	}
	return -1, roomy
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
