package cli

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// renderDescriptions writes describe's views in format (table, wide,
// json, yaml). A view is complete when it comes here and nothing is worked
// out below but layout, so another renderer starts from the same
// Descriptions without a second describe.
func renderDescriptions(w io.Writer, p painter, descs []*Description, format string, componentLimit int) error {
	switch format {
	case "json", "yaml":
		if len(descs) == 1 {
			return printData(w, format, descs[0])
		}
		return printData(w, format, struct {
			Items []*Description `json:"items"`
		}{descs})
	}
	for i, d := range descs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := renderDescription(w, p, d, format == "wide", componentLimit); err != nil {
			return err
		}
	}
	return nil
}

// renderDescription writes the table view of one workload.
func renderDescription(w io.Writer, p painter, d *Description, wide bool, componentLimit int) error {
	if err := writeHeader(w, p, d); err != nil {
		return err
	}
	if len(d.Conditions) > 0 && wide {
		writeConditions(w, d)
	}
	if err := writeComponents(w, p, d, wide, componentLimit); err != nil {
		return err
	}
	if len(d.Unmatched) > 0 {
		writeUnmatched(w, p, d)
	}
	if len(d.Gangs) > 0 {
		writeGangs(w, p, d)
	}
	if len(d.Plans) > 0 {
		writePlans(w, d)
	} else if len(d.Gangs) == 0 {
		fmt.Fprintln(w, "\nGangs: none (the definition has no gang instruction, or the workload opted out)")
	}
	if err := writeResources(w, p, d); err != nil {
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

// writeHeader writes what the workload is, its definition, status, pods
// and GPUs.
func writeHeader(w io.Writer, p painter, d *Description) error {
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
	if d.Queue != nil {
		hdr.addPlain("Queue:", d.Queue.Summary)
	}
	hdr.addPlain("Pods:", podsSummary(d))
	hdr.addPlain("GPUs:", fmt.Sprintf("%d", d.Totals.GPUs))
	return hdr.write(w)
}

func writeConditions(w io.Writer, d *Description) {
	fmt.Fprintln(w, "\nConditions:")
	t := &table{indent: "  "}
	t.addPlain("TYPE", "STATUS", "REASON", "MESSAGE")
	for _, c := range d.Conditions {
		t.addPlain(c.Type, c.Status, c.Reason, c.Message)
	}
	_ = t.write(w)
}

// writeComponents writes the tree of components, instances and pods.
func writeComponents(w io.Writer, p painter, d *Description, wide bool, componentLimit int) error {
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
	return t.write(w)
}

func writeUnmatched(w io.Writer, p painter, d *Description) {
	fmt.Fprintf(w, "\n%s\n", p.bad(fmt.Sprintf("Pods no component selects (%d): check the definition's podSelector", len(d.Unmatched))))
	t := &table{indent: "  "}
	for _, u := range d.Unmatched {
		t.addPlain(u.Name, u.Reason)
	}
	_ = t.write(w)
}

func writeGangs(w io.Writer, p painter, d *Description) {
	fmt.Fprintln(w, "\nGangs:")
	// PRIORITY and ELASTIC only when a gang has one: most gangs have
	// neither, and an empty column says nothing.
	// API and MEMBERS only when a gang is native: which PodGroup API holds
	// each gang, and a native gang's members scheduled and ready.
	withPrio, withElastic, withNative := false, false, false
	for _, g := range d.Gangs {
		withPrio = withPrio || g.Priority != nil
		withElastic = withElastic || g.Elastic != nil
		withNative = withNative || g.Native
	}
	t := &table{indent: "  "}
	head := []string{"NAME", "MIN-MEMBER", "BOUND"}
	if withNative {
		head = append(head, "API", "MEMBERS")
	}
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
		if withNative {
			cells = append(cells, nativeCells(g)...)
		}
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

func writePlans(w io.Writer, d *Description) {
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
}

// writeResources writes the requests per component and in all.
func writeResources(w io.Writer, p painter, d *Description) error {
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
	return rt.write(w)
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
	tw := &treeWriter{t: t, p: p, d: d, wide: wide, limit: componentLimit, gangReasons: gangReasons, cols: 5}
	if wide {
		tw.cols = 8
	}
	var roots []int
	roots, tw.children = componentTree(d)
	for _, r := range roots {
		tw.component(r, "", "")
	}
}

// componentTree finds each component's children by its parent's name; a
// component whose parent is not in the view is a root.
func componentTree(d *Description) (roots []int, children map[string][]int) {
	children = map[string][]int{}
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
	return roots, children
}

// treeWriter adds the rows of the tree of one Description to a table.
type treeWriter struct {
	t           *table
	p           painter
	d           *Description
	wide        bool
	limit       int // child components shown under a parent, 0 = all
	gangReasons map[string]string
	children    map[string][]int
	cols        int
}

// row adds a row whose first cell is the tree prefix and name; the other
// cells are padded to the table's columns.
func (tw *treeWriter) row(prefix, name string, shown string, rest ...cell) {
	cells := []cell{painted(prefix+name, prefix+shown)}
	cells = append(cells, rest...)
	for len(cells) < tw.cols {
		cells = append(cells, plain(""))
	}
	tw.t.add(cells...)
}

// more adds the dimmed row that counts what a limit left out.
func (tw *treeWriter) more(prefix, s string) {
	tw.row(prefix, s, tw.p.dim(s))
}

// component adds the row of component ci and under it its pods (one
// instance) or instances, then its child components.
func (tw *treeWriter) component(ci int, prefix, childPrefix string) {
	c := tw.d.Components[ci]
	tw.componentRow(c, prefix)

	showInstances := len(c.Instances) > 1 || (len(c.Instances) == 1 && c.Instances[0].ID != "")
	kids, hidden := limitComponents(tw.d, tw.children[c.Name], tw.limit)
	// Pods of a single-instance component hang off the component.
	var pods []PodView
	omitted := 0
	if !showInstances && len(c.Instances) == 1 {
		pods, omitted = c.Instances[0].Items, c.Instances[0].Omitted
	}
	total := len(pods) + len(kids)
	if showInstances {
		total += len(c.Instances)
	}
	if omitted > 0 {
		total++
	}
	if hidden > 0 {
		total++
	}
	br := &branches{prefix: childPrefix, total: total}
	for _, pv := range pods {
		b, _ := br.next()
		podRow(tw.t, tw.p, b, pv, tw.wide, tw.gangReasons)
	}
	if omitted > 0 {
		b, _ := br.next()
		tw.more(b, fmt.Sprintf("… %d more pods (--pod-limit 0 shows all)", omitted))
	}
	if showInstances {
		for _, inst := range c.Instances {
			b, cp := br.next()
			tw.instance(c, inst, b, cp)
		}
	}
	for _, k := range kids {
		b, cp := br.next()
		tw.component(k, b, cp)
	}
	if hidden > 0 {
		b, _ := br.next()
		tw.more(b, fmt.Sprintf("… %d more components (--component-limit 0 shows all)", hidden))
	}
}

func (tw *treeWriter) componentRow(c ComponentView, prefix string) {
	label := c.Name
	if c.Kind != "" {
		label += " (" + c.Kind[strings.LastIndex(c.Kind, "/")+1:] + ")"
	}
	ready, gpus := "", ""
	if c.HasPods {
		ready = readyCell(c.Pods, tw.d.Live)
		gpus = fmt.Sprint(c.GPUs)
	} else if c.Replicas > 1 {
		ready = fmt.Sprintf("×%d", c.Replicas)
	}
	readyShown := ready
	if tw.d.Live && c.HasPods && c.Pods.Ready < c.Pods.Desired {
		readyShown = tw.p.paint(ansiYellow, ready)
	}
	tw.row(prefix, label, tw.p.bold(label), painted(ready, readyShown), plain(gpus))
}

// instance adds the row of one instance of c and its pods under it.
func (tw *treeWriter) instance(c ComponentView, inst InstanceView, prefix, childPrefix string) {
	lbl := "instance " + inst.ID
	r, g := "", ""
	if c.HasPods {
		r = readyCell(inst.Pods, tw.d.Live)
		g = fmt.Sprint(inst.GPUs)
	}
	tw.row(prefix, lbl, lbl, plain(r), plain(g))
	total := len(inst.Items)
	if inst.Omitted > 0 {
		total++
	}
	br := &branches{prefix: childPrefix, total: total}
	for _, pv := range inst.Items {
		b, _ := br.next()
		podRow(tw.t, tw.p, b, pv, tw.wide, tw.gangReasons)
	}
	if inst.Omitted > 0 {
		b, _ := br.next()
		tw.more(b, fmt.Sprintf("… %d more pods (--pod-limit 0 shows all)", inst.Omitted))
	}
}

// readyCell is the READY column of a component or instance live (ready of
// desired), the PODS column offline (desired).
func readyCell(c PodCounts, live bool) string {
	if !live {
		return plural(c.Desired, "pod")
	}
	return fmt.Sprintf("%d/%d", c.Ready, c.Desired)
}

// branches hands out the prefixes of a node's children in the tree: "├─ "
// before each but the last, "└─ " before the last, and the prefix their
// own children hang under.
type branches struct {
	prefix   string
	n, total int
}

func (b *branches) next() (branch, childPrefix string) {
	b.n++
	if b.n == b.total {
		return b.prefix + "└─ ", b.prefix + "   "
	}
	return b.prefix + "├─ ", b.prefix + "│  "
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
	// A gang's pods share the scheduler's message; say it once, under Gangs
	// (where a native gang's reason may go on with the newest event).
	gr := gangReasons[pv.Gang]
	if cause, msg, ok := strings.Cut(pv.Reason, ": "); gr != "" && ok && msg != "" && !strings.HasSuffix(pv.Reason, gr) && strings.HasPrefix(gr, msg) {
		pv.Reason = cause + " (gang " + pv.Gang + ", see Gangs)"
	} else if gr != "" && strings.HasSuffix(pv.Reason, gr) {
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
