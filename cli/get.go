package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

const getLong = `List top-level workloads of every kind muster has a definition for, with their
status, pods ready/desired, GPUs requested, gangs bound/planned and age.

TYPE is what kubectl accepts (kind, plural, short name or kind.group); TYPE NAME or
TYPE/NAME shows one workload. -l/--selector filters the workloads (not their pods) by
label, kubectl syntax. --phase keeps the workloads one of whose phases is the one
given; repeat it to keep any of several (the filter applies after the workloads are
read, so it does not make the listing cheaper). Workloads are listed in pages of
--chunk-size objects (0: in one request), as kubectl does.

"Top-level" means the object has no controller owner that muster also has a
definition for: a JobSet created by a TrainJob is listed as the TrainJob. Kinds
the cluster does not serve are skipped. Without TYPE every defined kind is listed
(the same as --all-types).

Gangs are the workload's PodGroups: scheduler-plugins ones and native ones
(scheduling.k8s.io/v1beta1, which its pods name in spec.schedulingGroup or which
carry its UID; a native PodGroup of the basic policy is no gang). A gang is bound
when min-member (a native one's minCount) of its members are on nodes; -o json
counts the native ones in nativeGangs.`

const getExample = `  # Every workload in the current namespace
  muster get

  # Every JobSet in every namespace, with nodes and definitions
  muster get jobsets -A -o wide

  # One workload (both forms work)
  muster get jobset trainer
  muster get jobset/trainer

  # Failed or degraded JobSets of one team
  muster get jobsets --phase Failed --phase Degraded -l team=nlp

  # Every running workload, whatever its type
  muster get --all-types --phase Running

  # Machine-readable
  muster get --all-types -n team-a -o json`

// GetOptions are the options of "muster get".
type GetOptions struct {
	env *Env

	TypeArg       string
	NameArg       string
	AllTypes      bool
	AllNamespaces bool
	Output        string
	// Phases keeps the workloads with any of these phases (canonical
	// spelling); empty keeps all.
	Phases []string
	// Selector is a label selector on the workloads.
	Selector string
	// ChunkSize is the page size of list requests; 0 lists in one.
	ChunkSize int64

	genericiooptions.IOStreams
}

// NewCmdGet returns the get command.
func NewCmdGet(env *Env) *cobra.Command {
	o := &GetOptions{env: env, Output: "table", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "get [TYPE [NAME] | TYPE/NAME | --all-types] [-A] [-l SELECTOR] [--phase PHASE]... [--chunk-size N] [-o table|wide|json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "List top-level workloads with status, pods, GPUs and gangs",
		Long:                  getLong,
		Example:               getExample,
		// TYPE, TYPE NAME and TYPE/NAME complete as describe's do.
		ValidArgsFunction: completeTypeAndName(env),
		RunE:              runOptions(o),
	}
	cmd.Flags().BoolVar(&o.AllTypes, "all-types", false, "List every defined kind (the default without TYPE)")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List workloads in every namespace")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Label selector on the workloads (not their pods), kubectl syntax: -l team=nlp,tier!=dev")
	cmd.Flags().StringArrayVar(&o.Phases, "phase", nil, "Keep workloads with this phase; repeat to keep any of several. One of "+strings.Join(phaseNames(), ", "))
	cmd.Flags().Int64Var(&o.ChunkSize, "chunk-size", 500, "List workloads in pages of this many objects, as kubectl does; 0 lists them in one request")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// Complete takes TYPE, TYPE NAME or TYPE/NAME, kubectl's forms.
func (o *GetOptions) Complete(args []string) error {
	switch len(args) {
	case 0:
	case 1:
		t, n, qualified := strings.Cut(args[0], "/")
		if qualified && (t == "" || n == "") {
			return usageErrorf("%q: want TYPE/NAME", args[0])
		}
		o.TypeArg, o.NameArg = t, n
	case 2:
		if strings.Contains(args[0], "/") {
			return usageErrorf("NAME given twice: in %q and as %q", args[0], args[1])
		}
		o.TypeArg, o.NameArg = args[0], args[1]
	default:
		return usageErrorf("get takes TYPE, TYPE NAME or TYPE/NAME, got %d arguments", len(args))
	}
	if strings.Contains(o.NameArg, "/") {
		return usageErrorf("NAME %q must not contain \"/\"", o.NameArg)
	}
	return nil
}

