package plan

import (
	"fmt"
	"sort"
	"strings"
)

func (p *planner) fail(fits int, msg string) *NoPlacementError {
	return &NoPlacementError{Gang: p.req.Gang, Message: fmt.Sprintf("gang %s: %s", p.req.Gang, msg), Fits: fits, Wanted: p.req.MinMember}
}

// explain builds the one message a person reads: what the gang needs, how far
// the best attempt got, and the free amounts of the resource that ran out.
func (p *planner) explain(best packing, set domainSet) error {
	placed := best.placed
	wanted := p.req.MinMember
	fits := placed + len(p.req.Placed)
	members := len(p.req.Pending)
	if len(p.nodes) == 0 {
		return p.fail(fits, fmt.Sprintf("no nodes to place %d members on", members))
	}
	r := p.bottleneck(set.nodes)
	if best.blocked {
		// Room was there: the members' own constraints on each other
		// stopped the gang, and naming a resource would mislead.
		r = -1
	}
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
	if best.blocked {
		fmt.Fprintf(&b, "; with %d members placed, the filters refuse the next on every node with room (the members' pod affinity, anti-affinity, topology spread or host ports)", fits)
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
