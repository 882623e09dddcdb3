package cli

import (
	"fmt"
	"io"
	"strings"
)

func (o *FitOptions) print(r *FitReport) error {
	switch o.Output {
	case "json", "yaml":
		return printData(o.Out, o.Output, r)
	}
	p := newPainter(o.env, o.Out)
	wide := o.Output == "wide"
	if len(r.Clusters) > 1 {
		if err := renderRanking(o.Out, p, r); err != nil {
			return err
		}
	}
	for i := range r.Clusters {
		if len(r.Clusters) > 1 {
			fmt.Fprintln(o.Out)
		}
		if err := renderClusterFit(o.Out, p, &r.Clusters[i], r.Preemption, wide); err != nil {
			return err
		}
	}
	return nil
}

func (p painter) verdict(v string) string {
	switch v {
	case verdictFits:
		return p.paint(ansiGreen, v)
	case verdictNoFit:
		return p.paint(ansiRed, v)
	}
	return p.paint(ansiYellow, v)
}

func clusterVerdict(c *ClusterFit) string {
	switch {
	case c.Error != "":
		return "error"
	case c.Fits:
		return verdictFits
	case c.FitsAfterPreempting:
		return verdictPreempt
	}
	return verdictNoFit
}

func contextName(c *ClusterFit) string {
	if c.Context == "" {
		return "(current context)"
	}
	return c.Context
}

func renderRanking(w io.Writer, p painter, r *FitReport) error {
	t := &table{}
	t.addPlain("RANK", "CONTEXT", "VERDICT", "PREEMPTS", "GPUS FREE", "PARTIAL GPU NODES", "NODES", "ERROR")
	for i := range r.Clusters {
		c := &r.Clusters[i]
		v := clusterVerdict(c)
		if c.Error != "" {
			t.add(plain(fmt.Sprint(c.Rank)), plain(contextName(c)), painted(v, p.bad(v)), plain("-"), plain("-"), plain("-"), plain("-"), plain(c.Error))
			continue
		}
		preempts := "-"
		if c.VictimUnits > 0 {
			preempts = fmt.Sprintf("%d pods, %d GPUs", c.VictimPods, c.VictimGPUs)
		}
		t.add(plain(fmt.Sprint(c.Rank)), plain(contextName(c)), painted(v, p.verdict(v)), plain(preempts),
			plain(fmt.Sprintf("%d → %d", c.GPUsFree, c.GPUsFreeAfter)),
			plain(fmt.Sprintf("%d → %d", c.PartialGPUNodes, c.PartialGPUNodesAfter)),
			plain(fmt.Sprint(c.Nodes)), plain(""))
	}
	if err := t.write(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "Preemption: %s. Ranked: fits now, then fits after preempting (the fewest pods, then GPUs, evicted first), then does not fit; then the fewest nodes left with GPUs partly allocated.\n", r.Preemption)
	return err
}

// fitMembersShown caps the member names per node in the table (-o wide
// shows them all).
const fitMembersShown = 4