// Validate checks the flags and their combinations.
func (o *GetOptions) Validate() error {
	if o.TypeArg != "" && o.AllTypes {
		return usageErrorf("give TYPE or --all-types, not both")
	}
	if o.ChunkSize < 0 {
		return usageErrorf("--chunk-size must be 0 (one request) or more, not %d", o.ChunkSize)
	}
	if _, err := labels.Parse(o.Selector); err != nil {
		return usageErrorf("--selector: %v", err)
	}
	if o.Selector != "" && o.NameArg != "" {
		return usageErrorf("give NAME or --selector, not both")
	}
	for i, ph := range o.Phases {
		canon, ok := canonicalPhase(ph)
		if !ok {
			return usageErrorf("--phase %q: want one of %s", ph, strings.Join(phaseNames(), ", "))
		}
		o.Phases[i] = canon
	}
	return validateOutput(o.Output)
}

// phaseNames lists the phases a workload can have, in the order the status
// mappings are evaluated.
func phaseNames() []string {
	out := make([]string, 0, len(allPhases))
	for _, p := range allPhases {
		out = append(out, string(p))
	}
	return out
}

var allPhases = []kartav1alpha1.ResourceStatus{
	kartav1alpha1.StatusResuming, kartav1alpha1.StatusSuspending, kartav1alpha1.StatusSuspended,
	kartav1alpha1.StatusRunning, kartav1alpha1.StatusFailed, kartav1alpha1.StatusCompleted,
	kartav1alpha1.StatusInitializing, kartav1alpha1.StatusDegraded, kartav1alpha1.StatusUndefined,
}

// canonicalPhase spells a phase as the status vocabulary does, whatever
// its case.
func canonicalPhase(s string) (string, bool) {
	for _, p := range allPhases {
		if strings.EqualFold(s, string(p)) {
			return string(p), true
		}
	}
	return "", false
}

// hasPhase reports whether any of the row's phases is one of want.
func hasPhase(row WorkloadRow, want []string) bool {
	for _, p := range row.Phases {
		if slices.Contains(want, p) {
			return true
		}
	}
	return false
}

// Run lists the workloads.
func (o *GetOptions) Run(ctx context.Context) error {
	return reportNoDefinition(o.Out, o.Output, o.TypeArg, o.run(ctx))
}

func (o *GetOptions) run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	c, err := o.env.Cluster()
	if err != nil {
		return err
	}
	defs, err := o.env.loadDefinitions(ctx, c)
	if err != nil {
		return err
	}
	ns := ""
	if !o.AllNamespaces {
		ns = c.namespaceOr(*o.env.ConfigFlags.Namespace)
	}
	kinds, err := o.kindsToList(c, defs)
	if err != nil {
		return err
	}
	wls, owned, err := o.topLevelWorkloads(ctx, c, defs, kinds, ns)
	if err != nil {
		return err
	}
	if len(wls) > 0 {
		// Pods and PodGroups, once for all workloads.
		byUID := map[types.UID]int{}
		for i, w := range wls {
			byUID[w.obj.GetUID()] = i
		}
		if err := o.addPods(ctx, c, ns, wls, byUID); err != nil {
			return err
		}
		o.addPodGroups(ctx, c, ns, wls, byUID)
		o.addKueue(ctx, c, ns, wls)
	}
	rows, filtered := o.rows(ctx, c, ns, wls)
	if len(rows) == 0 && filtered > 0 && o.Output != "json" && o.Output != "yaml" {
		fmt.Fprintf(o.ErrOut, "No workloads with phase %s (%d found with other phases).\n", strings.Join(o.Phases, " or "), filtered)
		return nil
	}
	return o.print(rows, ns, owned)
}

