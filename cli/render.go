package cli

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// renderDescription writes the table view of one workload.
func renderDescription(w io.Writer, p painter, d *Description, wide bool, componentLimit int) error {
	hdr := &table{}
	kind := d.Kind
	if d.APIVersion != "" {
		kind += " (" + d.APIVersion + ")"
	}
	hdr.add(plain("Name:"), painted(d.Name, p.bold(d.Name)))
	if d.Namespace != "" {
		hdr.addPlain("Namespace:", d.Namespace)
	}
	hdr.addPlain("Kind:", kind)
	def := d.Definition + " (" + d.DefinitionOrigin
	if d.DefinitionSource != "" {
		def += ": " + d.DefinitionSource
	}
	hdr.addPlain("Definition:", def+")")
	if d.Age != "" {
		hdr.addPlain("Age:", d.Age)
	}
	phases := make([]string, len(d.Phases))
	for i, ph := range d.Phases {
		phases[i] = p.status(ph)
	}
	ph := strings.Join(phases, ", ")
	plainPh := strings.Join(d.Phases, ", ")
	if d.Phase != "" && !contains(d.Phases, d.Phase) {
		ph += " (phase " + d.Phase + ")"
		plainPh += " (phase " + d.Phase + ")"
	}
	hdr.add(plain("Status:"), painted(plainPh, ph))
	hdr.addPlain("Pods:", podsSummary(d))
	hdr.addPlain("GPUs:", fmt.Sprintf("%d", d.Totals.GPUs))
	if err := hdr.write(w); err != nil {
		return err
	}
	if len(d.Conditions) > 0 && wide {
		fmt.Fprintln(w, "\nConditions:")
		t := &table{indent: "  "}
		t.addPlain("TYPE", "STATUS", "REASON", "MESSAGE")
		for _, c := range d.Conditions {
			t.addPlain(c.Type, c.Status, c.Reason, c.Message)
		}
		_ = t.write(w)
	}

	fmt.Fprintln(w, "\nComponents:")
	t := &table{indent: "  "}
	head := []string{"NAME", "READY", "GPUS", "NODE", "STATUS"}
	if !d.Live {
		head[1] = "PODS"
	}
	if wide {
		head = append(head, "GANG", "REPLICA", "RESTARTS")
	}
	head = append(head, "REASON")
	t.addPlain(head...)
	gangReasons := map[string]string{}
	for _, g := range d.Gangs {
		if g.Reason != "" {
			gangReasons[g.Name] = g.Reason
		}
	}
	renderTree(t, p, d, wide, componentLimit, gangReasons)
	if err := t.write(w); err != nil {
		return err
	}

	if len(d.Unmatched) > 0 {
		fmt.Fprintf(w, "\n%s\n", p.bad(fmt.Sprintf("Pods no component selects (%d): check the definition's podSelector", len(d.Unmatched))))
		t := &table{indent: "  "}
		for _, u := range d.Unmatched {
			t.addPlain(u.Name, u.Reason)
		}
		_ = t.write(w)
	}

	if len(d.Gangs) > 0 {
		fmt.Fprintln(w, "\nGangs:")
		// PRIORITY and ELASTIC only when a gang has one: most gangs have
		// neither, and an empty column says nothing.
		withPrio, withElastic := false, false
		for _, g := range d.Gangs {
			withPrio = withPrio || g.Priority != nil
			withElastic = withElastic || g.Elastic != nil
		}
		t := &table{indent: "  "}
		head := []string{"NAME", "MIN-MEMBER", "BOUND"}
		if withElastic {
			head = append(head, "ELASTIC")
		}
		if withPrio {
			head = append(head, "PRIORITY")
		}
		t.addPlain(append(head, "PHASE", "MIN-RESOURCES", "REASON")...)
		for _, g := range d.Gangs {
			reason := g.Reason
			cells := []cell{plain(g.Name), plain(fmt.Sprint(g.MinMember)), plain(boundCell(g))}
			if withElastic {
				el := ""
				if g.Elastic != nil {
					el = g.Elastic.String()
				}
				cells = append(cells, plain(el))
			}
			if withPrio {
				cells = append(cells, plain(priorityCell(g.Priority, g.PriorityClass)))
			}
			cells = append(cells, painted(g.Phase, p.status(g.Phase)), plain(resourceString(g.MinResources)), painted(reason, p.bad(reason)))
			t.add(cells...)
		}
		_ = t.write(w)
	}
	if len(d.Plans) > 0 {
		fmt.Fprintln(w, "\nGang plan (from the spec):")
		t := &table{indent: "  "}
		t.addPlain("DEFINITION", "PODGROUP", "INSTANCES", "MIN-MEMBER", "MEMBERS", "MIN-RESOURCES", "TOPOLOGY")
		for _, pl := range d.Plans {
			topo := ""
			if pl.TopologyRequired != "" {
				topo = "required " + pl.TopologyRequired
			} else if pl.TopologyPreferred != "" {
				topo = "preferred " + pl.TopologyPreferred
			}
			// A grouped gang's PodGroups are named after values its pods
			// carry (internal/naming): the pattern, as the spec cannot
			// tell the values.
			pg := pl.PodGroup
			if pg == "" {
				pg = d.Name + "-" + pl.Definition + "-<key> (one per key)"
			}
			t.addPlain(pl.Definition, pg, fmt.Sprint(pl.Instances), fmt.Sprint(pl.MinMember), strings.Join(pl.Members, ", "), resourceString(pl.MinResources), topo)
		}
		_ = t.write(w)
	} else if len(d.Gangs) == 0 {
		fmt.Fprintln(w, "\nGangs: none (the definition has no gang instruction, or the workload opted out)")
	}

	fmt.Fprintln(w, "\nResources:")
	rt := &table{indent: "  "}
	rt.addPlain("COMPONENT", "REPLICAS", "GPU", "CPU", "MEMORY")
	for _, c := range d.Components {
		if !c.HasPods {
			continue
		}
		if len(c.Instances) > 1 {
			// One row per instance: a leader and its workers differ.
			for _, in := range c.Instances {
				n := in.Pods.Desired
				rt.addPlain(c.Name+"/"+in.ID, fmt.Sprint(n), fmt.Sprint(in.GPUs), formatCPU(in.CPUMillisPerPod*n), formatMemory(in.MemoryBytesPerPod*n))
			}
			continue
		}
		rt.addPlain(c.Name, fmt.Sprint(c.Replicas), fmt.Sprint(c.GPUs), formatCPU(c.CPUMillis), formatMemory(c.MemoryBytes))
	}
	tot := d.Totals
	rt.add(painted("TOTAL", p.bold("TOTAL")), plain(fmt.Sprint(tot.Pods)), plain(fmt.Sprint(tot.GPUs)), plain(formatCPU(tot.CPUMillis)), plain(formatMemory(tot.MemoryBytes)))
	if err := rt.write(w); err != nil {
		return err
	}
	if len(d.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, s := range d.Warnings {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	return nil
}

// priorityCell shows a gang's priority and its class: "1000 (high)".
func priorityCell(prio *int32, class string) string {
	if prio == nil {
		return "-"
	}
	if class == "" {
		return fmt.Sprint(*prio)
	}
	return fmt.Sprintf("%d (%s)", *prio, class)
}

func podsSummary(d *Description) string {
	t := d.Totals
	switch {
	case d.Live && t.Pods == 1 && t.ObservedPods <= 1:
		// One pod (a bare pod, a one-pod workload): say what it is
		// rather than "1/1 ready, 1 bound (1 found)".
		return onePodSummary(d)
	case d.Live:
		return fmt.Sprintf("%d/%d ready, %d bound (%d found)", t.ReadyPods, t.Pods, t.BoundPods, t.ObservedPods)
	case t.ObservedPods > 0:
		return fmt.Sprintf("%d desired, %d given with --pods", t.Pods, t.ObservedPods)
	}
	s := fmt.Sprintf("%d desired", t.Pods)
	if t.MinPods != t.Pods {
		s += fmt.Sprintf(" (min %d)", t.MinPods)
	}
	return s
}

// onePodSummary is the Pods line of a live workload of one pod.
func onePodSummary(d *Description) string {
	var pv *PodView
	for ci := range d.Components {
		for ii := range d.Components[ci].Instances {
			if items := d.Components[ci].Instances[ii].Items; len(items) > 0 {
				pv = &items[0]
			}
		}
	}
	switch {
	case d.Totals.ObservedPods == 0 || pv == nil:
		return "1 pod, not created yet"
	case pv.Ready:
		return "1 pod, ready, on node " + pv.Node
	case pv.Node != "":
		return "1 pod, not ready, on node " + pv.Node
	}
	return "1 pod, not ready, not on a node yet"
}

// renderTree adds the components → instances → pods rows. componentLimit
// caps the child components shown under each parent (0 shows all).
func renderTree(t *table, p painter, d *Description, wide bool, componentLimit int, gangReasons map[string]string) {
	children := map[string][]int{}
	var roots []int
	names := map[string]bool{}
	for _, c := range d.Components {
		names[c.Name] = true
	}
	for i, c := range d.Components {
		if c.Parent == "" || !names[c.Parent] {
			roots = append(roots, i)
		} else {
			children[c.Parent] = append(children[c.Parent], i)
		}
	}
	cols := 5
	if wide {
		cols = 8
	}
	row := func(prefix, name string, shown string, rest ...cell) {
		cells := []cell{painted(prefix+name, prefix+shown)}
		cells = append(cells, rest...)
		for len(cells) < cols {
			cells = append(cells, plain(""))
		}
		t.add(cells...)
	}
	var walk func(ci int, prefix, childPrefix string)
	walk = func(ci int, prefix, childPrefix string) {
		c := d.Components[ci]
		label := c.Name
		if c.Kind != "" {
			label += " (" + c.Kind[strings.LastIndex(c.Kind, "/")+1:] + ")"
		}
		ready, gpus := "", ""
		if c.HasPods {
			ready = fmt.Sprintf("%d/%d", c.Pods.Ready, c.Pods.Desired)
			if !d.Live {
				ready = plural(c.Pods.Desired, "pod")
			}
			gpus = fmt.Sprint(c.GPUs)
		} else if c.Replicas > 1 {
			ready = fmt.Sprintf("×%d", c.Replicas)
		}
		readyShown := ready
		if d.Live && c.HasPods && c.Pods.Ready < c.Pods.Desired {
			readyShown = p.paint(ansiYellow, ready)
		}
		row(prefix, label, p.bold(label), painted(ready, readyShown), plain(gpus))

		type node struct {
			kind int // 0 instance, 1 component
			idx  int
		}
		var nodes []node
		showInstances := len(c.Instances) > 1 || (len(c.Instances) == 1 && c.Instances[0].ID != "")
		if showInstances {
			for i := range c.Instances {
				nodes = append(nodes, node{0, i})
			}
		}
		kids, hidden := limitComponents(d, children[c.Name], componentLimit)
		for _, k := range kids {
			nodes = append(nodes, node{1, k})
		}
		// Pods of a single-instance component hang off the component.
		var pods []PodView
		omitted := 0
		if !showInstances && len(c.Instances) == 1 {
			pods, omitted = c.Instances[0].Items, c.Instances[0].Omitted
		}
		total := len(pods) + len(nodes)
		if omitted > 0 {
			total++
		}
		if hidden > 0 {
			total++
		}
		n := 0
		branch := func() (string, string) {
			n++
			if n == total {
				return childPrefix + "└─ ", childPrefix + "   "
			}
			return childPrefix + "├─ ", childPrefix + "│  "
		}
		for _, pv := range pods {
			b, _ := branch()
			podRow(t, p, b, pv, wide, gangReasons)
		}
		if omitted > 0 {
			b, _ := branch()
			row(b, fmt.Sprintf("… %d more pods (--pod-limit 0 shows all)", omitted), p.dim(fmt.Sprintf("… %d more pods (--pod-limit 0 shows all)", omitted)))
		}
		for _, nd := range nodes {
			b, cp := branch()
			if nd.kind == 1 {
				walk(nd.idx, b, cp)
				continue
			}
			inst := c.Instances[nd.idx]
			lbl := "instance " + inst.ID
			r, g := "", ""
			if c.HasPods {
				r = fmt.Sprintf("%d/%d", inst.Pods.Ready, inst.Pods.Desired)
				if !d.Live {
					r = plural(inst.Pods.Desired, "pod")
				}
				g = fmt.Sprint(inst.GPUs)
			}
			row(b, lbl, lbl, plain(r), plain(g))
			m := 0
			tot := len(inst.Items)
			if inst.Omitted > 0 {
				tot++
			}
			for _, pv := range inst.Items {
				m++
				pb := cp + "├─ "
				if m == tot {
					pb = cp + "└─ "
				}
				podRow(t, p, pb, pv, wide, gangReasons)
			}
			if inst.Omitted > 0 {
				s := fmt.Sprintf("… %d more pods (--pod-limit 0 shows all)", inst.Omitted)
				row(cp+"└─ ", s, p.dim(s))
			}
		}
		if hidden > 0 {
			b, _ := branch()
			s := fmt.Sprintf("… %d more components (--component-limit 0 shows all)", hidden)
			row(b, s, p.dim(s))
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
}

// limitComponents keeps at most limit of the components kids (0 keeps all):
// those with an unready pod first, then those missing pods, then the rest,
// each group in definition order, so what needs a look is never cut. It
// returns the kept ones in definition order and how many were left out.
func limitComponents(d *Description, kids []int, limit int) ([]int, int) {
	if limit <= 0 || len(kids) <= limit {
		return kids, 0
	}
	rank := func(i int) int {
		c := d.Components[i]
		switch {
		case d.Live && c.Pods.Observed > c.Pods.Ready:
			return 0
		case d.Live && c.Pods.Observed < c.Pods.Desired:
			return 1
		}
		return 2
	}
	order := slices.Clone(kids)
	slices.SortStableFunc(order, func(a, b int) int { return rank(a) - rank(b) })
	kept := order[:limit]
	slices.Sort(kept)
	return kept, len(kids) - limit
}

func podRow(t *table, p painter, prefix string, pv PodView, wide bool, gangReasons map[string]string) {
	// A gang's pods share the scheduler's message; say it once, under Gangs.
	if gr := gangReasons[pv.Gang]; gr != "" && strings.HasSuffix(pv.Reason, gr) {
		pv.Reason = strings.TrimSuffix(strings.TrimSuffix(pv.Reason, gr), ": ") + " (gang " + pv.Gang + ", see Gangs)"
	}
	ready := "no"
	if pv.Ready {
		ready = "yes"
	}
	if pv.Phase == "" {
		ready = "-"
	}
	cells := []cell{plain(prefix + pv.Name), painted(ready, p.status(ready)), plain(fmt.Sprint(pv.GPUs)), plain(pv.Node), painted(pv.Phase, p.status(pv.Phase))}
	if wide {
		cells = append(cells, plain(pv.Gang), plain(pv.Replica), plain(fmt.Sprint(pv.Restarts)))
	}
	cells = append(cells, painted(pv.Reason, p.bad(pv.Reason)))
	t.add(cells...)
}

func resourceString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// renderWorkloads writes the table of "muster get".
func renderWorkloads(w io.Writer, p painter, rows []WorkloadRow, allNamespaces, wide bool) error {
	t := &table{}
	var head []string
	if allNamespaces {
		head = append(head, "NAMESPACE")
	}
	head = append(head, "KIND", "NAME", "STATUS", "PODS", "GPUS", "GANGS", "AGE")
	if wide {
		head = append(head, "PRIORITY", "DEFINITION", "NODES")
	}
	t.addPlain(head...)
	for _, r := range rows {
		var cells []cell
		if allNamespaces {
			cells = append(cells, plain(r.Namespace))
		}
		status := strings.Join(r.Phases, ",")
		shown := make([]string, len(r.Phases))
		for i, ph := range r.Phases {
			shown[i] = p.status(ph)
		}
		shownStatus := strings.Join(shown, ",")
		if r.Error != "" {
			status, shownStatus = "Error", p.bad("Error")
		}
		gangs := "-"
		if r.Gangs > 0 {
			gangs = fmt.Sprintf("%d/%d", r.GangsBound, r.Gangs)
		}
		if r.GangsUnschedulable > 0 {
			// The phase of a workload whose gang cannot be placed often
			// still reads Initializing: say it is stuck.
			gangs += fmt.Sprintf(" (%d unschedulable)", r.GangsUnschedulable)
		}
		age := r.Age
		if age == "" {
			age = "<unknown>"
		}
		cells = append(cells, plain(r.Kind), plain(r.Name), painted(status, shownStatus),
			plain(fmt.Sprintf("%d/%d", r.ReadyPods, r.Pods)), plain(fmt.Sprint(r.GPUs)), plain(gangs), plain(age))
		if wide {
			cells = append(cells, plain(priorityCell(r.Priority, "")), plain(r.Definition), plain(nodeList(r.Nodes)))
		}
		t.add(cells...)
	}
	return t.write(w)
}

// nodeList shows up to three nodes and a count of the rest.
func nodeList(nodes []string) string {
	if len(nodes) == 0 {
		return "<none>"
	}
	if len(nodes) <= 3 {
		return strings.Join(nodes, ",")
	}
	return strings.Join(nodes[:3], ",") + fmt.Sprintf(",+%d", len(nodes)-3)
}

func plural(n int64, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// boundCell is the BOUND column: bound members of all the members the gang
// needs or has, whichever is more, so it never reads "4/3" for a gang
// scaled past its minMember.
func boundCell(g GangView) string {
	return fmt.Sprintf("%d/%d", g.Bound, max(g.MinMember, int32(g.Pods)))
}