func renderClusterFit(w io.Writer, p painter, c *ClusterFit, preemption string, wide bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", p.bold("Context:"), contextName(c))
	if c.Error != "" {
		fmt.Fprintf(&b, "%s %s\n", p.bold("Error:"), p.bad(c.Error))
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "%s %d nodes, %d bound pods; %d of %d GPUs free, %s with GPUs partly allocated\n",
		p.bold("Snapshot:"), c.Nodes, c.BoundPods, c.GPUsFree, c.GPUs, plural(int64(c.PartialGPUNodes), "node"))
	v := clusterVerdict(c)
	fmt.Fprintf(&b, "%s %s (preemption: %s)\n", p.bold("Verdict:"), p.verdict(v), preemption)
	if c.VictimUnits > 0 {
		fmt.Fprintf(&b, "%s %s of %d pods, %d GPUs\n", p.bold("Preempts:"), plural(int64(c.VictimUnits), "unit"), c.VictimPods, c.VictimGPUs)
	}
	for _, wf := range c.Workloads {
		fmt.Fprintf(&b, "\n%s %s/%s (definition %s): %s\n", wf.Kind, wf.Namespace, wf.Name, wf.Definition, p.verdict(wf.Verdict))
		if wf.Note != "" {
			fmt.Fprintf(&b, "  %s\n", p.dim(wf.Note))
		}
		if q := wf.Queue; q != nil {
			s := q.Summary
			if !q.HasQuota {
				s = p.bad(s)
			}
			fmt.Fprintf(&b, "  %s %s\n", p.bold("Queue:"), s)
		}
		for _, g := range wf.Gangs {
			renderGangFit(&b, p, g, wide)
		}
	}
	fmt.Fprintf(&b, "\n%s %d of %d GPUs free, %s with GPUs partly allocated\n", p.bold("After:"), c.GPUsFreeAfter, c.GPUs, plural(int64(c.PartialGPUNodesAfter), "node"))
	for _, warn := range c.Warnings {
		fmt.Fprintf(&b, "%s %s\n", p.bold("Warning:"), warn)
	}
	for _, n := range c.NotEvaluated {
		fmt.Fprintf(&b, "%s %s\n", p.bold("Not evaluated:"), n)
	}
	if wide && c.Profile != "" {
		fmt.Fprintf(&b, "%s %s\n", p.bold("Judged by:"), c.Profile)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func renderGangFit(b *strings.Builder, p painter, g GangFit, wide bool) {
	name := "Gang " + g.Name
	if g.PodGroup == "" {
		name += " (PodGroup named by the pod-grouper)"
	}
	minWord := "min-member"
	if g.Native {
		name += " (native PodGroup)"
		minWord = "minCount"
	}
	fmt.Fprintf(b, "  %s: %s; %s %d, %d members", name, p.verdict(g.Verdict), minWord, g.MinMember, g.Members)
	if g.Bound > 0 {
		fmt.Fprintf(b, " (%d bound)", g.Bound)
	}
	if g.Priority != nil {
		fmt.Fprintf(b, "; priority %d", *g.Priority)
		if g.PriorityClass != "" {
			fmt.Fprintf(b, " (%s)", g.PriorityClass)
		}
	}
	b.WriteString("\n")
	if t := g.Topology; t != nil {
		mode := "preferred"
		if t.Required {
			mode = "required"
		}
		fmt.Fprintf(b, "    Topology: %s %s", t.Key, mode)
		switch {
		case t.Relaxed:
			b.WriteString(": no single domain has room, spread over several")
		case t.Domain != "":
			fmt.Fprintf(b, ": %s", t.Domain)
		}
		b.WriteString("\n")
	}
	if g.Reason != "" {
		label := "Reason:"
		if g.FitsAfterPreempting {
			label = "Now:"
		}
		fmt.Fprintf(b, "    %s %s\n", label, g.Reason)
	}
	if g.Preemption != "" {
		fmt.Fprintf(b, "    Preemption: %s\n", g.Preemption)
	}
	renderVictims(b, g.Victims, wide)
	if len(g.Nodes) == 0 {
		return
	}
	t := &table{indent: "    "}
	head := []string{"NODE"}
	if g.Topology != nil {
		head = append(head, "DOMAIN")
	}
	t.addPlain(append(head, "GPUS FREE", "MEMBERS")...)
	for _, n := range g.Nodes {
		row := []string{n.Name}
		if g.Topology != nil {
			row = append(row, n.Domain)
		}
		members := n.Members
		extra := ""
		if !wide && len(members) > fitMembersShown {
			extra = fmt.Sprintf(" … (+%d)", len(members)-fitMembersShown)
			members = members[:fitMembersShown]
		}
		free := fmt.Sprintf("%d → %d of %d", n.GPUsFree, n.GPUsFreeAfter, n.GPUs)
		if n.GPUsFreed > 0 {
			free = fmt.Sprintf("%d +%d freed → %d of %d", n.GPUsFree, n.GPUsFreed, n.GPUsFreeAfter, n.GPUs)
		}
		t.addPlain(append(row, free, strings.Join(members, ", ")+extra)...)
	}
	_ = t.write(b)
}

// fitVictimsShown caps the victim rows in the table (-o wide shows them
// all).
const fitVictimsShown = 10

// renderVictims is the table of the units a gang would preempt.
func renderVictims(b *strings.Builder, vs []VictimFit, wide bool) {
	if len(vs) == 0 {
		return
	}
	pods, gpus := 0, int64(0)
	for _, v := range vs {
		pods += v.Pods
		gpus += v.GPUs
	}
	fmt.Fprintf(b, "    Preempts %s: %d pods, %d GPUs, each evicted whole\n", plural(int64(len(vs)), "unit"), pods, gpus)
	t := &table{indent: "    "}
	t.addPlain("KIND", "VICTIM", "PODS", "GPUS", "PRIORITY", "NODES")
	shown := vs
	if !wide && len(vs) > fitVictimsShown {
		shown = vs[:fitVictimsShown]
	}
	for _, v := range shown {
		kind := v.Kind
		if v.Mechanism != "" && v.Mechanism != "muster" {
			kind += " (" + v.Mechanism + ")"
		}
		name := v.Namespace + "/" + v.Name
		if v.Gang != "" {
			name += " of gang " + v.Gang
		}
		if v.ViolatesPDB {
			name += " (violates its PodDisruptionBudget)"
		}
		nodes := v.Nodes
		extra := ""
		if len(nodes) > fitMembersShown {
			extra = fmt.Sprintf(" … (+%d)", len(nodes)-fitMembersShown)
			nodes = nodes[:fitMembersShown]
		}
		t.addPlain(kind, name, fmt.Sprint(v.Pods), fmt.Sprint(v.GPUs), fmt.Sprint(v.Priority), strings.Join(nodes, ", ")+extra)
	}
	_ = t.write(b)
	if len(shown) < len(vs) {
		fmt.Fprintf(b, "    … %d more (-o wide shows them all)\n", len(vs)-len(shown))
	}
}