// rows sums up each workload, keeps those with a phase asked for and
// sorts them by namespace, kind and name; filtered counts the others.
func (o *GetOptions) rows(ctx context.Context, c *Cluster, ns string, wls []listedWorkload) (rows []WorkloadRow, filtered int) {
	now := o.env.Now()
	rows = make([]WorkloadRow, 0, len(wls))
	refs := liveRefs(c)
	templates := map[string][]resourcev1.ResourceClaimTemplate{}
	if len(wls) > 0 {
		items, err := listClaimTemplates(ctx, c, ns)
		if err != nil {
			o.env.warnf("%v", err)
		}
		for _, t := range items {
			templates[t.Namespace] = append(templates[t.Namespace], t)
		}
	}
	byNamespace := map[string]definition.ClaimTemplates{}
	for ns, items := range templates {
		byNamespace[ns] = claimTemplatesByName(items)
	}
	for _, w := range wls {
		rctx, refWarnings := refs.bind(ctx, w.ent.Compiled, w.obj)
		for _, msg := range refWarnings {
			o.env.warnf("%s %s/%s: %s", w.obj.GetKind(), w.obj.GetNamespace(), w.obj.GetName(), msg)
		}
		gpus := gpuCount{names: o.env.gpuNames(), templates: byNamespace[w.obj.GetNamespace()]}
		row := workloadRow(rctx, w.obj, w.ent, w.pods, w.pgs, now, gpus)
		if w.kueue != nil {
			in := &kueueInput{Workload: w.kueue}
			in.ClusterQueueName, _, _ = unstructured.NestedString(w.kueue.Object, "status", "admission", "clusterQueue")
			row.Queue = queueView(in, gpus, "")
		}
		if len(o.Phases) > 0 && !hasPhase(row, o.Phases) {
			filtered++
			continue
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return rows, filtered
}

func (o *GetOptions) print(rows []WorkloadRow, ns string, owned map[string]int) error {
	if o.Output == "json" || o.Output == "yaml" {
		return printData(o.Out, o.Output, WorkloadList{Items: rows})
	}
	if len(rows) == 0 {
		where := ""
		if ns != "" {
			where = " in namespace " + ns
		}
		fmt.Fprintf(o.ErrOut, "No top-level workloads found%s.\n", where)
		// muster get lists what no defined workload owns; say what was
		// left out, or a user with pods in front of them reads "none".
		res := make([]string, 0, len(owned))
		for r := range owned {
			res = append(res, r)
		}
		sort.Strings(res)
		for _, r := range res {
			fmt.Fprintf(o.ErrOut, "%d %s%s belong to other workloads; muster get lists only the top-level ones (muster get --all-types, or muster describe %s/NAME for one).\n",
				owned[r], r, where, strings.TrimSuffix(r, "s"))
		}
		return nil
	}
	return renderWorkloads(o.Out, newPainter(o.env, o.Out), rows, o.AllNamespaces, o.Output == "wide")
}

// renderWorkloads writes the table of "muster get".
func renderWorkloads(w io.Writer, p painter, rows []WorkloadRow, allNamespaces, wide bool) error {
	t := &table{}
	var head []string
	if allNamespaces {
		head = append(head, "NAMESPACE")
	}
	head = append(head, "KIND", "NAME", "STATUS", "PODS", "GPUS", "GANGS")
	// QUEUE only where Kueue holds a workload: which gate it is behind.
	withQueue := false
	for _, r := range rows {
		withQueue = withQueue || r.Queue != nil
	}
	if withQueue {
		head = append(head, "QUEUE")
	}
	head = append(head, "AGE")
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
			plain(fmt.Sprintf("%d/%d", r.ReadyPods, r.Pods)), plain(fmt.Sprint(r.GPUs)), plain(gangs))
		if withQueue {
			cells = append(cells, plain(queueCell(r)))
		}
		cells = append(cells, plain(age))
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
